#!/usr/bin/env bash
# CTest finetune.cli: ./finetune_roberta end to end on a tiny random RoBERTa and synthetic GLUE-layout tasks
# (scripts/repro/make_tiny_roberta.py): it learns, --eval-only of its --save reproduces its scores, an interrupted
# and resumed run ends bit-identical to an uninterrupted one, dynamic padding and gradient accumulation give the
# results of their fixed-shape / one-batch equivalents, 8-bit optimizer states and fp8 PRAC storage work and resume,
# and bad input fails with a clear error. Builds nothing:
# ./finetune_roberta must exist at the repository root. About 20 s on one core.
set -u
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1
BIN=$PWD/finetune_roberta
T=$(mktemp -d "${TMPDIR:-/tmp}/finetune_cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { echo "PASS: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
[ -x "$BIN" ] || { echo "FAIL: $BIN is not built"; echo "0 passed, 1 failed"; exit 1; }
python3 scripts/repro/make_tiny_roberta.py --model-dir "$T/model" --data-dir "$T/data" || { echo "FAIL: generator"; exit 1; }
M="--init-from $T/model --max-len 64 --lr 3e-3 --log-interval 100"

# 1. it learns: the synthetic MRPC's label is the second sentence's word pool; chance is 0.5 on 128 balanced-ish dev
# examples, so an accuracy of 0.9 or more has probability < 1e-19 under guessing
"$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 3 --save "$T/s1" --log "$T/s1.jsonl" > "$T/s1.out" 2>&1 \
  && ok "training run exited 0" || { bad "training run failed:"; tail -5 "$T/s1.out"; }
final=$(grep '^final |' "$T/s1.out" | sed 's/^final | //; s/ (after.*//')
acc=$(sed -n 's/.*accuracy \([0-9.]*\).*/\1/p' <<<"$final")
python3 -c "import sys; sys.exit(0 if float('${acc:-0}') >= 0.9 else 1)" && ok "dev accuracy $acc >= 0.9 (chance 0.5)" \
  || bad "dev accuracy '${acc}' below 0.9"
grep -q '^best  | f1' "$T/s1.out" && ok "best and final both printed" || bad "no best line"
grep -q '"type":"glue_eval","task":"mrpc","split":"dev"' "$T/s1.jsonl" && grep -q '"type":"memory"' "$T/s1.jsonl" \
  && ok "JSONL has glue_eval and memory records" || bad "JSONL lacks glue_eval or memory records"
grep -q 'measured: the CPU arena .* (equal to the plan)' "$T/s1.out" && ok "activation memory: arena == plan" \
  || bad "activation memory report missing or arena != plan"
for f in config.json model.safetensors vocab.json merges.txt; do
  [ -s "$T/s1/$f" ] || bad "--save lacks $f"
done
# its config.json keeps what the base's says and ours does not write: transformers would take its defaults instead
# (dropout 0.1, where the base has 0.0: another model when trained on). keeps_base_keys CONFIG: that check
keeps_base_keys() {
  python3 - "$T/model/config.json" "$1" <<'PY'
import json, sys
base, saved = (json.load(open(p)) for p in sys.argv[1:])
for key in ("hidden_dropout_prob", "attention_probs_dropout_prob", "bos_token_id", "eos_token_id"):
    assert key in base and saved.get(key) == base[key], (key, base.get(key), saved.get(key))
PY
}
keeps_base_keys "$T/s1/config.json" && ok "--save's config.json keeps the base's dropout and token ids" \
  || bad "--save's config.json lost keys of the base's"

# 1b. a head whose config.json orders the classes otherwise (roberta-large-mnli's contradiction, neutral, entailment)
# is read in the task's order, as run_glue does: the first run's head with its two rows swapped and its id2label
# reversed is the same classifier and scores the same (its config was ignored: the scores of the swapped classes)
python3 - "$T/s1" "$T/s1r" <<'PY' || bad "could not write the reordered head"
import json, os, shutil, struct, sys
src, dst = sys.argv[1:]
shutil.copytree(src, dst)
path = os.path.join(dst, "model.safetensors")
raw = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
for name in ("classifier.out_proj.weight", "classifier.out_proj.bias"):
    t = header[name]
    assert t["dtype"] == "F32" and t["shape"][0] == 2
    a, b = (8 + n + o for o in t["data_offsets"])
    half = (b - a) // 2
    raw[a:b] = raw[a + half:b] + raw[a:a + half]
open(path, "wb").write(raw)
cfg = json.load(open(os.path.join(dst, "config.json")))
cfg["id2label"] = {"0": "equivalent", "1": "not_equivalent"}
cfg["label2id"] = {"equivalent": 0, "not_equivalent": 1}
json.dump(cfg, open(os.path.join(dst, "config.json"), "w"))
PY
ev1=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/s1" --eval-only 2>&1 | grep '^dev loss')
out=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/s1r" --eval-only 2>&1)
[ -n "$ev1" ] && [ "$(grep '^dev loss' <<<"$out")" = "$ev1" ] \
  && grep -q "notice: its config.json orders the classes otherwise: the head's rows 1, 0 are the task's not_equivalent, equivalent" <<<"$out" \
  && ok "a head of the other class order scores the same: '$ev1'" || bad "reordered head: '$ev1' vs $(grep -E '^dev loss|notice' <<<"$out")"

# scores printed to a full disk are lost: an error, not exit 0
"$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/s1" --eval-only > /dev/full 2> "$T/full.err"
rc=$?
[ $rc = 1 ] && grep -q "cannot write the run's output to the standard output (" "$T/full.err" \
  && ok "--eval-only to a full disk: exit 1, said" || bad "--eval-only to a full disk: rc $rc, $(cat "$T/full.err")"

# --log to a named pipe with a reader: the check that it is a metrics log opened it for reading and waited for a
# writer (the run itself) forever
mkfifo "$T/lfifo"
cat "$T/lfifo" > "$T/lfifo.out" &
reader=$!
timeout 120 "$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 --log "$T/lfifo" > "$T/lfifo.run" 2>&1
rc=$?
kill $reader 2>/dev/null; wait $reader 2>/dev/null
[ $rc = 0 ] && grep -q '^{"type":"step"' "$T/lfifo.out" && ok "--log to a named pipe: records through it" \
  || bad "--log to a named pipe: rc $rc (124: hung), $(tail -2 "$T/lfifo.run")"

# --log on one of the run's inputs, the training file through a hard link: refused by the input it is, the file intact
# (it was refused before as no metrics log, which did not say why)
train=$(ls "$T/data/mrpc"/train.* | head -1)
ln "$train" "$T/trainlink"
sum=$(md5sum < "$train")
out=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 --log "$T/trainlink" --overwrite 2>&1); rc=$?
[ $rc = 1 ] && grep -q -- "--log $T/trainlink is $train, --data-dir, an input of this run" <<< "$out" \
  && [ "$(md5sum < "$train")" = "$sum" ] && ok "--log on a hard link to the training file: refused, the file intact" \
  || bad "--log on the training file: rc $rc, $(tail -2 <<< "$out")"
# ... and that check reads no split: a test split in both formats matters only to --predict (the check refused it)
cp -r "$T/data/mrpc" "$T/both"
cp "$T/both/dev.tsv" "$T/both/test.tsv"
echo '{}' > "$T/both/test.jsonl"
out=$("$BIN" --task mrpc --data-dir "$T/both" --init-from "$T/s1" --eval-only --log "$T/both.jsonl" 2>&1); rc=$?
[ $rc = 0 ] && ok "a test split in two formats, no --predict: evaluated" || bad "two test files: rc $rc, $(tail -2 <<< "$out")"

# --log named as a split of --data-dir that is not there yet (dev.jsonl beside dev.tsv): refused before anything is
# written (the run wrote it, and every later run refused the directory: both files of the split); a run refused after
# its log was opened (--grad-accum past an epoch's batches) leaves no log, nor the directory made for it
dev=$(ls "$T/data/mrpc"/dev.* | head -1)
other=$T/data/mrpc/dev.$([ "${dev##*.}" = tsv ] && echo jsonl || echo tsv)
out=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 --log "$other" 2>&1); rc=$?
[ $rc = 1 ] && grep -q -- "has the name of --data-dir's dev split" <<<"$out" && [ ! -e "$other" ] \
  && ok "--log named as a split of --data-dir: refused, nothing written" || bad "--log $other: rc $rc, $(tail -2 <<<"$out")"
out=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 --grad-accum 100 --log "$T/newlog/sub/l.jsonl" 2>&1)
rc=$?
[ $rc = 1 ] && grep -q -- "--grad-accum 100 is more than" <<<"$out" && [ ! -e "$T/newlog" ] \
  && ok "a run refused after it opened its --log: no log left, nor the directory made for it" \
  || bad "a refused run's log: rc $rc, $(tail -2 <<<"$out"), $(find "$T/newlog" 2>&1)"

# 1c. a base whose config.json sets dropout (roberta-base's 0.1) is said to train without it (it was silent, while
# transformers' run_glue trains with it); not a base without dropout, nor --eval-only (evaluation has none); a rate
# out of [0, 1] is refused
python3 - "$T/s1" "$T/s1d" <<'PY' || bad "could not write the dropout configs"
import json, shutil, sys
src, dst = sys.argv[1:]
for d, rate in ((dst, 0.1), (dst + "x", 1.5)):
    shutil.copytree(src, d)
    c = json.load(open(d + "/config.json"))
    c["hidden_dropout_prob"] = c["attention_probs_dropout_prob"] = rate
    json.dump(c, open(d + "/config.json", "w"))
PY
out=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/s1d" --max-len 64 --epochs 1 2>&1); rc=$?
ev=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/s1d" --eval-only 2>&1)
bx=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/s1dx" --eval-only 2>&1); rcx=$?
[ $rc = 0 ] && grep -q "notice: $T/s1d/config.json sets dropout (up to 0.1); this trainer has none" <<<"$out" \
  && ! grep -q dropout "$T/s1.out" && ! grep -q dropout <<<"$ev" \
  && [ $rcx = 1 ] && grep -q 'key "hidden_dropout_prob" = 1.5 is not a dropout rate in \[0, 1\]' <<<"$bx" \
  && ok "a config with dropout: said that the trainer has none (not without it, not for --eval-only); 1.5 refused" \
  || bad "dropout: rc $rc, '$(grep dropout <<<"$out")'; --eval-only '$(grep dropout <<<"$ev")'; 1.5: rc $rcx $(tail -1 <<<"$bx")"

# 2. --eval-only of a saved directory: the very scores of the run's last evaluation, to the printed digit (STS-B:
# continuous correlations, sensitive to any change in the arithmetic, e.g. another padded length)
"$BIN" --task stsb --data-dir "$T/data/stsb" $M --epochs 2 --save "$T/s2" > "$T/s2.out" 2>&1 || bad "STS-B run failed"
final=$(grep '^final |' "$T/s2.out" | sed 's/^final | //; s/ (after.*//')
ev=$("$BIN" --task stsb --data-dir "$T/data/stsb" --init-from "$T/s2" --eval-only 2>&1 | grep '^dev loss' | sed 's/^dev loss [0-9.]* | //')
[ -n "$final" ] && [ "$ev" = "$final" ] && ok "--eval-only of --save: '$ev'" || bad "--eval-only '$ev' != final '$final'"
# with --prac: the same scores, and no PRAC site table (an evaluation compresses nothing; the table was printed), nor
# a note on fp8 storage (it was printed after the notice that --prac changes nothing)
out=$("$BIN" --task stsb --data-dir "$T/data/stsb" --init-from "$T/s2" --eval-only --prac prac 2>&1)
[ "$(grep '^dev loss' <<<"$out" | sed 's/^dev loss [0-9.]* | //')" = "$ev" ] && ! grep -q 'PRAC sites' <<<"$out" \
  && ! grep -q -- '--prac-storage' <<<"$out" \
  && grep -q 'notice: --prac changes nothing in this run' <<<"$out" && ok "--eval-only --prac: the same scores, no site table" \
  || bad "--eval-only --prac: $(grep -E '^dev loss|PRAC sites|notice' <<<"$out")"

# 2a. --save records --max-len (tokenizer_config.json's model_max_length): --eval-only of it without --max-len
# truncates as the training run did (it took 512, the model's positions, and scored untruncated examples: other scores)
"$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --max-len 12 --epochs 1 --save "$T/s12" > "$T/s12.out" 2>&1 \
  || bad "--max-len 12 run failed"
final=$(grep '^epoch 1/1 | dev loss' "$T/s12.out" | sed 's/^epoch 1\/1 | //; s/ | best .*//')  # loss and scores
out=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/s12" --eval-only 2>&1)
[ -n "$final" ] && [ "$(grep '^dev loss' <<<"$out")" = "$final" ] \
  && grep -q "^--max-len 12: .*tokenizer_config.json's model_max_length" <<<"$out" \
  && ok "--eval-only of a --max-len 12 run: its scores, at its length" \
  || bad "--max-len 12: final '$final', --eval-only $(grep -E '^dev loss|^--max-len' <<<"$out")"
# a model_max_length that is no length: ignored with a warning (it was silent); transformers' "no limit" (1e30) silently
cp -r "$T/model" "$T/model_mml"
for v in '"abc"' -5 2.5 1e30; do
  python3 -c 'import json, sys; json.dump({"model_max_length": json.loads(sys.argv[2])}, open(sys.argv[1], "w"))' \
    "$T/model_mml/tokenizer_config.json" "$v"
  out=$("$BIN" --task mrpc --init-from "$T/model_mml" --plan 2>&1); rc=$?  # (no --max-len: the file gives it)
  if [ "$v" = 1e30 ]; then want=0; else want=1; fi
  got=$(grep -c "warning: .*tokenizer_config.json gives model_max_length .*not a whole number from 1" <<<"$out")
  [ $rc -eq 0 ] && [ "$got" = "$want" ] && ok "model_max_length $v: $([ $want = 1 ] && echo warned || echo no limit, silently)" \
    || bad "model_max_length $v: rc $rc, $got warning(s): $(head -c 600 <<<"$out")"
done
# with --plan --json the warning (and the note of a length taken from the file) goes to stderr: stdout stays JSON
for v in '"abc"' 12; do
  python3 -c 'import json, sys; json.dump({"model_max_length": json.loads(sys.argv[2])}, open(sys.argv[1], "w"))' \
    "$T/model_mml/tokenizer_config.json" "$v"
  "$BIN" --task mrpc --init-from "$T/model_mml" --plan --json >"$T/mml.json" 2>"$T/mml.err"; rc=$?
  [ $rc -eq 0 ] && python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$T/mml.json" \
    && grep -qE "warning: .*model_max_length|^--max-len 12: " "$T/mml.err" \
    && ok "--plan --json with model_max_length $v: stdout is JSON, the note on stderr" \
    || bad "--plan --json, model_max_length $v: rc $rc, $(head -c 300 "$T/mml.json") | $(head -c 300 "$T/mml.err")"
done
# a broken tokenizer_config.json in --init-from costs no --save at the end of a run: a warning, a fresh one
cp -r "$T/model" "$T/model_badtc" && echo '[1, 2' > "$T/model_badtc/tokenizer_config.json"
out=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --init-from "$T/model_badtc" --epochs 1 --save "$T/sbad" 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q 'warning: .*tokenizer_config.json is not a JSON object' <<<"$out" \
  && grep -q '"model_max_length": 64' "$T/sbad/tokenizer_config.json" && ok "a broken tokenizer_config.json: --save written" \
  || bad "broken tokenizer_config.json: rc $rc, $(tail -2 <<<"$out")"
if python3 -c 'import transformers' 2>/dev/null; then  # transformers reads it as the tokenizer's length too
  n=$(python3 -c 'import sys; from transformers import AutoTokenizer
print(AutoTokenizer.from_pretrained(sys.argv[1]).model_max_length)' "$T/s12" 2>/dev/null | tail -1)
  [ "$n" = 12 ] && ok "transformers' AutoTokenizer of the --save: model_max_length 12" || bad "AutoTokenizer: '$n'"
fi

# 2b. a --save that fails after its weights (exactly there: common/kill_point.h) leaves the earlier model's directory
# as it was, byte for byte, with no staging directory (it left new weights beside the old config and tokenizer)
snap() { (cd "$1" && ls -A && md5sum -- *); }
before=$(snap "$T/s2")
out=$(PRAC_TEST_KILL_AT=save.weights_written:error "$BIN" --task stsb --data-dir "$T/data/stsb" $M --epochs 1 \
  --seed 9 --save "$T/s2" --overwrite 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q 'test: an error at save.weights_written' <<<"$out" && [ "$(snap "$T/s2")" = "$before" ] \
  && ok "a failed --save left the earlier model as it was" || bad "failed --save: rc $rc, $(ls -A "$T/s2")"


# 2b'. STS-B's test split as Hugging Face datasets writes it (label -1.0 on every row) given as the dev split: said to
# have no scores (it read as scores outside [0, 5], then as a constant target whose correlations are undefined)
mkdir -p "$T/data/stsb_test" && cp "$T/data/stsb/train.tsv" "$T/data/stsb_test/"
printf '{"sentence1": "a cat", "sentence2": "a dog", "label": -1.0, "idx": 0}\n{"sentence1": "red", "sentence2": "blue", "label": -1.0, "idx": 1}\n' \
  > "$T/data/stsb_test/dev.jsonl"
out=$("$BIN" --task stsb --data-dir "$T/data/stsb_test" $M --epochs 1 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "has no score" <<<"$out" && grep -q "GLUE's test files have none" <<<"$out" \
  && ok "an STS-B test split as dev: no scores, said" || bad "STS-B test split: rc $rc, $out"

# 2c. a --save directory another run holds (flock(1) stands in for it) is refused before training: the later of two
# runs saving there replaced the other's model with exit 0
out=$(flock -n "$T/s2" "$BIN" --task stsb --data-dir "$T/data/stsb" $M --epochs 1 --save "$T/s2" --overwrite 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "is in use by another run" <<<"$out" && ! grep -q '^final |' <<<"$out" && \
  [ "$(snap "$T/s2")" = "$before" ] && ok "a --save another run holds: refused, untouched" || bad "held --save: rc $rc, $out"
# PRAC's default ranks are Table 5's, r1 = r2 = 2 on every site (appendix D: rank r1 + r2 = 4; they were the trainers'
# fractions of the width, 8 + 8 of 32 here, 224 + 224 at roberta-base); a class's fractions given alone replace its
# class's ranks only
"$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 --prac prac > "$T/pr_def.out" 2>&1 || bad "--prac prac run failed"
"$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 --prac prac --prac-linear 0.25,0.25 > "$T/pr_frac.out" 2>&1 \
  || bad "--prac-linear run failed"
sites() { grep -E '^\| [a-z_]+ +\| (linear|nonlinear) ' "$1" | awk -F'|' '{gsub(/ +/, " ", $3); print $2 $3}' | sed 's/ k=.*//'; }
[ "$(sites "$T/pr_def.out" | grep -c ' r1=2 r2=2$')" = 6 ] && [ "$(sites "$T/pr_def.out" | wc -l)" = 6 ] \
  && ok "--prac prac: Table 5's ranks 2,2 at all 6 sites" || bad "--prac prac default ranks: $(sites "$T/pr_def.out")"
[ "$(sites "$T/pr_frac.out" | grep -c ' linear .* r1=2 r2=2$')" = 0 ] \
  && [ "$(sites "$T/pr_frac.out" | grep -c ' nonlinear .* r1=2 r2=2$')" = 3 ] \
  && grep -q 'fch_gelu .* linear n=128 r1=32 r2=32$' <(sites "$T/pr_frac.out") \
  && ok "--prac-linear 0.25,0.25: the linear sites at a quarter of the width each, the nonlinear at 2,2" \
  || bad "--prac-linear 0.25,0.25: $(sites "$T/pr_frac.out")"
# 3. bit-exact resume: killed right after step 23 (mid epoch 2; checkpoints every 5 steps), resumed, against an
# uninterrupted run; PRAC on, its bases refreshed every 5 / 3 steps, so their state is part of the checkpoint
P="--task mrpc --data-dir $T/data/mrpc $M --epochs 2 --prac prac --prac-linear-ranks 2,2 --prac-nonlinear-ranks 2,2 --prac-t1 5 --prac-t2 3"
"$BIN" $P --save "$T/ra" --log "$T/ra.jsonl" > "$T/ra.out" 2>&1 || bad "uninterrupted PRAC run failed"
PRAC_TEST_DIE_AFTER_STEP=23 "$BIN" $P --ckpt-dir "$T/ck" --ckpt-every 5 --save "$T/rb" > "$T/rb1.out" 2>&1
[ $? -eq 137 ] && ok "run killed after step 23" || bad "the kill did not happen"
"$BIN" $P --ckpt-dir "$T/ck" --ckpt-every 5 --save "$T/rb" --resume --log "$T/rb.jsonl" > "$T/rb2.out" 2>&1 \
  && grep -q 'resumed from .*step_00000020 at step 20' "$T/rb2.out" && ok "resumed at step 20" || bad "resume failed"
# (it said "loaded MODEL/model.safetensors: ... the classification head is new" of the weights the checkpoint's replace)
grep -q "for its shapes: the weights are the checkpoint's" "$T/rb2.out" && ! grep -q 'head is new' "$T/rb2.out" \
  && ok "a resume says the weights are the checkpoint's" || bad "a resume's loading line: $(grep -E 'model.safetensors' "$T/rb2.out")"
cmp -s "$T/ra/model.safetensors" "$T/rb/model.safetensors" && ok "resumed model.safetensors == uninterrupted" \
  || bad "resumed weights differ from the uninterrupted run's"
[ -n "$(grep '^final' "$T/ra.out")" ] && [ "$(grep '^final' "$T/ra.out")" = "$(grep '^final' "$T/rb2.out")" ] && ok "resumed final scores equal" \
  || bad "final scores differ after resume"
# --ckpt-every 4 meets the epoch's end (16 steps): that step is checkpointed once, before the epoch's evaluation (it
# was written twice, before and after: either resumes into the evaluation), then every 4 steps, and the last (32)
# twice: before the final evaluation (a kill during it lost the last epoch) and after it (the best score, --save's)
"$BIN" $P --ckpt-dir "$T/ck4" --ckpt-every 4 > "$T/r4.out" 2>&1 || bad "--ckpt-every 4 run failed"
[ "$(grep -c '^checkpoint: .*step_00000016$' "$T/r4.out")" = 1 ] && [ "$(grep -c '^checkpoint: .*step_00000032$' "$T/r4.out")" = 2 ] \
  && [ "$(grep -c '^checkpoint:' "$T/r4.out")" = 9 ] \
  && ok "--ckpt-every 4: 9 checkpoints, the epoch's end once, the last twice" || bad "--ckpt-every 4: $(grep '^checkpoint:' "$T/r4.out")"
# killed during the first epoch's evaluation (--ckpt-every 0): the epoch's checkpoint was written before it (it came
# after: the epoch was lost), the resume runs the evaluation again, logs it once, and ends as the uninterrupted run
PRAC_TEST_KILL_AT=eval.batch "$BIN" $P --ckpt-dir "$T/ck_evalkill" --save "$T/evalkill_save" --log "$T/evalkill_save.jsonl" > "$T/evalkill1.out" 2>&1
rc=$?; [ $rc -eq 137 ] && [ -d "$T/ck_evalkill/step_00000016" ] && ! grep -q '^epoch 1/2 | dev loss' "$T/evalkill1.out" \
  && ok "killed during the first evaluation: the epoch's checkpoint is there" || bad "kill in an evaluation: rc $rc, $(ls "$T/ck_evalkill")"
"$BIN" $P --ckpt-dir "$T/ck_evalkill" --save "$T/evalkill_save" --log "$T/evalkill_save.jsonl" --resume > "$T/evalkill2.out" 2>&1 \
  && grep -q 'resumed from .*step_00000016 at step 16' "$T/evalkill2.out" && cmp -s "$T/ra/model.safetensors" "$T/evalkill_save/model.safetensors" \
  && [ "$(grep '^epoch 1/2 | dev loss' "$T/evalkill2.out")" = "$(grep '^epoch 1/2 | dev loss' "$T/ra.out")" ] \
  && [ "$(grep -c '"type":"glue_eval"' "$T/evalkill_save.jsonl")" = "$(grep -c '"type":"glue_eval"' "$T/ra.jsonl")" ] \
  && ok "resumed into the evaluation: the same score, once in the log, the same weights" \
  || bad "resume into the evaluation: $(grep -E 'resumed|epoch 1/2' "$T/evalkill2.out"), $(grep -c glue_eval "$T/evalkill_save.jsonl") records"
# a stop signal there ends the evaluation at its next batch (it waited for the whole evaluation), exit 143; resumed,
# the evaluation runs first
PRAC_TEST_KILL_AT=eval.batch:15 "$BIN" $P --ckpt-dir "$T/ck_evalstop" > "$T/evalstop1.out" 2>&1; rc=$?
[ $rc -eq 143 ] && grep -q '^epoch 1/2 | evaluation stopped by a signal: --resume runs it again' "$T/evalstop1.out" \
  && grep -q 'received signal 15: stopping after 16 of 32 steps' "$T/evalstop1.out" && ! grep -q '^epoch 1/2 | dev loss' "$T/evalstop1.out" \
  && ok "a stop signal during an evaluation: stopped at once, exit 143" || bad "stop in an evaluation: rc $rc, $(tail -3 "$T/evalstop1.out")"
"$BIN" $P --ckpt-dir "$T/ck_evalstop" --resume > "$T/evalstop2.out" 2>&1 \
  && [ "$(grep '^epoch 1/2 | dev loss' "$T/evalstop2.out")" = "$(grep '^epoch 1/2 | dev loss' "$T/ra.out")" ] \
  && [ "$(grep '^final' "$T/evalstop2.out")" = "$(grep '^final' "$T/ra.out")" ] \
  && ok "resumed after it: the evaluation first, the same scores" || bad "resume after a stopped evaluation: $(tail -3 "$T/evalstop2.out")"
# the same on CoLA, whose Matthews correlation refused the unset predictions of the examples not reached (exit 1);
# CoLA's layout (no header: source, label, original label, sentence) from the SST-2 files
mkdir -p "$T/data/cola"
for s in train dev; do awk -F'\t' 'NR > 1 { print "src\t" $2 "\t*\t" $1 }' "$T/data/sst2/$s.tsv" > "$T/data/cola/$s.tsv"; done
PRAC_TEST_KILL_AT=eval.batch:15 "$BIN" --task cola --data-dir "$T/data/cola" $M --epochs 2 --ckpt-dir "$T/ck_colastop" > "$T/colastop.out" 2>&1
rc=$?; [ $rc -eq 143 ] && grep -q '^epoch 1/2 | evaluation stopped by a signal' "$T/colastop.out" \
  && ok "CoLA: a stop signal during an evaluation, exit 143" || bad "CoLA stop in an evaluation: rc $rc, $(tail -2 "$T/colastop.out")"
# without a --ckpt-dir a stop there lets the run end (a stop would lose it all, --save too), exit 143
PRAC_TEST_KILL_AT=eval.batch:15 "$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 --save "$T/nockpt_save" > "$T/nockpt_stop.out" 2>&1
rc=$?; [ $rc -eq 143 ] && [ -f "$T/nockpt_save/model.safetensors" ] && grep -q '^final' "$T/nockpt_stop.out" \
  && ok "no --ckpt-dir: a stop during the last evaluation still saves, exit 143" || bad "no --ckpt-dir stop: rc $rc, $(tail -2 "$T/nockpt_stop.out")"
# a checkpoint is a model directory too: its config.json keeps the base's keys as --save's does
keeps_base_keys "$T/ck4/step_00000032/config.json" && ok "a checkpoint's config.json keeps the base's dropout and token ids" \
  || bad "a checkpoint's config.json lost keys of the base's"
# a stop signal right after that step: its checkpoint is the stop's (it was written a second time)
PRAC_TEST_KILL_AT=train.step_done@16:15 "$BIN" $P --ckpt-dir "$T/ck4s" --ckpt-every 4 > "$T/r4s.out" 2>&1; rc=$?
[ $rc -eq 143 ] && [ "$(grep -c '^checkpoint: .*step_00000016$' "$T/r4s.out")" = 1 ] \
  && ok "a stop after the epoch's checkpointed end: that checkpoint, once" \
  || bad "stop after step 16: rc $rc, $(grep -E '^checkpoint:|signal' "$T/r4s.out")"
# stdout a pipe with no reader (`finetune_roberta ... | tee` after a Ctrl-C, which reaches tee too): SIGPIPE ended
# the run at its next print, exit 141, with no stop checkpoint; now the stop signal's checkpoint is written, exit 130
PRAC_TEST_KILL_AT=train.step_done@6:2 python3 -c 'import os, subprocess, sys
r, w = os.pipe(); os.close(r)
p = subprocess.run(sys.argv[1:], stdout=w)
sys.exit(p.returncode if p.returncode >= 0 else 128 - p.returncode)' "$BIN" $P --ckpt-dir "$T/ckpipe" 2> "$T/rpipe.err"; rc=$?
[ $rc -eq 130 ] && [ -f "$T/ckpipe/step_00000006/model.safetensors" ] \
  && ok "a Ctrl-C with stdout's reader gone: the stop checkpoint, exit 130" \
  || bad "closed stdout and SIGINT: rc $rc, $(ls "$T/ckpipe" 2>&1) $(head -c 400 "$T/rpipe.err")"
# the CPU backend's sums depend on the thread count: a resume with another count says it is not bit-exact (the
# finished run is only evaluated again); the checkpoint records the count
out=$(OMP_NUM_THREADS=2 "$BIN" $P --ckpt-dir "$T/ck" --resume 2>&1)
grep -q 'notice: the checkpoint was written with 1 CPU threads, this run has 2' <<<"$out" \
  && ok "a resume with another thread count is said" || bad "no thread-count notice: $(head -c 600 <<<"$out")"
grep -q '^task mrpc: 256 training examples, dev 128 examples;' "$T/ra.out" && ok "the data line names each split once" \
  || bad "data line: $(grep '^task' "$T/ra.out")"
# --save's config.json names the classes as run_glue does (GLUE's label names, Hugging Face datasets' order): a
# pipeline then prints "equivalent", not LABEL_1
python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))
sys.exit(0 if c["id2label"] == {"0": "not_equivalent", "1": "equivalent"} and c["label2id"]["equivalent"] == 1 else 1)' \
  "$T/ra/config.json" && ok "--save's id2label holds MRPC's label names" \
  || bad "id2label: $(grep -A3 id2label "$T/ra/config.json")"
# a dev split changed since (a longer example: another padded length T, which no flag sets): the refusal says the
# data changed (it asked for "run.seq_len = 25", a setting without a flag)
cp -r "$T/data/mrpc" "$T/mrpc_long"
python3 - "$T/mrpc_long/dev.tsv" <<'PY'
import sys
rows = open(sys.argv[1]).read().splitlines()
f = rows[-1].split("\t")
f[3] = " ".join([f[3]] * 4)
open(sys.argv[1], "a").write("\t".join(f) + "\n")
PY
out=$("$BIN" $P --data-dir "$T/mrpc_long" --ckpt-dir "$T/ck" --resume 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "its run's longest example (of the training and dev splits, within --max-len) had .* tokens, this data's has .*: the dev data changed" <<<"$out" \
  && ! grep -q 'run.seq_len' <<<"$out" && ok "--resume after the dev data changed: said as such" || bad "changed dev data: rc $rc, $(head -3 <<<"$out")"
# another --max-len that cuts the longest example (T too changes): the refusal names --max-len, not the data
out=$("$BIN" $P --max-len 16 --ckpt-dir "$T/ck" --resume 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q 'saved .max_len 64. where this run has .max_len 16.' <<<"$out" && ! grep -q 'data changed' <<<"$out" \
  && ok "--resume with another --max-len: named" || bad "--resume --max-len 16: rc $rc, $(head -3 <<<"$out")"
# a checkpoint is a model directory (its tokenizer copied in): --eval-only evaluates it, as the hint of --eval-only
# --ckpt-dir says (it had no tokenizer: "has no tokenizer")
out=$("$BIN" $P --ckpt-dir "$T/ck" --eval-only 2>&1); hint=$(grep -o 'init-from DIR/step_NNNNNNNN' <<<"$out")
last=$(ls -d "$T/ck"/step_* | tail -1)
out=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$last" --eval-only 2>&1); rc=$?
[ -n "$hint" ] && [ $rc -eq 0 ] && grep -q '^dev loss' <<<"$out" && ok "--eval-only of a checkpoint (${last##*/}), as the hint says" \
  || bad "--eval-only of a checkpoint: hint '$hint', rc $rc, $(tail -2 <<<"$out")"
# a damaged checkpoint is refused as the trainers refuse it (a flipped exponent bit of a weight gave a dev loss of
# 1e33 with exit 0): here the top byte of the last float of model.safetensors, and the last byte of vocab.json
cp -r "$last" "$T/damaged"
for f in model.safetensors vocab.json; do
  cp "$last/$f" "$T/damaged/$f"
  python3 - "$T/damaged/$f" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[-1] ^= 0x40; open(p, 'wb').write(bytes(b))
PY
  out=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/damaged" --eval-only 2>&1); rc=$?
  [ $rc -eq 1 ] && grep -q "this checkpoint is damaged: $f does not match its checksum" <<<"$out" \
    && ok "--init-from a checkpoint with a flipped bit in $f: refused" || bad "damaged $f: rc $rc, $(tail -2 <<<"$out")"
  cp "$last/$f" "$T/damaged/$f"
done
out=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/damaged" --eval-only 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q '^dev loss' <<<"$out" && ok "the same copy restored: evaluated" || bad "restored copy: rc $rc"
rm -rf "$T/damaged"
# --eval-only with the flags of training: refused as the trainers refuse them (--overwrite was ignored)
for f in "--save $T/nosave:--save would have nothing new to save" "--overwrite:--eval-only has nothing for --overwrite to replace"; do
  out=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/s1" --eval-only ${f%%:*} 2>&1); rc=$?
  [ $rc -eq 1 ] && grep -q -- "${f#*:}" <<<"$out" && [ ! -e "$T/nosave" ] && ok "--eval-only ${f%%:*}: refused" \
    || bad "--eval-only ${f%%:*}: rc $rc, $(tail -2 <<<"$out")"
done
# the same command once more (a scheduler that relaunches it): the run has ended, so nothing is trained; the final
# weights are evaluated again (the same scores) and nothing is written (it crashed on the missing evaluation)
# (its resume line names the run's end, not an epoch past the last: "epoch 3" of 2)
"$BIN" $P --ckpt-dir "$T/ck" --ckpt-every 5 --resume > "$T/rb3.out" 2>&1 && grep -q 'nothing left to train' "$T/rb3.out" \
  && [ -n "$(grep '^final' "$T/ra.out")" ] && [ "$(grep '^final' "$T/ra.out")" = "$(grep '^final' "$T/rb3.out")" ] && ! grep -q '^checkpoint:' "$T/rb3.out" \
  && grep -Eq "resumed from .* at step ([0-9]+) of \1 \(the run's end: its 2 epochs done\)" "$T/rb3.out" \
  && ok "--resume of the finished run: exit 0, the same final scores" || bad "--resume of a finished run: $(tail -2 "$T/rb3.out")"
# --overwrite into that directory, killed after step 5 (checkpoints every 3): --resume must continue the new run from
# its step 3, not the replaced run's step 32 (left beside it, it was the newest)
cp -r "$T/ck" "$T/cko"
PRAC_TEST_DIE_AFTER_STEP=5 "$BIN" $P --ckpt-dir "$T/cko" --ckpt-every 3 --overwrite > "$T/ro1.out" 2>&1
[ "$(ls "$T/cko")" = "step_00000003" ] && ok "--overwrite: the replaced run's checkpoints removed at the first one" \
  || bad "--overwrite left: $(ls "$T/cko" | tr '\n' ' ')"
# SIGTERM between steps 5 and 6 (sent exactly there: common/kill_point.h): a checkpoint, exit 128 + 15, and the
# resume ends byte-identical to the uninterrupted run; it names the model directory "model/" (the run said "model":
# the same model, which a comparison of the spellings refused)
PRAC_TEST_KILL_AT=train.step_done@5:15 "$BIN" $P --ckpt-dir "$T/ckt" --save "$T/rt" > "$T/rt1.out" 2>&1
[ $? -eq 143 ] && grep -q 'received signal 15: stopping after 5 of' "$T/rt1.out" && ok "SIGTERM after step 5: exit 143" \
  || bad "SIGTERM after step 5: $(tail -2 "$T/rt1.out")"
"$BIN" $P --init-from "$T/model/" --ckpt-dir "$T/ckt" --save "$T/rt" --resume > "$T/rt2.out" 2>&1 \
  && grep -q 'resumed from .*step_00000005 at step 5' "$T/rt2.out" && cmp -s "$T/ra/model.safetensors" "$T/rt/model.safetensors" \
  && ok "resumed after SIGTERM at step 5: weights byte-identical" || bad "resume after SIGTERM: $(tail -2 "$T/rt2.out")"

# started by mpirun (its environment: Open MPI's world size) it refuses before writing anything: every copy would
# train the same run into the same --log, checkpoints and --save
out=$(OMPI_COMM_WORLD_SIZE=2 "$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 --log "$T/mpi.jsonl" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q 'the launcher started 2 (mpirun -np 2?)' <<<"$out" && [ ! -e "$T/mpi.jsonl" ] \
  && ok "under mpirun -np 2: refused, nothing written" || bad "under mpirun: rc $rc, $(tail -2 <<<"$out")"
# an output inside another run's checkpoint folder is refused (that run replaces or removes it as it goes)
sf=$(ls -d "$T"/ckt/step_* | head -1)
for o in "--log $sf/m.jsonl" "--save $sf/model" "--predict $sf/pred"; do
  out=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 $o 2>&1); rc=$?
  [ $rc -eq 1 ] && grep -q "^finetune_roberta: error: ${o%% *} $sf/.* is inside .*, a checkpoint's folder of" <<<"$out" \
    && ok "${o%% *} inside another run's checkpoint: refused" || bad "${o%% *} inside a checkpoint: rc $rc, $out"
done
# ... said once, by rank 0: rank 1 ends with the same exit status and no word
out=$(OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 "$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 2>&1); rc=$?
[ $rc -eq 1 ] && [ -z "$out" ] && ok "under mpirun -np 2, rank 1: exit 1, silent" || bad "rank 1 under mpirun: rc $rc, $out"
# a PMIx launcher (srun --mpi=pmix) says a rank and no size: rank 1 is one of several copies and refuses, saying so
# (every copy trained the same run into the same files); rank 0 may be alone and goes on (here: its --plan)
out=$(env -u OMPI_COMM_WORLD_SIZE PMIX_RANK=1 "$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 --log "$T/pmix.jsonl" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q 'the launcher started this one as rank 1 of several' <<<"$out" && [ ! -e "$T/pmix.jsonl" ] \
  && ok "PMIx rank 1 (size unknown): refused, nothing written" || bad "PMIx rank 1: rc $rc, $(tail -2 <<<"$out")"
out=$(env -u OMPI_COMM_WORLD_SIZE PMIX_RANK=0 "$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --plan 2>&1); rc=$?
[ $rc -eq 0 ] && ok "PMIx rank 0 (size unknown): runs (--plan)" || bad "PMIx rank 0: rc $rc, $(tail -2 <<<"$out")"

# the tokenizer's files are part of the run (they make the data): another tokenizer at the same shape is refused
cp -r "$T/model" "$T/model_tok" && echo >> "$T/model_tok/merges.txt"
out=$("$BIN" $P --init-from "$T/model_tok" --ckpt-dir "$T/ckt" --save "$T/rt" --resume 2>&1); rc=$?
# (said as the files: it was "run.tokenizer = 3476:bbef...;395:cd8a...", which no one can pass or compare)
[ $rc -eq 1 ] && grep -q "the tokenizer files of --init-from $T/model_tok (tokenizer.json, vocab.json, merges.txt" <<<"$out" \
  && ! grep -q 'run.tokenizer' <<<"$out" && ok "--resume with other tokenizer files refused (exit $rc)" \
  || bad "resume with another tokenizer: rc $rc, $(tail -2 <<<"$out")"
# so are the dev files (the best score so far was measured on them): one more dev row, at the same longest example,
# was resumed with exit 0 and the old best score kept
cp -r "$T/data/mrpc" "$T/data/mrpc_dev" && tail -n 1 "$T/data/mrpc/dev.tsv" >> "$T/data/mrpc_dev/dev.tsv"
out=$("$BIN" ${P/"$T/data/mrpc"/"$T/data/mrpc_dev"} --ckpt-dir "$T/ckt" --save "$T/rt" --resume 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q 'the dev files in .*mrpc_dev are not those of the run that wrote it' <<<"$out" \
  && ok "--resume with other dev files refused" || bad "resume with other dev files: rc $rc, $(tail -2 <<<"$out")"
# and the training file: one label flipped (same size, same longest example) is said as the file, not as the key's
# size:hash ("run.train_data = 13972:a7e6..." asked the user for a setting no flag sets)
mkdir -p "$T/data/mrpc_train" && cp "$T/data/mrpc/dev.tsv" "$T/data/mrpc_train/"
awk 'BEGIN { FS = OFS = "\t" } NR == 3 { $1 = 1 - $1 } { print }' "$T/data/mrpc/train.tsv" > "$T/data/mrpc_train/train.tsv"
out=$("$BIN" ${P/"$T/data/mrpc"/"$T/data/mrpc_train"} --ckpt-dir "$T/ckt" --save "$T/rt" --resume 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q 'the training file .*mrpc_train/train.tsv is not that of the run that wrote it' <<<"$out" \
  && ! grep -q 'run.train_data' <<<"$out" && ok "--resume with another training file refused, naming it" \
  || bad "resume with another training file: rc $rc, $(tail -2 <<<"$out")"

# max |a - b| over the tensors of two safetensors files, but the attention key biases: their true gradient is 0 (a key
# bias adds the same q.b to every score of a query, which the softmax ignores), so what they get is rounding noise,
# which Adam's normalization turns into steps of about lr in either direction
maxdiff() {
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: struct.unpack(f"<{(v['data_offsets'][1] - v['data_offsets'][0]) // 4}f",
                             b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in h.items() if k != "__metadata__"}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys()
print(max(max(abs(x - y) for x, y in zip(a[k], b[k])) for k in a if "attention.self.key.bias" not in k))
PY
}
# the largest relative difference of the step records' FIELD between two JSONL logs (inf if their steps differ)
steprel() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
rec = [{r["step"]: r[sys.argv[3]] for r in map(json.loads, open(p)) if r["type"] == "step"} for p in sys.argv[1:3]]
print(max(abs(rec[0][s] - rec[1][s]) / abs(rec[1][s]) for s in rec[1]) if rec[0].keys() == rec[1].keys() and rec[0] else "inf")
PY
}
le() { python3 -c "import sys; sys.exit(0 if float('$1') <= float('$2') else 1)"; }

# 4. dynamic padding: each batch padded to its longest row (rounded up to 8) gives the results of padding every batch
# to the data's longest example, because the key-padding mask makes them mathematically equal; only the summation
# order of fp32 sums differs (measured: step losses 1e-7 relative, weights 2.5e-7 after 32 steps), so the bounds are
# 1e-5 (relative losses, absolute weights of magnitude ~1). Without PRAC: its refresh statistics include the padding
# rows, so there the two are different (equally valid) runs. (The synthetic pairs are 10 to 18 tokens: a batch of 16
# nearly always has one over 16, so it pads to 24 against the longest example's 25: every batch a different shape.)
for pad in batch longest; do
  "$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 2 --padding $pad --save "$T/pad_$pad" --log "$T/pad_$pad.jsonl" \
    > "$T/pad_$pad.out" 2>&1 || bad "--padding $pad run failed"
done
mean_len() { sed -n 's/^padding | [a-z]*: \([0-9.]*\) tokens per row.*longest example: \([0-9]*\))/\1 \2/p' "$1"; }
read -r lb Tl <<<"$(mean_len "$T/pad_batch.out")"; read -r ll _ <<<"$(mean_len "$T/pad_longest.out")"
[ -n "$lb" ] && le "$lb" "$((Tl - 1))" && [ "$ll" = "$Tl.0" ] && ok "padding: batch pads to $lb tokens per row on average, longest to $ll" \
  || bad "padded lengths: batch '$lb', longest '$ll', the longest example '$Tl'"
r=$(steprel "$T/pad_batch.jsonl" "$T/pad_longest.jsonl" loss); w=$(maxdiff "$T/pad_batch/model.safetensors" "$T/pad_longest/model.safetensors")
le "$r" 1e-5 && le "$w" 1e-5 && [ -n "$(grep '^final' "$T/pad_batch.out")" ] && [ "$(grep '^final' "$T/pad_batch.out")" = "$(grep '^final' "$T/pad_longest.out")" ] \
  && ok "--padding batch = longest: step losses within $r, weights within $w, same final scores" \
  || bad "--padding batch != longest: step losses $r, weights $w; $(grep '^final' "$T/pad_batch.out") vs $(grep '^final' "$T/pad_longest.out")"
grep -q 'measured: the CPU arena .* (equal to the plan)' "$T/pad_batch.out" && ok "dynamic padding: arena == plan at the longest example" \
  || bad "dynamic padding: arena != plan"

# 5. gradient accumulation: 2 micro-batches of 8 make the step of one batch of 16 (the same examples: the order does not
# depend on the batch size; every row weighs 1/16 either way): after the first update the loss, the gradient norm and
# the weights agree to fp32 rounding (1e-6 relative; weights 1e-6 absolute, a few ulps of magnitude ~1; measured 2e-7)
for cfg in "16 1" "8 2"; do
  set -- $cfg
  PRAC_TEST_DIE_AFTER_STEP=1 "$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 --batch-size $1 --grad-accum $2 \
    --ckpt-dir "$T/ga$2" --ckpt-every 1 --log "$T/ga$2.jsonl" > "$T/ga$2.out" 2>&1
  [ $? -eq 137 ] || bad "--grad-accum $2 run did not stop after step 1"
done
rl=$(steprel "$T/ga2.jsonl" "$T/ga1.jsonl" loss); rn=$(steprel "$T/ga2.jsonl" "$T/ga1.jsonl" grad_norm)
w=$(maxdiff "$T/ga1/step_00000001/model.safetensors" "$T/ga2/step_00000001/model.safetensors")
le "$rl" 1e-6 && le "$rn" 1e-6 && le "$w" 1e-6 && ok "--grad-accum 2 x 8 = one batch of 16: loss $rl, norm $rn, weights $w" \
  || bad "--grad-accum 2 x 8 != 16: loss $rl, gradient norm $rn, weights $w"
# micro-batches of unequal rows (256 examples in batches of 17: 15 of 17 and one of a single row, the epoch's one step
# of 16) against the one batch of 256, from the fine-tuned model of 1. (its rows' losses differ; a fresh head's are
# all near ln 2): the logged loss is the mean over the step's rows, as the gradient is. It was the mean of the
# micro-batches' means, which weighs the single row 16 times: 3.7e-4 relative apart on the code before, equal now
for cfg in "256 1" "17 16"; do
  set -- $cfg
  PRAC_TEST_DIE_AFTER_STEP=1 "$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --init-from "$T/s1" --epochs 1 \
    --batch-size $1 --grad-accum $2 --log "$T/gu$2.jsonl" > "$T/gu$2.out" 2>&1
  [ $? -eq 137 ] || bad "--batch-size $1 --grad-accum $2 run did not stop after step 1"
done
rl=$(steprel "$T/gu16.jsonl" "$T/gu1.jsonl" loss); rn=$(steprel "$T/gu16.jsonl" "$T/gu1.jsonl" grad_norm)
le "$rl" 1e-6 && le "$rn" 1e-6 && ok "--grad-accum 16 x 17 (the last of 1 row) = one batch of 256: loss $rl, norm $rn" \
  || bad "--grad-accum 16 x 17 != 256: loss $rl, gradient norm $rn"
# and a run with accumulation resumes bit-exactly
resumes_bit_exactly() {  # label, run arguments (one string): killed after step 7 of 16, checkpoints every 3
  local what=$1 dir; dir=$T/$(tr -c 'a-z0-9\n' _ <<<"$1")
  "$BIN" $2 --save "$dir.a" > "$dir.a.out" 2>&1 || bad "$what: the uninterrupted run failed"
  PRAC_TEST_DIE_AFTER_STEP=7 "$BIN" $2 --ckpt-dir "$dir.ck" --ckpt-every 3 --save "$dir.b" > /dev/null 2>&1
  "$BIN" $2 --ckpt-dir "$dir.ck" --ckpt-every 3 --save "$dir.b" --resume > "$dir.b.out" 2>&1 \
    && grep -q 'at step 6 of 16' "$dir.b.out" && cmp -s "$dir.a/model.safetensors" "$dir.b/model.safetensors" \
    && ok "$what: resumed at step 6, weights byte-identical" || bad "$what: resume not bit-exact: $(tail -2 "$dir.b.out")"
  # its times are this process's, and said to be (it read "total"); the uninterrupted run's are the total
  grep -q '^time  | .* in this process, resumed at step 6 (evaluation' "$dir.b.out" \
    && grep -q '^time  | .* total (evaluation' "$dir.a.out" \
    && ok "$what: the resumed process's time said to be its own, the uninterrupted run's the total" \
    || bad "$what: time lines: $(grep '^time' "$dir.a.out" "$dir.b.out")"
}
resumes_bit_exactly "--grad-accum 2" "--task mrpc --data-dir $T/data/mrpc $M --epochs 1 --batch-size 8 --grad-accum 2"
# an epoch whose batches --grad-accum does not divide: 16 batches in steps of 3 make 6 steps, the last of one batch, so
# 2 epochs are 12 steps with a dev evaluation after each (such a run used to go on forever: its short step met the end
# of the epoch and moved on into the next). Killed after step 6 (checkpoint every 3: taken after that short step, before
# the epoch's evaluation), it resumes at step 6, evaluates epoch 1 and ends byte-identical.
A="--task mrpc --data-dir $T/data/mrpc $M --epochs 2 --batch-size 16 --grad-accum 3"
timeout 120 "$BIN" $A --save "$T/g3a" > "$T/g3a.out" 2>&1 && grep -q '^epoch 2/2 | step 12/12 |' "$T/g3a.out" \
  && [ "$(grep -c '^epoch [12]/2 | dev loss' "$T/g3a.out")" = 2 ] && ok "--grad-accum 3 over 16 batches: 2 epochs of 6 steps" \
  || bad "--grad-accum 3 over 16 batches: $(grep -E '^epoch|signal' "$T/g3a.out" | tail -2)"
PRAC_TEST_DIE_AFTER_STEP=6 timeout 120 "$BIN" $A --ckpt-dir "$T/g3.ck" --ckpt-every 3 --save "$T/g3b" > /dev/null 2>&1
timeout 120 "$BIN" $A --ckpt-dir "$T/g3.ck" --ckpt-every 3 --save "$T/g3b" --resume > "$T/g3b.out" 2>&1 \
  && grep -q 'at step 6 of 12' "$T/g3b.out" && grep -q '^epoch 1/2 | dev loss' "$T/g3b.out" \
  && cmp -s "$T/g3a/model.safetensors" "$T/g3b/model.safetensors" \
  && ok "--grad-accum 3: killed after epoch 1's short last step, resumed with its evaluation, weights byte-identical" \
  || bad "--grad-accum 3: resume after the short step: $(grep -E '^epoch|resumed|error' "$T/g3b.out" | head -3)"

# 6. --optimizer-states 8bit (block-wise quantized AdamW moments) and --prac-storage fp8 (PRAC's X.P in e4m3)
# 8-bit states learn the synthetic task as fp32 states do (dev accuracy 1 after 2 epochs there; >= 0.9 has probability
# < 1e-19 under guessing), and the checkpoint holds the moments as bytes
"$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 3 --optimizer-states 8bit --ckpt-dir "$T/q8" > "$T/q8.out" 2>&1 \
  || bad "--optimizer-states 8bit run failed: $(tail -2 "$T/q8.out")"
acc=$(sed -n 's/^final | .*accuracy \([0-9.]*\).*/\1/p' "$T/q8.out")
python3 - "$T/q8" "${acc:-0}" <<'PY' && ok "--optimizer-states 8bit: dev accuracy $acc, the checkpoint's AdamW moments are U8 (fp32 for the tensors under 4096 elements)" \
  || bad "--optimizer-states 8bit: accuracy '$acc' or the checkpoint's state dtypes"
import glob, json, struct, sys
f = sorted(glob.glob(sys.argv[1] + "/step_*/state.safetensors"))[-1]
b = open(f, "rb").read(); h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
u8 = [k for k, v in h.items() if k != "__metadata__" and v["dtype"] == "U8"]
small = h.get("adamw.m", {}).get("dtype") == "F32" and h.get("adamw.v", {}).get("dtype") == "F32"
sys.exit(0 if float(sys.argv[2]) >= 0.9 and u8 and small else 1)
PY
# --predict into a run's checkpoint directory is refused (its files would lie among the step folders), without the
# --save clause about --init-from (nothing loads predictions)
"$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 --predict "$T/q8" > "$T/pq8.out" 2>&1
[ $? -eq 1 ] && grep -q "predict $T/q8 is a run's checkpoint directory (it holds checkpoints)" "$T/pq8.out" \
  && ! grep -q "init-from" "$T/pq8.out" \
  && ok "--predict into a run's checkpoint directory is refused" \
  || bad "--predict into a run's checkpoint directory: $(tail -2 "$T/pq8.out")"
# fp8 storage: the planned saved bytes shrink against PRAC's act storage at the same ranks (e4m3 is 1 byte a value
# plus a 4-byte scale a row, fp32 4 bytes), and the arena still equals the plan
PR="--prac prac --prac-linear-ranks 2,2 --prac-nonlinear-ranks 2,2"
saved() { sed -n 's/.*"planned_saved_bytes":\([0-9]*\).*/\1/p' "$1"; }
for st in act fp8; do
  "$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 $PR --prac-storage $st --log "$T/st_$st.jsonl" > "$T/st_$st.out" 2>&1 \
    || bad "--prac-storage $st run failed: $(tail -2 "$T/st_$st.out")"
done
sa=$(saved "$T/st_act.jsonl"); sf=$(saved "$T/st_fp8.jsonl")
[ -n "$sf" ] && [ "$sf" -lt "$sa" ] && grep -q 'measured: the CPU arena .* (equal to the plan)' "$T/st_fp8.out" \
  && ok "--prac-storage fp8: saved for backward $sf bytes < $sa with act storage; arena == plan" \
  || bad "--prac-storage fp8: saved '$sf' vs act '$sa', or arena != plan"
# --prac-storage auto (fp8 when PRAC compresses) says so where fp8 saves nothing: at rank 0 + 1 a row's code and its
# 4-byte scale outweigh one fp32 value (at 2 + 2, 8 bytes against 16, it saves and nothing is said; fp8 asked for
# by name is not questioned)
for case in "0,1 auto yes" "2,2 auto no" "0,1 fp8 no"; do
  set -- $case
  "$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 --prac prac --prac-linear-ranks $1 --prac-nonlinear-ranks $1 \
    --prac-storage $2 > "$T/auto.out" 2>&1 || bad "ranks $1 --prac-storage $2 failed: $(tail -2 "$T/auto.out")"
  said=no; grep -q '^note: --prac-storage auto stores PRAC.s projections as fp8 (e4m3), which at these ranks saves nothing' \
    "$T/auto.out" && grep -q -- '---> HINT: --prac-storage act keeps them exact' "$T/auto.out" && said=yes
  [ "$said" = "$3" ] && ok "ranks $1, --prac-storage $2: the fp8-saves-nothing note $([ $3 = yes ] && echo said || echo not said)" \
    || bad "ranks $1, --prac-storage $2: note said: $said, want $3"
done
# both together resume bit-exactly (the 8-bit codes and the fp8 quantizer's counters are in the checkpoint)
resumes_bit_exactly "8bit states + fp8 storage" \
  "--task mrpc --data-dir $T/data/mrpc $M --epochs 1 $PR --prac-t1 5 --prac-t2 3 --prac-storage fp8 --optimizer-states 8bit"

# --recompute-attention (on by default): the same run with O saved gives bitwise the same weights, and saves more
R="--task mrpc --data-dir $T/data/mrpc $M --epochs 1 $PR"
"$BIN" $R --save "$T/oa" > "$T/oa.out" 2>&1 || bad "run with O recomputed failed"
"$BIN" $R --save "$T/ob" --recompute-attention 0 > "$T/ob.out" 2>&1 || bad "run with O saved failed"
so=$(sed -n 's/.*saved for backward \([0-9.]*\) MiB.*/\1/p' "$T/oa.out" | head -1)
ss=$(sed -n 's/.*saved for backward \([0-9.]*\) MiB.*/\1/p' "$T/ob.out" | head -1)
cmp -s "$T/oa/model.safetensors" "$T/ob/model.safetensors" && python3 -c "import sys; sys.exit(0 if ${so:-9e9} < ${ss:-0} else 1)" \
  && ok "--recompute-attention 0 vs 1: weights byte-identical, saved $ss MiB vs $so MiB recomputed" \
  || bad "--recompute-attention: weights differ, or saved '$so' not below '$ss'"

# --eval-only with a training split it cannot read (it only sets the padded length): a warning, and the dev scores
mkdir -p "$T/badtrain" && cp "$T/data/mrpc/dev.tsv" "$T/badtrain/" && printf 'Quality\tjunk\n' > "$T/badtrain/train.tsv"
# (its --log in directories that do not exist yet: made, as --save's are)
out=$("$BIN" --task mrpc --data-dir "$T/badtrain" --init-from "$T/model" --eval-only --log "$T/logs/a/b.jsonl" 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q 'warning: --eval-only cannot use the training split' <<<"$out" && grep -q '^dev loss' <<<"$out" \
  && grep -q glue_eval "$T/logs/a/b.jsonl" && ok "--eval-only with an unreadable training split: a warning and the scores" \
  || bad "--eval-only, bad train: rc $rc, $(tail -2 <<<"$out")"
# its glue_eval record is marked as --eval-only's, as train_gpt2's eval record is (appended to a training log, it was
# read as that run's final score)
grep -q '"type":"glue_eval",.*"eval_only":true}$' "$T/logs/a/b.jsonl" && ok "--eval-only's glue_eval record has \"eval_only\":true" \
  || bad "--eval-only's glue_eval record: $(grep glue_eval "$T/logs/a/b.jsonl")"

# MNLI's two dev splits: each glue_eval record holds its own split's loss. The reference: a directory whose two splits
# are the same file, whose loss is that file's (the batches are the same, so the arithmetic is; 1e-6 relative)
mkdir -p "$T/mn_ab" "$T/mn_aa" "$T/mn_bb"
python3 - "$T/data/mrpc/dev.tsv" "$T" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
a = [{"premise": r["#1 String"], "hypothesis": r["#2 String"], "label": int(r["Quality"])} for r in rows[:48]]
b = [{"premise": r["#2 String"], "hypothesis": r["#1 String"], "label": 2} for r in rows[48:80]]
def write(d, m, mm):
    for name, ex in (("dev_matched", m), ("dev_mismatched", mm)):
        open(f"{sys.argv[2]}/{d}/{name}.jsonl", "w").write("".join(json.dumps(e) + "\n" for e in ex))
write("mn_ab", a, b); write("mn_aa", a, a); write("mn_bb", b, b)
PY
for d in ab aa bb; do
  "$BIN" --task mnli --data-dir "$T/mn_$d" --init-from "$T/model" --eval-only --log "$T/mn_$d.jsonl" > "$T/mn_$d.out" 2>&1 \
    || bad "MNLI --eval-only of mn_$d: $(tail -1 "$T/mn_$d.out")"
done
python3 - "$T" <<'PY' && ok "MNLI: each dev split's log record holds its own loss" || bad "MNLI: per-split losses wrong"
import json, sys
def losses(d):
    return {r["split"]: r["val_loss"] for r in map(json.loads, open(f"{sys.argv[1]}/mn_{d}.jsonl")) if r.get("type") == "glue_eval"}
ab, aa, bb = losses("ab"), losses("aa"), losses("bb")
close = lambda x, y: abs(x - y) <= 1e-6 * abs(y)
print("MNLI split losses", ab, "references", aa["dev_matched"], bb["dev_matched"])
sys.exit(0 if close(ab["dev_matched"], aa["dev_matched"]) and close(ab["dev_mismatched"], bb["dev_matched"])
         and not close(ab["dev_matched"], ab["dev_mismatched"]) else 1)
PY

# GLUE's MRPC files begin with a UTF-8 byte order mark: read as the same data (it hid the label column, "Quality")
mkdir -p "$T/bom"
for f in train dev; do printf '\xEF\xBB\xBF' | cat - "$T/data/mrpc/$f.tsv" > "$T/bom/$f.tsv"; done
a=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --eval-only 2>&1 | grep '^dev loss')
b=$("$BIN" --task mrpc --data-dir "$T/bom" --init-from "$T/model" --eval-only 2>&1 | grep '^dev loss')
[ -n "$a" ] && [ "$a" = "$b" ] && ok "MRPC files with a byte order mark: the same scores" || bad "BOM: '$b' != '$a'"

# --plan allocates nothing of the batch: at B = 4M it took 3.3 GB of host memory (the upload staging; the process
# takes about 0.3 GB with the CUDA libraries loaded)
rss=$(python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)' "$BIN" --task mrpc --init-from "$T/model" --plan --batch-size 4000000)
[ -n "$rss" ] && [ "$rss" -lt 1000 ] && ok "--plan at B = 4M: $rss MB of host memory" || bad "--plan at B = 4M: '$rss' MB"

# 6b. a --warmup longer than the run is said, with the learning rate it ends at (as the pretraining trainers say it;
# it ran without a word): 256 examples of 16 make 16 steps, and step 16's rate is 3e-3 * 15 / 1000
# (a negative --warmup is named alone: the message listed --lr 0, an unset --lr before the task's default)
out=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 --warmup -1 2>&1); rc=$?
[ $rc = 1 ] && grep -q -- '--warmup must be >= 0 (got -1)' <<<"$out" && ok "--warmup -1 refused, named alone" \
  || bad "--warmup -1: rc $rc, $(tail -1 <<<"$out")"
out=$("$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 --warmup 1000 2>&1)
grep -q 'notice: --warmup 1000 is longer than the run.s 16 steps (1 epoch(s) of 16): the learning rate rises the whole run and ends at 4.5e-05, short of --lr 0.003' <<<"$out" \
  && ok "--warmup beyond the run said" || bad "--warmup beyond the run: $(grep -i warmup <<<"$out" | head -2)"

# 6c. --lr-schedule and --warmup-ratio are Hugging Face's: each step's rate is transformers/optimization.py's lr_lambda
# times --lr, the warmup TrainingArguments.get_warmup_steps's math.ceil(steps * ratio). A cosine run of 16 steps at
# --warmup-ratio 0.1 warms up over ceil(1.6) = 2 steps; its checkpoint refuses a resume on the default linear
# schedule, naming the flag
C="--task mrpc --data-dir $T/data/mrpc $M --epochs 1 --warmup-ratio 0.1 --ckpt-dir $T/ckc --ckpt-every 8"
"$BIN" $C --lr-schedule cosine --log "$T/cos.jsonl" > "$T/cos.out" 2>&1 || bad "the cosine run failed: $(tail -2 "$T/cos.out")"
grep -q '^warmup: 2 steps (--warmup-ratio 0.1 of the run.s 16)' "$T/cos.out" && ok "--warmup-ratio 0.1 of 16 steps: 2" \
  || bad "--warmup-ratio: $(grep -i warmup "$T/cos.out" | head -2)"
python3 - "$T/cos.jsonl" <<'PY' && ok "each step's lr is get_cosine_schedule_with_warmup's" || bad "cosine lr per step"
import json, math, sys
lrs = [r["lr"] for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "step"]
total, warmup, peak = 16, 2, 3e-3
def lr_lambda(step):  # transformers' _get_cosine_schedule_with_warmup_lr_lambda, num_cycles = 0.5
    if step < warmup:
        return step / max(1, warmup)
    progress = (step - warmup) / max(1, total - warmup)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * progress)))
want = [peak * lr_lambda(s) for s in range(total)]
ok = len(lrs) == total and all(abs(a - b) <= 1e-6 * peak for a, b in zip(lrs, want))
print("" if ok else "logged %s\nwanted %s" % (lrs, want))
sys.exit(0 if ok else 1)
PY
out=$("$BIN" $C --resume 2>&1); rc=$?
[ $rc = 1 ] && grep -q 'cannot resume from .*--lr-schedule cosine' <<<"$out" \
  && ok "a cosine run's checkpoint refuses a linear resume, naming --lr-schedule" || bad "linear resume: rc $rc, $(tail -3 <<<"$out")"
out=$("$BIN" $C --lr-schedule cosine --warmup-ratio 0.2 --resume 2>&1); rc=$?
[ $rc = 1 ] && grep -q 'written with a warmup of 2 steps, and --warmup-ratio 0.2 gives 4 of this run.s 16' <<<"$out" \
  && grep -q 'pass --warmup 2 in place of --warmup-ratio 0.2' <<<"$out" \
  && ok "a resume with another --warmup-ratio: the hint names --warmup in its place" || bad "--warmup-ratio 0.2 resume: rc $rc, $(tail -2 <<<"$out")"
# a checkpoint written before --lr-schedule (its keys spelled before run.key_spelling) ran the linear schedule: a
# resume on another is refused as such (here the cosine run's newest checkpoint with that key taken out of its
# header, and its COMPLETE marker's size and checksum of the file rewritten: train/checkpoint.cpp's state_checksum)
rm -rf "$T/ckc_legacy" && cp -r "$T/ckc" "$T/ckc_legacy"
python3 - "$(ls -d "$T"/ckc_legacy/step_* | tail -1)" <<'PY' || bad "could not forge the legacy checkpoint"
import json, os, struct, sys
M64 = (1 << 64) - 1
K = 0x9e3779b97f4a7c15
def mix64(x):
    x ^= x >> 30; x = x * 0xbf58476d1ce4e5b9 & M64
    x ^= x >> 27; x = x * 0x94d049bb133111eb & M64
    return x ^ x >> 31
def checksum(data):
    lane, i, tail = [1, 2, 3, 4], 0, len(data) - len(data) % 32
    def step(k, w):
        lane[k] = (lane[k] ^ w) * K & M64
        lane[k] ^= lane[k] >> 29
    for i in range(0, tail, 32):
        for k in range(4):
            step(k, int.from_bytes(data[i + 8 * k:i + 8 * k + 8], "little"))
    for k, i in enumerate(range(tail, len(data), 8)):
        step(k, int.from_bytes(data[i:i + 8], "little"))
    h = mix64(len(data))
    for k in range(4):
        h = (mix64(h ^ lane[k]) + K) & M64
    return h
state, marker = os.path.join(sys.argv[1], "state.safetensors"), os.path.join(sys.argv[1], "COMPLETE")
raw = open(state, "rb").read()
complete = json.load(open(marker))
assert complete["checksums"]["state.safetensors"] == "%016x" % checksum(raw), "the checksum port disagrees"
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
del header["__metadata__"]["run.key_spelling"]  # (tensor offsets count from the data's start: they stay as they are)
text = json.dumps(header).encode()
raw = struct.pack("<Q", len(text)) + text + raw[8 + n:]
open(state, "wb").write(raw)
complete["files"]["state.safetensors"] = len(raw)
complete["checksums"]["state.safetensors"] = "%016x" % checksum(raw)
json.dump(complete, open(marker, "w"), indent=2)
PY
out=$("$BIN" ${C/ckc/ckc_legacy} --lr-schedule cosine --resume 2>&1); rc=$?
[ $rc = 1 ] && grep -q 'it was written before --lr-schedule, with the linear schedule' <<<"$out" \
  && grep -q 'HINT: resume without --lr-schedule cosine' <<<"$out" \
  && ok "a checkpoint from before --lr-schedule refuses a cosine resume as linear" || bad "legacy cosine resume: rc $rc, $(tail -2 <<<"$out")"
# transformers' constant has no warmup (get_scheduler("constant") ignores warmup_steps): --warmup is said to change
# nothing, and the first step runs at --lr
"$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 --lr-schedule constant --warmup 3 --log "$T/const.jsonl" \
  > "$T/const.out" 2>&1 || bad "the constant run failed"
first_lr=$(python3 -c 'import json, sys
print(next(r["lr"] for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "step"))' "$T/const.jsonl")
grep -q 'notice: --lr-schedule constant has no warmup: --warmup 3 changes nothing' "$T/const.out" \
  && python3 -c "import sys; sys.exit(0 if abs(float('${first_lr:-0}') - 3e-3) < 1e-9 else 1)" \
  && ok "--lr-schedule constant: no warmup (said), step 1 at --lr" || bad "constant: lr '$first_lr', $(grep -i warmup "$T/const.out")"

# 7. bad input: non-zero exit, an error line naming the problem (and a hint where there is one), before any step and
# with no score printed
expect_error() {  # description, regex the stderr must match, command...
  local what=$1 want=$2; shift 2
  out=$("$@" 2>&1); rc=$?
  if [ $rc -ne 0 ] && grep -q 'finetune_roberta: error:' <<<"$out" && grep -Eq -e "$want" <<<"$out" \
     && ! grep -q '^final |\|^dev loss\|^epoch ' <<<"$out"; then ok "$what (exit $rc)"; else bad "$what: rc $rc, output: $(tail -3 <<<"$out")"; fi
}
# a bad value is said before a missing flag (it took three runs, one per required flag, to learn "muon" is refused)
expect_error "--optimizer muon alone: the value refused first" 'optimizers are adamw and rso \(got "muon"\)' "$BIN" --optimizer muon
expect_error "--weight-decay -1 alone: the value refused first" 'weight-decay must be >= 0' "$BIN" --weight-decay -1
expect_error "--task bogus alone: the task refused first" 'bogus' "$BIN" --task bogus
expect_error "nothing given: --init-from is required" '--init-from is required' "$BIN"
expect_error "--lr-schedule wsd refused with the choices" 'lr-schedule must be linear, cosine, constant_with_warmup or constant \(got "wsd"\)' "$BIN" --lr-schedule wsd
expect_error "--warmup-ratio 1.5 refused" 'warmup-ratio must be a decimal number in \[0, 1\] \(got "1.5"\)' "$BIN" --warmup-ratio 1.5
# (C's strtod reads hexadecimal, which Python's float() refuses; a space before the number is refused as every number
# flag refuses it: a quoting slip)
expect_error "--warmup-ratio in hexadecimal refused" 'warmup-ratio must be a decimal number in \[0, 1\] \(got "0x0.1p0"\)' "$BIN" --warmup-ratio 0x0.1p0
expect_error "--warmup-ratio after a space refused" 'warmup-ratio must be a decimal number in \[0, 1\] \(got " 0.1"\)' "$BIN" --warmup-ratio " 0.1"
expect_error "--warmup with --warmup-ratio refused" '--warmup 3 and --warmup-ratio 0.1 both set the warmup' "$BIN" --warmup 3 --warmup-ratio 0.1
mkdir -p "$T/notok" "$T/nodev" "$T/nan"
cp "$T/model/config.json" "$T/model/model.safetensors" "$T/notok/"
cp "$T/data/mrpc/train.tsv" "$T/nodev/"
cp "$T/model/"* "$T/nan/"
python3 - "$T/nan/model.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); o = 8 + n + h["roberta.embeddings.LayerNorm.weight"]["data_offsets"][0]
b[o:o + 4] = struct.pack("<f", float("nan")); open(p, "wb").write(b)
PY
expect_error "missing --init-from directory" "--init-from .*/none is not a directory" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/none"
expect_error "model directory without a tokenizer" "no tokenizer" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/notok"
expect_error "data directory without dev" "no dev split in .*/nodev \(looked for .*/nodev/dev.tsv and .*/nodev/dev.jsonl\)" "$BIN" --task mrpc --data-dir "$T/nodev" --init-from "$T/model"
expect_error "wrong task layout (MRPC files as STS-B)" "header has no column" "$BIN" --task stsb --data-dir "$T/data/mrpc" --init-from "$T/model"
expect_error "--max-len beyond the model's positions" "exceeds the model's 64 positions" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --max-len 100
expect_error "unknown task" "cola" "$BIN" --task glue --data-dir "$T/data/mrpc" --init-from "$T/model"
expect_error "NaN weights are refused at the load" 'tensor "roberta.embeddings.LayerNorm.weight" holds 1 non-finite values' \
  "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/nan" --eval-only
# --plan's unused outputs are said (they were ignored with no word), on stderr with --json (its stdout: the plan alone)
out=$("$BIN" --task mrpc --init-from "$T/model" --plan --save "$T/plan_save" --predict "$T/plan_pred" --epochs 3 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "^notice: --epochs --save --predict change nothing: --plan prints the memory plan" <<<"$out" \
  && [ ! -e "$T/plan_save" ] && ok "--plan names its unused flags" || bad "--plan's unused flags: rc $rc, $out"
out=$("$BIN" --task mrpc --init-from "$T/model" --plan --json --log "$T/plan.jsonl" 2>/dev/null)
python3 -c 'import json,sys; json.loads(sys.stdin.read())' <<<"$out" && ok "--plan --json: stdout the plan alone" \
  || bad "--plan --json's stdout: $out"
expect_error "--plan with --eval-only (a training run's plan) is refused" "plan would overstate it" \
  "$BIN" --task mrpc --init-from "$T/model" --eval-only --plan
expect_error "--optimizer muon refused" "adamw and rso" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --optimizer muon
expect_error "Hugging Face's flag spelling answered" "spells it --max-len" "$BIN" --max-seq-length 128
expect_error "--steps answered with --epochs as a count of passes" "spells it --epochs, a count of passes over the training split, not of steps" \
  "$BIN" --steps 3
# a --grad-accum beyond an epoch's batches allocated them all (2e9: "internal error: std::bad_alloc")
expect_error "--grad-accum beyond an epoch's batches" "more than the 16 batches of an epoch \(256 examples, --batch-size 16\)" \
  "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --grad-accum 2000000000
expect_error "--seed -1 refused (as the trainers do)" "--seed must be >= 0" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --seed -1
# a --log named as a file --predict or --save writes in its directory (another name there is left alone)
expect_error "--log as --predict's MRPC.tsv refused" "--log .*/pr/MRPC.tsv is one of the files --predict .*/pr writes" \
  "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --predict "$T/pr" --log "$T/pr/MRPC.tsv"
expect_error "--log as --save's config.json refused" "--log .*/sp/config.json is one of the files --save .*/sp writes" \
  "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --save "$T/sp" --log "$T/sp/config.json"
# the paper's learning rate for MRPC (no --lr given) with a decay that would flip the weights' sign at each step
expect_error "--weight-decay 1e6 at MRPC's learning rate refused" "--weight-decay 1e\+06 with --lr .*flipping its sign" \
  "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --weight-decay 1e6
expect_error "--grad-accum 0 refused" "at least 1" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --grad-accum 0
expect_error "--optimizer-states 8bit with rso refused" "quantizes AdamW" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --optimizer rso --optimizer-states 8bit
expect_error "--prac-storage fp8 without PRAC refused" "compresses nothing" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --prac-storage fp8
expect_error "PRAC with every site recomputed refused (it trained the baseline)" "--prac prac compresses nothing here" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --prac prac --prac-linear-ranks 2,2 --prac-nonlinear-ranks 2,2 --recompute 2 --prac-classes linear
expect_error "--recompute-attention 2 refused" "must be 0 or 1" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --recompute-attention 2
expect_error "--padding other refused" "batch or longest" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --padding max
mkdir -p "$T/sconst" && cp "$T/data/stsb/train.tsv" "$T/sconst/"
awk 'BEGIN { FS = OFS = "\t" } NR > 1 { $NF = "2.5" } { print }' "$T/data/stsb/dev.tsv" > "$T/sconst/dev.tsv"
expect_error "STS-B dev scores all equal refused before training" "every score is 2.5.*undefined" "$BIN" --task stsb --data-dir "$T/sconst" --init-from "$T/model"
expect_error "--batch-size beyond every split refused" "--batch-size 100000 is more than the 256 examples" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --batch-size 100000
expect_error "--resume of another task's checkpoint names the task" "run\.task.*mrpc" "$BIN" --task stsb --data-dir "$T/data/stsb" $M --epochs 2 --ckpt-dir "$T/ck" --resume
# the PRAC run's checkpoints (auto: subspace refresh) resumed with the exact refresh: refused, naming the one flag,
# and the hint names no flag finetune_roberta does not have (the trainers' key also holds the spread and the overlap)
out=$("$BIN" $P --prac-refresh exact --ckpt-dir "$T/ck" --ckpt-every 5 --resume 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q 'it was written with --prac-refresh subspace, this run has --prac-refresh exact$' <<<"$out" && ! grep -q 'initial-spread\|refresh-overlap' <<<"$out" \
  && ok "--resume with another --prac-refresh refused, naming only finetune's flag (exit $rc)" || bad "--prac-refresh change: rc $rc, $(tail -2 <<<"$out")"
expect_error "a head fine-tuned for another task named as such" "classification head of 1 outputs.*--task mrpc needs 2" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/s2" --eval-only
expect_error "--epochs past INT_MAX steps refused" "--epochs 2147483647 of 16 steps each make more than" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --epochs 2147483647
mkdir -p "$T/nolabel" && cp "$T/data/mrpc/dev.tsv" "$T/nolabel/"
awk 'BEGIN { FS = OFS = "\t" } NR == 3 { $1 = "" } { print }' "$T/data/mrpc/train.tsv" > "$T/nolabel/train.tsv"
expect_error "a row without a label names its file and line" "nolabel/train.tsv: GLUE mrpc example 1 \\(line 3\\) has no label" "$BIN" --task mrpc --data-dir "$T/nolabel" --init-from "$T/model"
mkdir -p "$T/bigtok" && cp "$T/model/"* "$T/bigtok/"
python3 - "$T/bigtok/vocab.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1])); n = max(v.values()) + 1
v.update({f"extra{i}": n + i for i in range(5)}); json.dump(v, open(sys.argv[1], "w"))
PY
expect_error "a tokenizer larger than the embedding refused at the start" "tokenizer of --init-from .*bigtok has [0-9]+ tokens, more than" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/bigtok" --eval-only
mkdir -p "$T/sharded" && cp "$T/model/config.json" "$T/model/vocab.json" "$T/model/merges.txt" "$T/sharded/" && echo '{}' > "$T/sharded/model.safetensors.index.json"
expect_error "a sharded checkpoint named as such" "sharded checkpoint.*not supported" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/sharded"
expect_error "--ckpt-dir that is a file refused" "--ckpt-dir .*config.json: that is a file" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --ckpt-dir "$T/model/config.json"
expect_error "--save that is a file refused" "--save .*config.json: that is a file" "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/model" --save "$T/model/config.json"

# 12. --predict: GLUE's submission files of the test split. The test split is the dev split in GLUE's test layout,
# its rows in reverse order, each with its own index (1002 + its dev row): the predictions file, joined to the dev
# labels by that index, must give the very metrics the evaluation printed (a row predicted for another, a wrong
# index or a label id off by one breaks it)
mkdir -p "$T/pm" && cp "$T/data/mrpc/train.tsv" "$T/data/mrpc/dev.tsv" "$T/pm/"
{ printf 'index\t#1 ID\t#2 ID\t#1 String\t#2 String\n'
  awk 'BEGIN { FS = OFS = "\t" } NR > 1 { print 1000 + NR, $2, $3, $4, $5 }' "$T/data/mrpc/dev.tsv" | tac; } > "$T/pm/test.tsv"
out=$("$BIN" --task mrpc --data-dir "$T/pm" --init-from "$T/s1" --eval-only --predict "$T/pred" 2>&1); rc=$?
python3 - "$T/pm/dev.tsv" "$T/pred/MRPC.tsv" "$(grep '^dev loss' <<<"$out")" <<'PY' \
  && ok "--eval-only --predict: MRPC.tsv (index column kept) scores the printed accuracy and F1" \
  || bad "--eval-only --predict MRPC: rc $rc, $(tail -3 <<<"$out")"
import re, sys
dev, pred, printed = sys.argv[1:]
labels = [int(l.split("\t")[0]) for l in open(dev).read().splitlines()[1:]]
rows = open(pred).read().splitlines()
assert rows[0] == "index\tprediction", rows[0]
idx = [int(r.split("\t")[0]) for r in rows[1:]]
assert idx == [1002 + i for i in reversed(range(len(labels)))], idx[:3]  # the test file's order and index
by_index = {int(r.split("\t")[0]): int(r.split("\t")[1]) for r in rows[1:]}
p = [by_index[1002 + i] for i in range(len(labels))]
tp = sum(a == 1 and b == 1 for a, b in zip(p, labels)); fp = sum(a == 1 and b == 0 for a, b in zip(p, labels))
fn = sum(a == 0 and b == 1 for a, b in zip(p, labels))
acc = sum(a == b for a, b in zip(p, labels)) / len(labels); f1 = 2 * tp / (2 * tp + fp + fn)
want = {k: float(v) for k, v in re.findall(r"(accuracy|f1) ([0-9.]+)", printed)}
assert len(want) == 2 and round(acc, 4) == want["accuracy"] and round(f1, 4) == want["f1"], (acc, f1, want)
PY
grep -q "^predicted test: 128 examples with --init-from's weights (not_equivalent [0-9]*, equivalent [0-9]*) -> $T/pred/MRPC.tsv" <<<"$out" \
  && ok "--predict summary printed" || bad "--predict summary: $(grep predicted <<<"$out")"
# a second --eval-only --predict into that directory: refused, and --overwrite replaces the file (it was refused
# too, "--eval-only appends its evaluation to --log", with no --log given)
expect_error "--eval-only --predict over an earlier file refused" "HINT: pass --overwrite to replace it" \
  "$BIN" --task mrpc --data-dir "$T/pm" --init-from "$T/s1" --eval-only --predict "$T/pred"
: > "$T/pred/MRPC.tsv"
"$BIN" --task mrpc --data-dir "$T/pm" --init-from "$T/s1" --eval-only --predict "$T/pred" --overwrite > "$T/pov.out" 2>&1 \
  && [ "$(wc -l < "$T/pred/MRPC.tsv")" -eq 129 ] && ok "--eval-only --predict --overwrite replaces the predictions" \
  || bad "--eval-only --predict --overwrite: $(tail -2 "$T/pov.out")"
# a dev split whose labels leave the metric blind (MRPC without a positive: F1 0 for every prediction) is warned of at
# the start (every epoch scored 0.0000, the first one "best", exit 0, unsaid); the real split gets no such warning
mkdir -p "$T/pneg" && cp "$T/pm/train.tsv" "$T/pneg/" && awk 'BEGIN { FS = OFS = "\t" } NR > 1 { $1 = 0 } { print }' "$T/pm/dev.tsv" > "$T/pneg/dev.tsv"
out=$("$BIN" --task mrpc --data-dir "$T/pneg" --init-from "$T/s1" --eval-only 2>&1)
grep -q "^warning: $T/pneg/dev.tsv: its labels leave f1 blind (0 for the right predictions and for wrong ones)" <<<"$out" \
  && ! grep -q "blind" "$T/pov.out" && ok "a dev split without a positive: F1 said to be blind" || bad "blind F1: $(grep -i blind <<<"$out")"
# a tokenizer whose <pad> is not config.json's pad_token_id is refused (it trained padding with a real token, exit 0)
mkdir -p "$T/padcfg" && cp "$T/model/"* "$T/padcfg/"
python3 - "$T/padcfg/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["pad_token_id"] = 0; json.dump(c, open(sys.argv[1], "w"))
PY
expect_error "a tokenizer <pad> other than config.json's pad_token_id refused" "has <pad> at id 1, but its config.json says pad_token_id 0" \
  "$BIN" --task mrpc --data-dir "$T/pm" --init-from "$T/padcfg" --eval-only
# a --max-len that leaves no text is refused (MRPC at 4: its four special tokens alone, exit 0); a single-sentence
# task's 3 holds a token (it was refused below 4)
expect_error "--max-len 5 for a pair task refused" "--max-len 5 is too short: mrpc's pair layout has 4 special tokens and a token of each sentence, so it needs at least 6" \
  "$BIN" --task mrpc --data-dir "$T/pm" --init-from "$T/s1" --eval-only --max-len 5
# ... and so is one taken from a directory's tokenizer_config.json (an older build saved 4 for every task)
mkdir -p "$T/ml4" && cp "$T/s1/"* "$T/ml4/"
python3 - "$T/ml4/tokenizer_config.json" <<'PY'
import json, os, sys
c = json.load(open(sys.argv[1])) if os.path.exists(sys.argv[1]) else {}
c["model_max_length"] = 4; json.dump(c, open(sys.argv[1], "w"))
PY
expect_error "a model_max_length of 4 for a pair task refused" "--max-len 4 \(the model's positions or its tokenizer_config.json's model_max_length\) is too short" \
  "$BIN" --task mrpc --data-dir "$T/pm" --init-from "$T/ml4" --eval-only
# test examples cut by --max-len are counted as the training and dev ones are (they were not said)
out=$("$BIN" --task mrpc --data-dir "$T/pm" --init-from "$T/s1" --eval-only --predict "$T/predcut" --max-len 12 2>&1)
grep -Eq "^notice: [0-9]+ training, [1-9][0-9]* dev and [1-9][0-9]* test \(--predict\) examples were truncated to --max-len 12 tokens" <<<"$out" \
  && ok "truncated test examples are counted in the notice" || bad "truncation notice with --predict: $(grep -i truncat <<<"$out")"
# a test file without an index column (here MRPC's dev layout): its rows numbered from 0, and said
mkdir -p "$T/pn" && cp "$T/data/mrpc/train.tsv" "$T/data/mrpc/dev.tsv" "$T/pn/" && cp "$T/data/mrpc/dev.tsv" "$T/pn/test.tsv"
out=$("$BIN" --task mrpc --data-dir "$T/pn" --init-from "$T/s1" --eval-only --predict "$T/predn" 2>&1)
grep -q "^--predict: test, 128 examples, into $T/predn/MRPC.tsv at the end (the file has no index: its rows are numbered from 0)" <<<"$out" \
  && [ "$(sed -n '2p;129p' "$T/predn/MRPC.tsv" | cut -f1 | tr '\n' ' ')" = "0 127 " ] && ok "a test file without an index: numbered from 0, said" \
  || bad "no index column: $(grep -- '--predict:' <<<"$out"), $(sed -n '2p' "$T/predn/MRPC.tsv")"
# STS-B: the scores (9 digits: the float32 outputs) correlate with the dev scores as the printed Pearson says, and
# their mean squared error is the printed dev loss (Pearson alone would pass scores scaled or shifted)
mkdir -p "$T/ps" && cp "$T/data/stsb/train.tsv" "$T/data/stsb/dev.tsv" "$T/ps/"
cut -f1-9 "$T/data/stsb/dev.tsv" > "$T/ps/test.tsv"
out=$("$BIN" --task stsb --data-dir "$T/ps" --init-from "$T/s2" --eval-only --predict "$T/pred" 2>&1); rc=$?
python3 - "$T/ps/dev.tsv" "$T/pred/STS-B.tsv" "$(grep '^dev loss' <<<"$out")" <<'PY' \
  && ok "--predict STS-B.tsv: the scores' Pearson is the printed one" || bad "--predict STS-B: rc $rc, $(tail -3 <<<"$out")"
import re, sys
dev, pred, printed = sys.argv[1:]
y = [float(l.split("\t")[-1]) for l in open(dev).read().splitlines()[1:]]
rows = open(pred).read().splitlines()[1:]
assert [int(r.split("\t")[0]) for r in rows] == list(range(len(y)))
x = [float(r.split("\t")[1]) for r in rows]
mx, my = sum(x) / len(x), sum(y) / len(y)
cov = sum((a - mx) * (b - my) for a, b in zip(x, y))
r = cov / (sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y)) ** 0.5
want = float(re.search(r"pearson ([0-9.-]+)", printed).group(1))
assert abs(r - want) < 1e-4, (r, want)  # the printed 4 decimals
mse, loss = sum((a - b) ** 2 for a, b in zip(x, y)) / len(y), float(re.search(r"^dev loss ([0-9.]+)", printed).group(1))
assert abs(mse - loss) < 1e-4, (mse, loss)  # the loss is the mean of (score - label)^2, printed with 4 decimals
PY
# a training run writes them at its end; an earlier run's file is refused up front; no test split is said up front
"$BIN" --task mrpc --data-dir "$T/pm" $M --epochs 1 --predict "$T/pred2" > "$T/p2.out" 2>&1 \
  && grep -q "^--predict: test, 128 examples, into $T/pred2/MRPC.tsv at the end" "$T/p2.out" \
  && grep -q "^predicted test: 128 examples with the final weights (epoch 1)" "$T/p2.out" \
  && [ "$(wc -l < "$T/pred2/MRPC.tsv")" -eq 129 ] && ok "a training run's --predict writes MRPC.tsv at its end" \
  || bad "training --predict: $(tail -3 "$T/p2.out")"
expect_error "--predict over an earlier run's file refused" "--predict .*pred2 already holds MRPC.tsv" "$BIN" --task mrpc --data-dir "$T/pm" $M --epochs 1 --predict "$T/pred2"
mkdir -p "$T/llamadir" && cp "$T/model/model.safetensors" "$T/llamadir/" && echo '{"model_type": "llama"}' > "$T/llamadir/config.json"
expect_error "another architecture is named before its missing tokenizer" 'model_type is "llama", but the encoder needs a RoBERTa config' "$BIN" --task mrpc --data-dir "$T/data/mrpc" --init-from "$T/llamadir"
ln -s "$T/gone" "$T/pred_dangling"
expect_error "--predict to a dangling symbolic link said as one" "--predict .*pred_dangling is a symbolic link to .*gone" "$BIN" --task mrpc --data-dir "$T/pm" $M --epochs 1 --predict "$T/pred_dangling"
expect_error "--predict without a test split said before training" "no test split in .*data/mrpc" "$BIN" --task mrpc --data-dir "$T/data/mrpc" $M --epochs 1 --predict "$T/pred3"
# test examples longer than every training and dev example: the arena grows for them, the training and dev batches
# do not (their padding, so their arithmetic, is --predict's no matter): the dev scores are the same to the last
# digit with and without --predict, with --padding longest too, and a --resume may add --predict
mkdir -p "$T/pl" && cp "$T/pm/train.tsv" "$T/pm/dev.tsv" "$T/pl/"
awk 'BEGIN { FS = OFS = "\t" } NR > 1 { $4 = $4 " " $4 " " $4 } { print }' "$T/pm/test.tsv" > "$T/pl/test.tsv"
for pad in batch longest; do
  a=$("$BIN" --task stsb --data-dir "$T/ps" --init-from "$T/s2" --eval-only --padding $pad 2>&1 | grep '^dev loss')
  mkdir -p "$T/psl" && cp "$T/ps/train.tsv" "$T/ps/dev.tsv" "$T/psl/"
  awk 'BEGIN { FS = OFS = "\t" } NR > 1 { $8 = $8 " " $8 " " $8 " " $8 } { print }' "$T/ps/test.tsv" > "$T/psl/test.tsv"
  out=$("$BIN" --task stsb --data-dir "$T/psl" --init-from "$T/s2" --eval-only --padding $pad --predict "$T/pred5$pad" 2>&1)
  [ -n "$a" ] && [ "$(grep '^dev loss' <<<"$out")" = "$a" ] && [ -s "$T/pred5$pad/STS-B.tsv" ] \
    && ok "--padding $pad: longer test examples leave the dev scores as they were: '$a'" \
    || bad "--padding $pad, longer test examples: '$a' vs '$(grep '^dev loss' <<<"$out")'"
done
"$BIN" --task mrpc --data-dir "$T/pl" $M --epochs 1 --ckpt-dir "$T/ckp" --ckpt-every 8 > "$T/pl.out" 2>&1 \
  || bad "the run before --predict: $(tail -2 "$T/pl.out")"
"$BIN" --task mrpc --data-dir "$T/pl" $M --epochs 1 --ckpt-dir "$T/ckp" --resume --predict "$T/pred4" > "$T/pl2.out" 2>&1 \
  && [ "$(wc -l < "$T/pred4/MRPC.tsv")" -eq 129 ] && ok "a --resume that adds --predict (longer test examples) predicts" \
  || bad "--resume adding --predict: $(tail -3 "$T/pl2.out")"
expect_error "--predict that is a file refused" "--predict .*config.json is a file" "$BIN" --task mrpc --data-dir "$T/pm" $M --predict "$T/model/config.json"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
