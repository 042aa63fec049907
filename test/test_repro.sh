#!/usr/bin/env bash
# CTest repro.tables: runs every scripts/repro/*.py with --quick into a temporary directory and checks that each
# wrote its markdown table (with the expected row labels, and a legend of only the columns it has) and its PNG. The
# scripts run from that directory with a relative --out (the trainer runs at the repository root: the scripts make
# --out absolute). Also: --dry-run writes nothing, and each script's --help lists only its own flags; the refusals
# (failed planner calls, --gpu-mem, --out a file, table4's micro-batch, table2's OOM fit), a diverged log's nan and
# the train loss of padding and skipped steps (plot_runs.py's),
# in seconds before the runs. Builds nothing: ./train_gpt2 and ./train_llama (and ./finetune_roberta) must exist at
# the repository root. Without matplotlib the PNG checks are skipped (with a reason).
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export OMP_NUM_THREADS=2
OUT=$(mktemp -d "${TMPDIR:-/tmp}/repro.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
pass=0; fail=0
ok() { echo "PASS: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

for b in train_gpt2 train_llama finetune_roberta; do
  [ -x "./$b" ] || { echo "FAIL: ./$b is not built (build the trainers first)"; echo "0 passed, 1 failed"; exit 1; }
done
HAVE_MPL=1
python3 -c 'import matplotlib' 2>/dev/null || { HAVE_MPL=0; echo "SKIP PNG checks: matplotlib is not installed (pip install matplotlib)"; }

# script | labels that must start a table row
declare -A LABELS=(
  [table2]="Baseline|GaLore|RSO|PRAC"
  [table4]="Baseline|PRAC"
  [table9]="Muon|Adam-mini"
  [ablation_modes]="Baseline|PAC|RAC|PRAC"
  [ablation_k]="k0|0.5k0|0.2k0|1.2k0"
  [table5]="Full FT|RSO|PRAC"
  [memory]="llama-130m|gpt2-355m|llama-tiny"
)
t_all=$SECONDS
# shards with real headers for the --paper data checks (the built-in corpus: SentencePiece for LLaMA, GPT-2 r50k)
mkdir -p "$OUT/c4" "$OUT/owt"
for sp in train val; do
  ln -s "$ROOT/data/builtin/austen_llama_$sp.bin" "$OUT/c4/${sp}_0.bin"
  ln -s "$ROOT/data/builtin/austen_gpt2_$sp.bin" "$OUT/owt/${sp}_0.bin"
done
# data patterns relative to the caller's directory reach the trainer (which runs in the repository) absolute
if (cd "$OUT" && python3 "$ROOT/scripts/repro/table4.py" --paper --dry-run --train-data 'c4/train_*.bin' \
      --val-data 'c4/val_*.bin') 2>&1 | grep -q -- "--train-data '$OUT/c4/train_\*.bin' --val-data '$OUT/c4/val_\*.bin'"; then
  ok "a relative --train-data / --val-data is passed on absolute"
else
  bad "a relative --train-data / --val-data is not passed on absolute"
fi
# --dry-run prints the commands and writes nothing (not even --out)
for s in table4 table5; do
  if python3 "scripts/repro/$s.py" --quick --dry-run --out "$OUT/dry_$s" > "$OUT/dry_$s.log" 2>&1 \
     && grep -q -- "--log $OUT/dry_$s/" "$OUT/dry_$s.log"; then
    [ -e "$OUT/dry_$s" ] && bad "$s.py --dry-run created its --out directory" || ok "$s.py --dry-run writes nothing"
  else
    bad "$s.py --dry-run failed or printed no commands:"; tail -5 "$OUT/dry_$s.log"
  fi
done
# --help: the pretraining data flags where they apply (--gpt2-* only in table2, none in table5's fine-tuning)
help_has() {  # help_has SCRIPT yes|no FLAG...
  local s=$1 want=$2 h f; shift 2
  h=$(python3 "scripts/repro/$s.py" --help 2>&1)
  for f in "$@"; do
    if grep -q -- "$f " <<<"$h"; then [ "$want" = yes ] && ok "$s.py --help lists $f" || bad "$s.py --help lists $f"
    else [ "$want" = no ] && ok "$s.py --help has no $f" || bad "$s.py --help lacks $f"; fi
  done
}
help_has table5 no --train-data --val-data --gpt2-train-data --gpt2-val-data --gpu-mem --launch
help_has table5 yes --model-dir --glue-dir
help_has table2 yes --train-data --val-data --gpt2-train-data --gpt2-val-data --gpu-mem --launch
for s in table4 table9 ablation_modes ablation_k; do
  help_has $s yes --train-data --val-data --gpu-mem
  help_has $s no --gpt2-train-data --gpt2-val-data
done
# refusals (seconds, no training): a clear one-line message and a non-zero exit, never a traceback
refused() {  # refused WHAT PATTERN CMD...
  local what=$1 pat=$2 out rc; shift 2
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" != 0 ] && grep -q -- "$pat" <<<"$out" && ! grep -q Traceback <<<"$out"; then ok "$what refused (exit $rc)"
  else bad "$what: exit $rc, want non-zero and '$pat':"; tail -5 <<<"$out"; fi
}
# a dry run whose planner calls fail (a model or flag the trainer refuses) fails like the real run would
refused "table2.py --dry-run --models bogus" "4 planner call(s) failed" \
  python3 scripts/repro/table2.py --quick --dry-run --models bogus
refused "table9.py --dry-run --models gpt2-124m (a GPT-2 model for train_llama)" "planner call(s) failed" \
  python3 scripts/repro/table9.py --quick --dry-run --models gpt2-124m
refused "table2.py --gpu-mem -1" "--gpu-mem -1: must be more than 0" \
  python3 scripts/repro/table2.py --paper --dry-run --gpu-mem -1
# flags every run would refuse fail the dry run too (the planner strips only the log and data flags now; --steps -3
# was stripped, and the dry run exited 0)
refused "ablation_modes.py --dry-run --extra='--steps -3'" "planner call(s) failed" \
  python3 scripts/repro/ablation_modes.py --quick --dry-run "--extra=--steps -3"
# --paper's GPU fits are not asked of the CPU backend's plans (each planner call failed, after a review)
for s in table2 table4; do
  refused "$s.py --paper --device cpu" "--paper --device cpu: the paper's runs are planned for a GPU" \
    python3 scripts/repro/$s.py --paper --dry-run --device cpu
done
refused "table2.py --steps 0 (read as no --steps: the default count ran)" "--steps 0: must be at least 1" \
  python3 scripts/repro/table2.py --quick --dry-run --steps 0
# one line, not a traceback: a --quick model in --paper mode, an unknown task or class, an unbalanced quote, a
# model named twice, the trainers not built
refused "table2.py --paper --models llama-tiny" "--paper has no configuration of llama-tiny" \
  python3 scripts/repro/table2.py --paper --dry-run --models llama-tiny
refused "table5.py --tasks MRPC" "--tasks: 'MRPC' is not one of" python3 scripts/repro/table5.py --paper --dry-run --tasks MRPC
refused "ablation_k.py --classes Linear" "--classes: 'Linear' is not one of" \
  python3 scripts/repro/ablation_k.py --quick --dry-run --classes Linear
refused "table2.py --extra with an unbalanced quote" "No closing quotation" \
  python3 scripts/repro/table2.py --quick --dry-run "--extra=--seed \"2"
# --extra may not replace what tells the rows apart (the trainer takes the last of a flag given twice: every row would
# have run without PRAC under its own label); a flag set alike in every run is replaced, and the table says so (below)
refused "table2.py --extra='--prac none'" "--extra --prac: the table's runs differ in --prac (none in llama-tiny Baseline, prac in llama-tiny PRAC)" \
  python3 scripts/repro/table2.py --quick --dry-run --models llama-tiny "--extra=--prac none"
refused "table5.py --extra='--prac prac' (only its PRAC row sets it)" "--extra --prac: the table's runs differ in --prac (not set in Full FT, prac in PRAC)" \
  python3 scripts/repro/table5.py --quick --dry-run "--extra=--prac prac"
refused "ablation_modes.py --extra=--prac=pac" "--extra --prac: the table's runs differ in --prac" \
  python3 scripts/repro/ablation_modes.py --quick --dry-run --extra=--prac=pac
refused "memory.py --seeds 2 --extra='--seed 5'" "--extra --seed: the table's runs differ in --seed (1 in " \
  python3 scripts/repro/memory.py --quick --dry-run --seeds 2 "--extra=--seed 5"
refused "table2.py --models llama-tiny,llama-tiny" "a model is named twice" \
  python3 scripts/repro/table2.py --quick --dry-run --models llama-tiny,llama-tiny
# (from a tester: a traceback for a --steps or --seq-len that is no whole number; --quick dropped table5's --model-dir
# and --glue-dir without a word; --paper's check before the runs missed the weights, tokenizer and split files)
refused "table4.py --extra='--steps 1e2'" "--steps 1e2: not a whole number" \
  python3 scripts/repro/table4.py --quick --dry-run "--extra=--steps 1e2"
refused "table5.py --quick --model-dir" "--model-dir: --quick fine-tunes a tiny RoBERTa of its own" \
  python3 scripts/repro/table5.py --quick --dry-run --model-dir /nonexistent/roberta
mkdir -p "$OUT/rb" "$OUT/glue/MRPC" && echo '{}' > "$OUT/rb/config.json" && touch "$OUT/glue/MRPC/train.tsv"
refused "table5.py --paper, roberta-base without weights or tokenizer" "no model.safetensors, tokenizer.json or vocab.json + merges.txt" \
  python3 scripts/repro/table5.py --paper --tasks mrpc --model-dir "$OUT/rb" --glue-dir "$OUT/glue" --out "$OUT/t5p"
touch "$OUT/rb/model.safetensors" "$OUT/rb/vocab.json" "$OUT/rb/merges.txt"
refused "table5.py --paper, MRPC without dev.tsv" "no $OUT/glue/MRPC/dev.tsv (or .jsonl)" \
  python3 scripts/repro/table5.py --paper --tasks mrpc --model-dir "$OUT/rb" --glue-dir "$OUT/glue" --out "$OUT/t5p"
mkdir -p "$OUT/unbuilt" && cp -r scripts "$OUT/unbuilt/"
refused "table2.py where the trainers are not built" "is not built: run \`make build\`" \
  python3 "$OUT/unbuilt/scripts/repro/table2.py" --quick --dry-run --models llama-tiny
refused "plan_table.py where the trainers are not built" "is not built: run \`make build\`" \
  python3 "$OUT/unbuilt/scripts/plan_table.py"
# --extra may never give what the scripts own per run or what the labels name: --model mislabelled a one-model table
refused "table9.py --extra='--model llama-mini' (one model: every run alike)" "--extra --model: the table is labelled with the model" \
  python3 scripts/repro/table9.py --quick --dry-run "--extra=--model llama-mini"
for f in "--log x.jsonl" "--ckpt-dir ck" "--resume" "--overwrite" "--save m" "--dump-path a.npy"; do
  refused "table9.py --extra='$f'" "--extra ${f%% *}: " python3 scripts/repro/table9.py --quick --dry-run "--extra=$f"
done
# --paper's data, checked before any run (dry runs too): a pattern matching nothing; LLaMA's SentencePiece shards
# given to the GPT-2 runs (they failed only after every LLaMA run had finished)
refused "table9.py --paper --dry-run with a pattern matching nothing" "no file matches it" \
  python3 scripts/repro/table9.py --paper --dry-run --train-data "$OUT/none/*.bin" --val-data "$OUT/c4/val_0.bin"
refused "table2.py --paper --dry-run: LLaMA's shards for the GPT-2 runs" "holds SentencePiece tokens, and run gpt2-124m_baseline (./train_gpt2) reads GPT-2 r50k BPE shards only" \
  python3 scripts/repro/table2.py --paper --dry-run --models llama-130m,gpt2-124m --train-data "$OUT/c4/train_*.bin" --val-data "$OUT/c4/val_*.bin"
refused "table9.py --paper --dry-run: GPT-2 shards for LLaMA" "holds GPT-2 r50k BPE tokens, and run llama-130m_muon_none" \
  python3 scripts/repro/table9.py --paper --dry-run --models llama-130m --train-data "$OUT/owt/train_0.bin" --val-data "$OUT/c4/val_0.bin"
# --quick ignored data patterns and --gpu-mem silently
refused "table2.py --quick --train-data" "--train-data: --quick trains on the built-in corpus" \
  python3 scripts/repro/table2.py --quick --dry-run --train-data "$OUT/c4/train_0.bin"
refused "table4.py --quick --gpu-mem 40" "--gpu-mem: --quick makes no fit check" python3 scripts/repro/table4.py --quick --dry-run --gpu-mem 40
# one aggregation of the timings (tokens over time; a resumed log's replayed step counts once), a diverged run's
# huge PPL in scientific notation (exp(600) printed 261 digits; exp overflows at 709.78, inf switched in at 700)
printf '{"type":"step","step":%d,"loss":5,"tokens_per_s":%s,"ms_per_step":%s}\n' 1 1 1 2 1000 100 3 100 1000 3 100 1000 \
  >"$OUT/timing.jsonl"
echo '{"type":"eval","step":3,"val_loss":600}' >>"$OUT/timing.jsonl"
got=$(python3 -c 'import sys; sys.path.insert(0, "scripts/repro"); import common as C
s = C.summarize(sys.argv[1]); print(s["steps"], round(s["tokens_per_s"], 1), C.fmt_num(s["ppl"]), C.fmt_num(C.ppl_from_loss(709.9)))' \
      "$OUT/timing.jsonl" 2>&1)
[ "$got" = "3 181.8 3.773e+260 inf" ] && ok "summarize: tokens over time (181.8, not the mean rate 550), a replayed step once, PPL 3.773e+260, inf past exp's range" \
  || bad "summarize: '$got', want '3 181.8 3.773e+260 inf'"
# a resumed process's first step ("startup":true: its set-up, here 5 s) is left out of the timings as the run's first
# is: steps 2 and 4, 200 tokens in 0.2 s (with it: 250 tokens in 5.2 s, 48)
{ printf '{"type":"step","step":1,"loss":5,"tokens_per_s":1,"ms_per_step":1000,"startup":true}\n'
  printf '{"type":"step","step":%d,"loss":5,"tokens_per_s":%s,"ms_per_step":%s}\n' 2 1000 100 3 100 1000
  printf '{"type":"step","step":3,"loss":5,"tokens_per_s":10,"ms_per_step":5000,"startup":true}\n'
  printf '{"type":"step","step":4,"loss":5,"tokens_per_s":1000,"ms_per_step":100}\n'; } >"$OUT/resumed_timing.jsonl"
got=$(python3 -c 'import sys; sys.path.insert(0, "scripts/repro"); import common as C
s = C.summarize(sys.argv[1]); print(s["steps"], s["timed_steps"], round(s["tokens_per_s"], 1))' "$OUT/resumed_timing.jsonl" 2>&1)
[ "$got" = "4 2 1000.0" ] && ok "summarize: a resumed process's first step is left out of the timings (1000 tokens/s)" \
  || bad "summarize of a resumed log: '$got', want '4 2 1000.0'"
# a resume that stopped before the earlier process had (resumed at 3, stopped after 4; the earlier one reached 5 and
# evaluated there): the run is the resumed one, as plot_runs.py draws it (step 5's records were counted, its eval final)
{ printf '{"type":"step","step":%d,"loss":5,"tokens_per_s":100,"ms_per_step":100}\n' 1 2 3 4 5
  printf '{"type":"eval","step":5,"val_loss":9}\n'
  printf '{"type":"step","step":%d,"loss":4,"tokens_per_s":100,"ms_per_step":100}\n' 3 4
  printf '{"type":"eval","step":4,"val_loss":4}\n'; } >"$OUT/resumed_short.jsonl"
got=$(python3 -c 'import sys; sys.path.insert(0, "scripts/repro"); import common as C
s = C.summarize(sys.argv[1]); print(s["steps"], s["val_loss"])' "$OUT/resumed_short.jsonl" 2>&1)
[ "$got" = "4 4" ] && ok "summarize: a shorter resume's records are the run (the earlier process's step 5 dropped)" \
  || bad "summarize of a shorter resume: '$got', want '4 4'"
# a run of one step has no timing (its set-up step's read as the method's speed, -94%); skipped steps are counted
printf '{"type":"step","step":1,"loss":5,"tokens_per_s":8,"ms_per_step":7944,"startup":true}\n' >"$OUT/one_step.jsonl"
printf '{"type":"step","step":%d,"loss":5,"tokens_per_s":100,"ms_per_step":100,"skipped":true}\n' 1 2 >"$OUT/skips.jsonl"
got=$(python3 -c 'import sys; sys.path.insert(0, "scripts/repro"); import common as C
a, b = C.summarize(sys.argv[1]), C.summarize(sys.argv[2]); print(a["tokens_per_s"], a["ms_per_step"], b["skipped"])' \
      "$OUT/one_step.jsonl" "$OUT/skips.jsonl" 2>&1)
[ "$got" = "None None 2" ] && ok "summarize: a one-step run has no timing; skipped steps counted" \
  || bad "summarize of a one-step run / skipped steps: '$got', want 'None None 2'"
# --extra's --flag=value is the value the trainer reads (the table's own was read: a 4-step run never finished)
got=$(python3 -c 'import sys; sys.path.insert(0, "scripts/repro"); import common as C
print(C.flag_value(["--steps", "20", "--seq-len", "32", "--steps=4"], "--steps"), C.flag_value(["--seq-len=16"], "--seq-len"))' 2>&1)
[ "$got" = "4 16" ] && ok "flag_value reads --flag=value" || bad "flag_value with --flag=value: '$got', want '4 16'"
# --paper's notes: one seed per row, and PRAC's ranks rounded down to multiples of 8, are said where they hold (not
# for runs of several seeds, both ranks absolute, only fine-tuning or no PRAC run; never in --quick)
got=$(python3 -c 'import sys, types; sys.path.insert(0, "scripts/repro"); import common as C
paper, quick = types.SimpleNamespace(paper=True), types.SimpleNamespace(paper=False)
def notes(runs, args=paper):
    return "|".join(" ".join(n.split()[:2]) for n in C.paper_notes([C.Run("r", "r", b, f) for b, f in runs], args))
L, F = "train_llama", "finetune_roberta"
print(notes([(L, ["--prac", "prac"]), (L, ["--prac", "none"])]))
print(notes([(L, ["--prac", "prac", "--seed", "1"]), (L, ["--seed=2"])]))
print(notes([(L, ["--prac=rac", "--prac-linear-ranks", "8,8", "--seed", "3"])]))
print(notes([(L, ["--prac=rac", "--prac-linear-ranks", "8,8", "--prac-nonlinear-ranks=8,8", "--seed", "3"])]))
print(notes([(F, ["--prac", "prac"])]), notes([(L, ["--prac", "prac"])], quick))' 2>&1)
want="One run|PRAC's ranks
PRAC's ranks
One run|PRAC's ranks
One run
One run "
[ "$got" = "$want" ] && ok "--paper's notes: one seed per row, PRAC's ranks rounded to multiples of 8, where they hold" \
  || bad "--paper's notes: '$got', want '$want'"
# two invocations on one --out: the second stops with one line (they ran the same runs, one calling a run FAILED)
got=$(python3 -c 'import subprocess, sys; sys.path.insert(0, "scripts/repro"); import common as C
C.make_out(sys.argv[1]); C.make_out(sys.argv[1])  # (again in this process: fine)
r = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, \"scripts/repro\"); import common as C; "
                    "C.make_out(sys.argv[1])", sys.argv[1]], capture_output=True, text=True)
print(r.returncode, r.stderr.splitlines()[0])' "$OUT/locked" 2>&1)
[[ "$got" == "1 --out $OUT/locked: another invocation is writing there (pid "* ]] && ok "a second invocation on the same --out stops with one line" || bad "two invocations on one --out: '$got'"
# (an --out where no file can be made: one line, not a traceback)
got=$(python3 -c 'import sys; sys.path.insert(0, "scripts/repro"); import common as C; C.make_out("/proc")' 2>&1)
[ "$got" = "--out /proc: cannot write /proc/.lock: No such file or directory" ] && ok "an --out that takes no file: one line" \
  || bad "an --out that takes no file: '$got'"
# OpenWebText's validation shards alone reach the GPT-2 runs (they took C4's unless --gpt2-train-data was given)
out=$(python3 scripts/repro/table2.py --paper --dry-run --models gpt2-124m --train-data "$OUT/owt/train_0.bin" \
      --val-data "$OUT/c4/val_0.bin" --gpt2-val-data "$OUT/owt/val_0.bin" 2>&1)
[ "$(grep -c -- "--train-data $OUT/owt/train_0.bin --val-data $OUT/owt/val_0.bin" <<<"$out")" = 4 ] \
  && ok "--gpt2-val-data alone reaches the 4 GPT-2 runs" || bad "--gpt2-val-data alone: $(grep -m1 -- --val-data <<<"$out")"
# a run that fails (diverges: the trainer logs the bad step, nulls, and stops) reads "failed", not the numbers its
# log holds from before (a finite PPL with exit 1)
out=$(python3 scripts/repro/table2.py --quick --models llama-tiny --steps 4 --out "$OUT/div" \
      "--extra=--lr 1e9 --weight-decay 0 --grad-clip 0 --warmup 0 --min-lr-frac 1" 2>&1); rc=$?
n=$(grep -c '^| .* | failed (exit 1) |' "$OUT/div/table2.md" 2>/dev/null)
[ "$rc" = 1 ] && [ "$n" = 4 ] && ! grep -Eq '^\| (Baseline|GaLore|RSO|PRAC) \| [0-9]' "$OUT/div/table2.md" \
  && grep -q -- "--extra replaces the table's --lr 0.003 with --lr 1e9 in every run" "$OUT/div/table2.md" \
  && ok "failed runs read 'failed (exit 1)', no number (exit 1); the table names --extra's --lr" \
  || { bad "failed runs: exit $rc, $n rows 'failed':"; cat "$OUT/div/table2.md" 2>/dev/null | grep '^|'; }
# --launch: a launcher before every trainer (mpirun on GPUs; here a stand-in that records its tag and runs the
# trainer), with --paper's global batch as --global-batch (the trainer splits it over the launched ranks); the .cmd a
# rerun compares leaves the launcher out, so a rerun with another one (another number of GPUs) keeps what finished,
# and the markdown names the launcher each run trained under; a rank count that does not divide the global batch,
# table4 (one device's throughput) and --extra's --grad-accum beside --global-batch are refused before any run
out=$(python3 scripts/repro/table2.py --paper --dry-run --models llama-130m "--launch=mpirun -np 4" 2>&1)
[ "$(grep -c -- "^\[[1-4]/4\] mpirun -np 4 $ROOT/train_llama .*--batch-size 128 --seq-len 256 --global-batch 512 " <<<"$out")" = 4 ] \
  && ok "--paper --launch='mpirun -np 4': every run launched so, with --global-batch 512" \
  || bad "--paper --launch: $(grep -m1 '^\[1/4\]' <<<"$out")"
refused "--launch with an unbalanced quote" "--launch \"mpirun -np '4\": No closing quotation" \
  python3 scripts/repro/table2.py --paper --dry-run --models llama-130m "--launch=mpirun -np '4"
printf '#!/bin/sh\necho "$1" >>"%s/launched"\nshift\nexec "$@"\n' "$OUT" >"$OUT/launcher.sh" && chmod +x "$OUT/launcher.sh"
python3 scripts/repro/table2.py --quick --models llama-tiny --steps 2 --out "$OUT/launch" "--launch=$OUT/launcher.sh A" \
  >"$OUT/launch.log" 2>&1; rc1=$?
python3 scripts/repro/table2.py --quick --models llama-tiny --steps 2 --out "$OUT/launch" "--launch=$OUT/launcher.sh B" \
  >>"$OUT/launch.log" 2>&1; rc2=$?
[ "$rc1" = 0 ] && [ "$rc2" = 0 ] && [ "$(cat "$OUT/launched" 2>/dev/null | tr '\n' ' ')" = "A A A A " ] \
  && [ "$(grep -c ': kept, ' "$OUT/launch.log")" = 4 ] \
  && [ "$(grep -c "^$OUT/launcher.sh A ./train_llama " "$OUT/launch/table2.md")" = 4 ] \
  && ok "--launch runs each trainer through the launcher; a rerun with another launcher keeps the finished runs" \
  || { bad "--launch: exit $rc1/$rc2, launched '$(cat "$OUT/launched" 2>/dev/null)':"; cat "$OUT/launch.log"; }
# a run past --run-timeout under a launcher gets SIGUSR1 (mpirun forwards it to every rank; SIGTERM to mpirun kills
# the ranks before their checkpoint): the stand-in passes it to the trainer, which stops with a checkpoint
python3 scripts/repro/table2.py --quick --models llama-tiny --steps 100000 --run-timeout 4 --out "$OUT/launchstop" \
  "--launch=$OUT/launcher.sh C" >"$OUT/launchstop.log" 2>&1
n=$(grep -c "timed out after 4 s: stopping it (SIGUSR1: it checkpoints)" "$OUT/launchstop.log")
[ "$n" = 4 ] && [ "$(ls -d "$OUT"/launchstop/ckpt/*/step_* 2>/dev/null | wc -l)" = 4 ] \
  && ok "--run-timeout under --launch stops each run with SIGUSR1 and its checkpoint" \
  || { bad "--run-timeout under --launch: $n of 4 SIGUSR1 stops, checkpoints: $(ls "$OUT"/launchstop/ckpt/* 2>&1)"; tail -5 "$OUT/launchstop.log"; }
refused "--launch='mpirun -np 3' (512 is no multiple of 3 x 128)" "does not split over 3 ranks into micro-batches of 128" \
  python3 scripts/repro/table2.py --paper --dry-run --models llama-130m "--launch=mpirun -np 3"
refused "table4.py --launch" "table4 projects the paper's hours from one device's tokens/s" \
  python3 scripts/repro/table4.py --paper --dry-run "--launch=mpirun -np 4"
refused "--paper --extra='--grad-accum 2'" "pass --extra='--global-batch N'" \
  python3 scripts/repro/table2.py --paper --dry-run --models llama-130m "--extra=--grad-accum 2"
# --out naming a file; the file is left as it was
echo keep >"$OUT/afile"
for s in table2 table5 memory; do
  refused "$s.py --out FILE" "--out $OUT/afile: exists and is not a directory" \
    python3 "scripts/repro/$s.py" --quick --out "$OUT/afile"
done
[ "$(cat "$OUT/afile")" = keep ] && ok "--out FILE left the file alone" || bad "--out FILE changed the file"
refused "table2.py --out under a file" "cannot create the directory" \
  python3 scripts/repro/table2.py --quick --steps 1 --models llama-tiny --out "$OUT/afile/sub"
# --extra with a value that starts with '-': the help says to write --extra=..., and that reaches every run
grep -q -- "--extra=--no-shuffle" <<<"$(python3 scripts/repro/table2.py --help)" \
  && ok "--help shows --extra=--no-shuffle" || bad "--help does not say how to pass --extra=--no-shuffle"
n=$(python3 scripts/repro/table2.py --quick --dry-run --extra=--no-shuffle 2>&1 | grep -c -- "--no-shuffle --log")
[ "$n" = 8 ] && ok "--extra=--no-shuffle reaches all 8 runs" || bad "--extra=--no-shuffle reached $n of 8 runs"
# table4: the last row is the planner's largest PRAC micro-batch or nothing (llama-1b does not fit 20 GiB at B=1)
refused "table4.py --gpu-mem 20 (PRAC llama-1b does not fit)" "does not fit even at micro-batch 1 in 20 GiB" \
  python3 scripts/repro/table4.py --paper --dry-run --gpu-mem 20
mb=$(./train_llama --plan --json --model llama-1b --batch-size 64 --seq-len 256 --prac prac --gpu-mem 40 \
       --prac-storage act --recompute-attention 0 \
     | python3 -c 'import json, sys; print(json.load(sys.stdin)["max_batch_size"])')
out=$(python3 scripts/repro/table4.py --paper --dry-run --gpu-mem 40 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q -- "^\[3/3\] .* --batch-size $mb .*--prac prac" <<<"$out" \
  && ok "table4.py --gpu-mem 40: the third run at the planner's largest micro-batch ($mb)" \
  || { bad "table4.py --gpu-mem 40: exit $rc, want --batch-size $mb in run 3:"; tail -3 <<<"$out"; }
# where the paper's larger micro-batch (96) fits, it is a row of its own before the planner's largest
mb=$(./train_llama --plan --json --model llama-1b --batch-size 64 --seq-len 256 --prac prac --gpu-mem 80 \
       --prac-storage act --recompute-attention 0 \
     | python3 -c 'import json, sys; print(json.load(sys.stdin)["max_batch_size"])')
out=$(python3 scripts/repro/table4.py --paper --dry-run --gpu-mem 80 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q -- "^\[3/4\] .* --batch-size 96 .*--prac prac" <<<"$out" \
  && grep -q -- "^\[4/4\] .* --batch-size $mb .*--prac prac" <<<"$out" \
  && ok "table4.py --gpu-mem 80: PRAC at the paper's B=96 and at the planner's largest ($mb)" \
  || { bad "table4.py --gpu-mem 80: exit $rc, want --batch-size 96 and $mb:"; grep '^\[' <<<"$out"; }
# table2's OOM test is the planner's (with its reserve for the CUDA context): a GPU 0.5 GiB above llama-130m RSO's
# plan at B=128 fits the plan alone but not the plan and the reserve, so RSO trains at half the batch
gib=$(./train_llama --plan --json --model llama-130m --batch-size 128 --seq-len 256 --optimizer rso --prac none \
        --rso-rank 256 --prac-storage act --recompute-attention 0 | python3 -c 'import json, sys; t = json.load(sys.stdin)["total"]; print(f"{t / 2**30 + 0.5:.3f}")')
out=$(python3 scripts/repro/table2.py --paper --dry-run --models llama-130m --gpu-mem "$gib" 2>&1)
grep -q -- "--optimizer rso --prac none --batch-size 64 --seq-len 256 --global-batch 512 " <<<"$out" \
  && ok "table2.py --gpu-mem $gib: RSO llama-130m is OOM at 128 with the planner's reserve (half batch)" \
  || bad "table2.py --gpu-mem $gib: RSO llama-130m not at half batch: $(grep -- '--optimizer rso' <<<"$out")"
# ... and when even half the micro-batch does not fit (llama-1b in 10 GiB: weights and optimizer alone ~20 GiB) it
# says so for each method
out=$(python3 scripts/repro/table2.py --paper --dry-run --models llama-1b --gpu-mem 10 2>&1)
n=$(grep -c "llama-1b .*: does not fit in 10 GiB even at half the micro-batch (64)" <<<"$out")
[ "$n" = 4 ] && ok "table2.py --gpu-mem 10: llama-1b does not fit even at half batch, said for all 4 methods" \
  || bad "table2.py --gpu-mem 10: $n of 4 'even at half' warnings: $out"
# GaLore's LLaMA runs take GaLore's own optimizer settings (its published scripts); the other methods, and GaLore's
# GPT-2 runs (the paper: the baseline's settings), the trainer's
out=$(python3 scripts/repro/table2.py --paper --dry-run --models llama-130m,gpt2-124m 2>&1)
g="--weight-decay 0 --beta2 0.999 --adam-eps 1e-06 --grad-clip 0"
[ "$(grep -c -- "$g" <<<"$out")" = 1 ] && grep -q -- "--model llama-130m --optimizer galore .*--lr 0.01 .*$g" <<<"$out" \
  && ok "table2.py --paper: llama-130m's GaLore run alone takes GaLore's optimizer settings ($g)" \
  || bad "table2.py --paper: $(grep -c -- "$g" <<<"$out") runs take '$g', want llama-130m's GaLore run alone"
# a diverged run's log (non-finite losses are null) reads nan, not the loss before the divergence
printf '{"type":"step","step":%d,"loss":10.0}\n' 1 2 3 4 >"$OUT/diverged.jsonl"
printf '{"type":"step","step":%d,"loss":null}\n' 5 6 7 8 >>"$OUT/diverged.jsonl"
echo '{"type":"eval","step":8,"val_loss":null,"val_ppl":null}' >>"$OUT/diverged.jsonl"
got=$(python3 -c 'import sys; sys.path.insert(0, "scripts/repro"); import common as C
s = C.summarize(sys.argv[1]); print(C.fmt_num(s["train_loss"]), C.fmt_num(s["val_loss"]), C.fmt_num(s["ppl"]))' \
      "$OUT/diverged.jsonl" 2>&1)
[ "$got" = "nan nan nan" ] && ok "a diverged log's train loss, val loss and PPL read nan" \
  || bad "a diverged log reads '$got', want 'nan nan nan'"
# a run that did not diverge: a step of padding alone ("padding":true, null loss: no loss at all) and a skipped step's
# null loss (--on-nonfinite skip: its update left out) are left out of the final train loss, as plot_runs.py's table
# leaves them (scripts/run_log.py's rule, one function for both): 5.0000, not nan
printf '{"type":"step","step":%d,"loss":5.0,"grad_norm":1.0}\n' 1 2 3 4 5 >"$OUT/pad_skip.jsonl"
echo '{"type":"step","step":6,"loss":null,"grad_norm":0,"padding":true}' >>"$OUT/pad_skip.jsonl"
echo '{"type":"step","step":7,"loss":null,"grad_norm":null,"skipped":true}' >>"$OUT/pad_skip.jsonl"
printf '{"type":"step","step":%d,"loss":5.0,"grad_norm":1.0}\n' 8 9 10 >>"$OUT/pad_skip.jsonl"
got=$(python3 -c 'import sys; sys.path[:0] = ["scripts", "scripts/repro"]; import common as C, plot_runs
s = C.summarize(sys.argv[1]); print(C.fmt_num(s["train_loss"], "{:.4f}"), s["skipped"], getattr(C, "train_loss", None) is plot_runs.train_loss)' \
      "$OUT/pad_skip.jsonl" 2>&1)
table=$(python3 scripts/plot_runs.py --no-plot --labels ps "$OUT/pad_skip.jsonl" 2>&1)
[ "$got" = "5.0000 1 True" ] && grep -q '^| ps | 10 | 5.0000 (1 non-finite step, 1 skipped step, 1 padding step) |' <<<"$table" \
  && ok "summarize: padding and skipped null losses left out of the train loss (5.0000), as plot_runs.py's table" \
  || bad "summarize of padding / skipped steps: '$got', want '5.0000 1 True'; plot_runs.py: $(grep '^| ps' <<<"$table")"
# --run-timeout: 0 or more seconds (a negative one killed every run at once), one line
for s in table2 table5 memory; do
  refused "$s.py --run-timeout -1" "--run-timeout -1: must be 0 (never) or more seconds" \
    python3 "scripts/repro/$s.py" --quick --dry-run --run-timeout -1
done
# table5's dry run asks the planner too (it checked nothing: exit 0 for a flag every run refuses): --quick against the
# tiny model made in a temporary directory (removed afterwards), --paper against a stand-in roberta-base config.json
mkdir -p "$OUT/tmpdir"
for mode in quick paper; do
  TMPDIR="$OUT/tmpdir" refused "table5.py --$mode --dry-run --extra=--bogus" "6 planner call(s) failed\|24 planner call(s) failed" \
    python3 scripts/repro/table5.py --$mode --dry-run --extra=--bogus --out "$OUT/dry5_$mode"
done
out=$(TMPDIR="$OUT/tmpdir" python3 scripts/repro/table5.py --paper --dry-run --out "$OUT/dry5_paper" 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q "^dry run: 24 of 24 runs planned against a stand-in config.json of roberta-base" <<<"$out" \
  && [ -z "$(ls -A "$OUT/tmpdir")" ] && [ ! -e "$OUT/dry5_paper" ] && [ ! -e "$OUT/dry5_quick" ] \
  && ok "table5.py --paper --dry-run: 24 runs planned (stand-in config), nothing left behind" \
  || { bad "table5.py --paper --dry-run: exit $rc, left: $(ls -A "$OUT/tmpdir")"; tail -3 <<<"$out"; }
# memory.py: its dry run asks the planner for the loss runs' flags; --plan-only writes memory_plan.md with the
# planner's commands (it wrote nothing)
refused "memory.py --dry-run --extra=--bogus" "6 planner call(s) failed" \
  python3 scripts/repro/memory.py --quick --dry-run --extra=--bogus --out "$OUT/memdry"
python3 scripts/repro/memory.py --plan-only --out "$OUT/memplan" >"$OUT/memplan.log" 2>&1; rc=$?
md="$OUT/memplan/memory_plan.md"
[ "$rc" = 0 ] && grep -q '^./train_llama --model llama-130m --batch-size 128 --seq-len 256 .*--plan --json$' "$md" 2>/dev/null \
  && grep -q '^| gpt2-355m | 32 x 1024 | PRAC + all + 8-bit Adam | [0-9.]* |' "$md" \
  && ok "memory.py --plan-only writes memory_plan.md: the planner's commands and table" \
  || { bad "memory.py --plan-only: exit $rc, memory_plan.md:"; cat "$md" 2>/dev/null | head -5; }
# Δ: one decimal below 1% (a small saving read -0%)
got=$(python3 -c 'import sys; sys.path.insert(0, "scripts/repro"); import common as C
print(C.fmt_delta(99.6, 100), C.fmt_delta(100.6, 100), C.fmt_delta(100.01, 100), C.fmt_delta(80, 100))' 2>&1)
[ "$got" = "-0.4% +0.6% 0% -20%" ] && ok "fmt_delta: -0.4% +0.6% 0% -20%" || bad "fmt_delta: '$got'"
# plan_table.py: the paper's figures with two decimals, as ours (46.1 beside 31.57)
out=$(python3 scripts/plan_table.py 2>&1)
grep -q '^| llama-350m | 128 / 256 | Baseline | [0-9.]* | - | 46.10 | - |' <<<"$out" \
  && ok "plan_table.py: the paper's GB with two decimals" || bad "plan_table.py: $(grep 'llama-350m .* Baseline' <<<"$out")"
# --paper-storage: every row planned as the paper stores (said in the first line): PRAC's LLaMA-1B total is the
# planner's at --prac-storage act --recompute-attention 0, not at the defaults
grep -q '^Plans at the trainers. default flags' <<<"$out" && ok "plan_table.py says its plans are at the default flags" \
  || bad "plan_table.py's first line: $(head -1 <<<"$out")"
want=$(./train_llama --model llama-1b --batch-size 128 --seq-len 256 --plan --json --precision bf16 --prac prac \
         --prac-storage act --recompute-attention 0 | python3 -c 'import json, sys; print("%.2f" % (json.load(sys.stdin)["total"] / 1e9))')
paper_out=$(python3 scripts/plan_table.py --paper-storage 2>&1)
grep -q "^| llama-1b | 128 / 256 | PRAC | $want |" <<<"$paper_out" && grep -q '^Plans as the paper stores' <<<"$paper_out" \
  && ! grep -q "^| llama-1b | 128 / 256 | PRAC | $want |" <<<"$out" \
  && ok "plan_table.py --paper-storage: LLaMA-1B PRAC $want GB, the planner's at the paper's storage" \
  || bad "plan_table.py --paper-storage: want $want GB: $(grep 'llama-1b .* PRAC' <<<"$paper_out")"
# and the README's copy of the table is its output, row for row (it had kept "46.1" after the script changed)
if diff <(grep '^|' <<<"$out") <(awk '/^\*\*Memory plan vs the paper.s Table 2\*\*/ { on = 1 } on && /^\|/ { print; seen = 1 }
                                    on && seen && !/^\|/ { exit }' README.md) >"$OUT/plan_table.diff"; then
  ok "README's memory-plan table is plan_table.py's output"
else bad "README's memory-plan table differs from plan_table.py's output: $(head -6 "$OUT/plan_table.diff")"; fi
# table5 with the trainer replaced (scripts run under a spy: fake fine-tuning runs write a log and exit RC, the
# plot's labels and every run's timeout are printed): a failed MRPC run reads - in MEM, not its log's memory record;
# a log holding only its memory record (killed before step 1) is left out of the PNG, not fatal to it; each curve
# is named by its task; a finished fine-tuning run's progress line gives its dev score; --run-timeout 0 is never
cat >"$OUT/spy.py" <<'PY'
import json, os, runpy, subprocess, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import common  # noqa: the script's own module (runpy finds it imported): its trainer call is replaced
real = subprocess.run
FAIL = dict(x.split(":") for x in os.environ.get("SPY_FAIL", "").split(",") if x)  # run name: steps|memory
METRIC = dict(mrpc="f1", stsb="pearson")
def trainer(cmd, out, timeout, launched=False):
    words = [str(c) for c in cmd]
    if os.path.basename(words[0]) == "finetune_roberta":
        log, task = words[words.index("--log") + 1], words[words.index("--task") + 1]
        name = os.path.basename(log)[:-len(".jsonl")]
        print(f"SPY run {name} timeout={timeout or None}", file=sys.stderr)
        recs = [dict(type="memory", B=16, T=25, planned_activation_bytes=1980160, planned_saved_bytes=1614592,
                     planned_activation_bytes_cuda_bf16=1005312, planned_saved_bytes_cuda_bf16=818944,
                     arena_bytes=1980160, backend_peak_bytes=2293504)]
        if FAIL.get(name) != "memory":
            recs += [dict(type="step", step=i, loss=0.7, ms_per_step=10, tokens_per_s=1000, mem_peak_bytes=2606848)
                     for i in range(1, 5)]
            recs += [dict(type="glue_eval", task=task, split="dev", step=4, epoch=1, val_loss=0.5,
                          **{METRIC[task]: 0.9})]
        if name not in FAIL:
            recs += [dict(type="final", metric=METRIC[task], step=4, best=0.9, best_epoch=1, final=0.9, seconds=0.1)]
        with open(log, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in recs)
        out.write("device: CPU (spy)\n")
        return 124 if name in FAIL else 0
    raise SystemExit(f"spy: not a fine-tuning run: {words}")
def fake(cmd, *a, **k):
    words = [str(c) for c in cmd]
    if len(words) > 1 and words[1].endswith("plot_runs.py"):
        print("SPY plot labels: " + words[words.index("--labels") + 1], file=sys.stderr)
    return real(cmd, *a, **k)
subprocess.run = fake
common.run_trainer = trainer
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
PY
out=$(SPY_FAIL=prac_mrpc:steps,prac_stsb:memory python3 "$OUT/spy.py" scripts/repro/table5.py --quick --out "$OUT/spy5" 2>&1); rc=$?
md="$OUT/spy5/table5.md"
[ "$rc" = 1 ] && [ "$(grep -c '^| PRAC | - | - | failed | failed | - |$' "$md" 2>/dev/null)" = 2 ] \
  && [ "$(grep -c '^| Full FT | 1.89 | 1.89 | 90.00 | 90.00 | 90.00 |$' "$md")" = 2 ] \
  && ok "table5: a failed MRPC run reads '-' in MEM (not its log's memory record), exit 1" \
  || { bad "table5, a failed MRPC run: exit $rc:"; grep '^| \(PRAC\|Full FT\) |' "$md" 2>/dev/null; }
# the paper's column order (STS-B before MRPC), a subset's AVG labelled as one, the memory columns named for what they are
grep -q '^| Method | Act. MEM planned (MiB) | Act. MEM, CPU arena (MiB) | STSB | MRPC | AVG of 2 tasks (not the paper.s 8) |$' "$md" \
  && grep -q 'Not activation figures, so not shown: the memory record.s `backend_peak_bytes`' "$md" \
  && ok "table5.md: tasks in the paper's order, a subset's AVG labelled, the memory columns explained" \
  || bad "table5.md's header: $(grep -m1 '^| Method' "$md")"
grep -q '^    done in [0-9.]*s: dev f1: final 0.9000, best 0.9000 (epoch 1)$' <<<"$out" \
  && ok "table5: a finished run's progress line gives its dev score" || bad "table5's progress line: $(grep 'done in' <<<"$out" | head -1)"
grep -qx 'SPY plot labels: Full FT STSB,Full FT MRPC,RSO STSB,RSO MRPC,PRAC MRPC (failed: exit 124)' <<<"$out" \
  && ok "table5's plot: each curve named by method and task; the run without steps left out" \
  || bad "table5's plot labels: $(grep 'SPY plot' <<<"$out" || echo none)"
if [ $HAVE_MPL = 1 ]; then
  [ -s "$OUT/spy5/table5.png" ] && grep -q '^Plot: left out of the plot (no step or evaluation record in the log): PRAC STSB\.$' "$md" \
    && ok "table5.png written despite a log holding only its memory record (the markdown names it)" \
    || { bad "table5.png with a memory-only log:"; grep -i 'plot' "$md"; }
fi
out0=$(python3 "$OUT/spy.py" scripts/repro/table5.py --quick --tasks mrpc --run-timeout 0 --out "$OUT/spy5b" 2>&1)
[ "$(grep -c '^SPY run .* timeout=300$' <<<"$out")" = 6 ] && [ "$(grep -c '^SPY run .* timeout=None$' <<<"$out0")" = 3 ] \
  && ok "table5 --quick: runs killed after 300 s unless --run-timeout is given; --run-timeout 0: never" \
  || bad "table5 --quick's timeouts: $(grep -m1 'SPY run' <<<"$out"); with --run-timeout 0: $(grep -m1 'SPY run' <<<"$out0")"
# Ctrl-C during a run: one line naming the run, exit 130 (a traceback). SIGINT reaches python only: a background
# job's SIGINT is ignored unless reset before exec
python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
  python3 scripts/repro/table2.py --quick --models llama-tiny --steps 100000 --out "$OUT/intr" >"$OUT/intr.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$OUT/intr/llama-tiny_baseline.out" ] && break; sleep 0.2; done
sleep 0.5; kill -INT $pid; wait $pid; rc=$?
[ "$rc" = 130 ] && grep -q "^interrupted (Ctrl-C) during run 1/4 llama-tiny_baseline after .*llama-tiny_baseline.out$" "$OUT/intr.log" \
  && ! grep -q Traceback "$OUT/intr.log" && ok "Ctrl-C during a run: one line naming it, exit 130" \
  || { bad "Ctrl-C during a run: exit $rc:"; tail -5 "$OUT/intr.log"; }
# SIGTERM (a `timeout`, a scheduler) during a run: the trainer is ended too, not left training on its own (it was);
# a rerun into an --out with an earlier table removes that table first (a stopped rerun left it beside the new logs)
mkdir -p "$OUT/term" && echo "# an earlier table" >"$OUT/term/table2.md"
python3 scripts/repro/table2.py --quick --models llama-tiny --steps 100000 --out "$OUT/term" >"$OUT/term.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$OUT/term/llama-tiny_baseline.out" ] && break; sleep 0.2; done
sleep 0.5; kill -TERM $pid; wait $pid; rc=$?
sleep 0.5
left=$(pgrep -f -- "--log $OUT/term/" || true)
[ "$rc" = 143 ] && grep -q "^interrupted (SIGTERM) during run 1/4 llama-tiny_baseline after" "$OUT/term.log" && [ -z "$left" ] \
  && ! grep -q Traceback "$OUT/term.log" && ok "SIGTERM during a run: the trainer ended too, one line, exit 143" \
  || { bad "SIGTERM during a run: exit $rc, trainer left: '$left':"; tail -3 "$OUT/term.log"; }
[ ! -e "$OUT/term/table2.md" ] && grep -q "^removed $OUT/term/table2.md of an earlier invocation" "$OUT/term.log" \
  && ok "the earlier table removed before the rerun's runs" || bad "an earlier table left beside a stopped rerun's logs"
[ -n "$left" ] && kill $left 2>/dev/null
# a flag in --extra that stops the trainers from training (exit 0, no step): failed runs, not a table of the initial
# weights' perplexity with exit 0
# weights' perplexity with exit 0: refused before any run now (the trainers refuse --eval-only beside --ckpt-dir)
refused "table9.py --extra='--eval-only'" "--extra --eval-only: the runs would train nothing" \
  python3 scripts/repro/table9.py --quick --extra='--eval-only' --out "$OUT/eo"
[ ! -e "$OUT/eo" ] && ok "--extra='--eval-only': nothing written" || bad "--extra='--eval-only' wrote $OUT/eo"
# a model named twice: refused (its second runs replaced the first's logs and read as another seed or column)
for s in table9 ablation_modes memory; do
  out=$(python3 "scripts/repro/$s.py" --quick --dry-run --models llama-tiny,llama-tiny 2>&1); rc=$?
  [ "$rc" != 0 ] && grep -q "a model is named twice" <<<"$out" && ok "$s.py: a model named twice refused" \
    || bad "$s.py --models llama-tiny,llama-tiny: exit $rc"
done
# --paper's inputs, said before any run: a GPT-2-only table needs OpenWebText's patterns, not C4's (it asked for
# C4's); a LLaMA run without C4's is refused; table5 without its model or task directories (a table of failures)
out=$(python3 scripts/repro/table9.py --paper --models llama-130m --out "$OUT/nodata" 2>&1); rc=$?
[ $rc != 0 ] && grep -q "run llama-130m_muon_none needs --train-data and --val-data" <<<"$out" && [ ! -e "$OUT/nodata" ] \
  && ok "--paper without C4's patterns refused before any run" || bad "--paper without data: exit $rc: $out"
# (its patterns match nothing: refused before any run for that, not for C4's; real ones pass the dry run)
out=$(python3 scripts/repro/table2.py --paper --models gpt2-124m --gpt2-train-data "$OUT/none/a_*.bin" \
      --gpt2-val-data "$OUT/none/b_*.bin" --run-timeout 60 --out "$OUT/gpt2only" 2>&1); rc=$?
out2=$(python3 scripts/repro/table2.py --paper --dry-run --models gpt2-124m --gpt2-train-data "$OUT/owt/train_*.bin" \
      --gpt2-val-data "$OUT/owt/val_*.bin" 2>&1); rc2=$?
[ $rc != 0 ] && ! grep -q "needs --train-data" <<<"$out" && grep -q "none/a_\*.bin (run gpt2-124m_baseline): no file matches it" <<<"$out" \
  && [ ! -e "$OUT/gpt2only/gpt2-124m_baseline.out" ] && [ $rc2 = 0 ] \
  && ok "a GPT-2-only --paper table takes OpenWebText's patterns alone (a pattern matching nothing refused before any run)" \
  || bad "GPT-2-only --paper: exit $rc / $rc2: $(tail -2 <<<"$out") $(tail -2 <<<"$out2")"
out=$(python3 scripts/repro/table5.py --paper --model-dir "$OUT/none" --glue-dir "$OUT/none" --out "$OUT/t5none" 2>&1); rc=$?
[ $rc != 0 ] && grep -q -- "--model-dir .*none: no config.json" <<<"$out" && [ ! -e "$OUT/t5none/full_ft_cola.out" ] \
  && ok "table5 --paper without its model refused before any run" || bad "table5 --paper, no model: exit $rc: $out"
# --extra replacing a flag every run shares: the table's description names the value the runs had
(cd "$OUT" && python3 "$ROOT/scripts/repro/table4.py" --quick --steps 3 --extra='--seq-len 64' --out seq) >"$OUT/seq.log" 2>&1
grep -q "Sequence length 64" "$OUT/seq/table4.md" 2>/dev/null && ! grep -q "Sequence length 32" "$OUT/seq/table4.md" \
  && ok "table4 --extra='--seq-len 64': the markdown says 64" || { bad "table4's sequence length:"; grep -i sequence "$OUT/seq/table4.md"; }
# Ctrl-C during table9's first run: the trainer checkpoints (the script waits for it; subprocess.run killed it within
# 0.25 s), and the loop's run of the same command below resumes it (it trained every run again from scratch)
(cd "$OUT" && exec python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
  python3 "$ROOT/scripts/repro/table9.py" --quick --out table9 --run-timeout 600) >"$OUT/table9_intr.log" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -qs '"type":"step"' "$OUT"/table9/*.jsonl && break; sleep 0.05; done
kill -INT $pid; wait $pid; rc=$?
intr=$(sed -n 's/^interrupted (Ctrl-C) during run [0-9]*\/4 \([^ ]*\) after .*/\1/p' "$OUT/table9_intr.log")
[ "$rc" = 130 ] && [ -n "$intr" ] && ls -d "$OUT/table9/ckpt/$intr"/step_* >/dev/null 2>&1 \
  && grep -q "^rerun the same command to continue: finished runs are kept, and $intr resumes from its checkpoint at step [0-9]" "$OUT/table9_intr.log" \
  && ok "Ctrl-C during table9's run $intr: its checkpoint written, how to continue said (exit 130)" \
  || { bad "Ctrl-C during table9: exit $rc, run '$intr':"; tail -3 "$OUT/table9_intr.log"; }
for s in table2 table4 table9 ablation_modes ablation_k table5 memory; do
  t0=$SECONDS
  # from another directory, with a relative --out
  more=(); [ $s = memory ] && more=(--models llama-tiny)  # (its 3 runs of one model: the pipeline, in less time)
  if (cd "$OUT" && python3 "$ROOT/scripts/repro/$s.py" --quick --out "$s" --run-timeout 600 "${more[@]}") > "$OUT/$s.log" 2>&1; then
    ok "$s.py --quick exited 0 ($((SECONDS - t0)) s)"
  else
    bad "$s.py --quick exited non-zero ($((SECONDS - t0)) s); its output:"; tail -20 "$OUT/$s.log"
  fi
  md="$OUT/$s/$s.md"
  if [ -s "$md" ]; then
    ok "$s.md written"
    IFS='|' read -ra want <<< "${LABELS[$s]}"
    for l in "${want[@]}"; do
      grep -q "^| $l |" "$md" && ok "$s.md has row '$l'" || bad "$s.md lacks row '$l'"
    done
    grep -q "checks the pipeline, not the paper's claims" "$md" && ok "$s.md has the --quick caveat" \
      || bad "$s.md lacks the --quick caveat"
    grep -q '^Machine: CPU' "$md" && ok "$s.md names the machine" || bad "$s.md lacks the machine line"
    grep -q 'train_llama\|train_gpt2\|finetune_roberta' "$md" && ok "$s.md lists its commands" || bad "$s.md lists no commands"
    if grep -q "| failed" "$md"; then
      bad "$s.md reports a failed run"
    fi
    # the legend describes only columns the table has
    for col in "PPL" "MEM planned" "MEM measured" "Δ"; do
      if grep -q "$col = " "$md" && ! grep -q "^|.*$col" "$md"; then
        bad "$s.md describes a '$col' column its table does not have"
      fi
    done
  else
    bad "$s.md missing"
  fi
  if [ $HAVE_MPL = 1 ]; then
    [ -s "$OUT/$s/$s.png" ] && ok "$s.png written" || bad "$s.png missing"
  fi
done
# memory.py with one seed: no spread ("-"), not nan (which reads as a diverged run)
grep -Eq '^\| llama-tiny \| [^|]+ \| [0-9.]+ \| - \| 1/1 \|' "$OUT/memory/memory.md" 2>/dev/null && ! grep -q '| nan |' "$OUT/memory/memory.md" \
  && ok "memory.md: one seed's spread is '-'" || { bad "memory.md's spread with one seed:"; grep '^| llama-tiny' "$OUT/memory/memory.md"; }
# table5: the synthetic MRPC-layout task is learnable: full fine-tuning's best dev F1 is at least 90 (all-positive guessing gives 67)
grep -Eq '^\| Full FT \| [0-9.]+ \| [0-9.]+ \| (9[0-9]|100)\.[0-9]+ \|' "$OUT/table5/table5.md" 2>/dev/null \
  && ok "table5.md: Full FT learns the synthetic MRPC" || bad "table5.md: Full FT's MRPC score is missing or at chance"
# RSO trains like the others: its row carries a perplexity (a number), not a placeholder
grep -Eq '^\| RSO \| [0-9]+\.[0-9]+' "$OUT/table2/table2.md" 2>/dev/null && ok "table2.md has RSO's perplexity" \
  || bad "table2.md has no RSO perplexity"
# table9 resumed the interrupted run (its log: each of the 20 steps once after dedup, the final evaluation)
[ -n "$intr" ] && grep -q "^\[[0-9]/4\] .* --log $OUT/table9/$intr.jsonl .*--resume  # resumed from its checkpoint at step" "$OUT/table9.log" \
  && grep -q "^- resumed from their checkpoints: $intr" "$OUT/table9/table9.md" \
  && [ "$(python3 -c 'import sys; sys.path.insert(0, "scripts/repro"); import common as C; print(C.summarize(sys.argv[1])["steps"])' "$OUT/table9/$intr.jsonl")" = 20 ] \
  && ok "table9 rerun: $intr resumed from its checkpoint to step 20" || { bad "table9 rerun did not resume '$intr':"; grep '^\[' "$OUT/table9.log"; }
# a rerun keeps finished runs (no training, one line each) and rebuilds the table; a --models subset into the same
# --out tabulates its models and names the others' runs (it removed the full table "as its runs were replaced");
# the full command then rebuilds the full table from the logs, training nothing
(cd "$OUT" && python3 "$ROOT/scripts/repro/table2.py" --quick --models llama-tiny --out table2) >"$OUT/sub.log" 2>&1; rc=$?
[ "$rc" = 0 ] && [ "$(grep -c '^\[[0-9]/4\] llama-tiny_[a-z]*: kept, finished in an earlier invocation' "$OUT/sub.log")" = 4 ] \
  && ! grep -q -- "--overwrite\|--resume\|^removed" "$OUT/sub.log" \
  && grep -q "also holds 4 run(s) not in this table (gpt2-tiny_baseline, gpt2-tiny_galore, gpt2-tiny_prac, gpt2-tiny_rso)" "$OUT/table2/table2.md" \
  && ok "table2 --models llama-tiny rerun: 4 runs kept, none trained; the markdown names the other model's runs" \
  || { bad "table2 subset rerun: exit $rc:"; tail -5 "$OUT/sub.log"; }
(cd "$OUT" && python3 "$ROOT/scripts/repro/table2.py" --quick --out table2) >"$OUT/full.log" 2>&1; rc=$?
[ "$rc" = 0 ] && [ "$(grep -c ': kept, finished in an earlier invocation' "$OUT/full.log")" = 8 ] \
  && grep -q '^| Method | llama-tiny PPL .* gpt2-tiny PPL' "$OUT/table2/table2.md" \
  && ok "table2 full rerun: the full table rebuilt from the 8 finished logs, nothing trained" \
  || { bad "table2 full rerun: exit $rc:"; tail -5 "$OUT/full.log"; }
# a kept run's damaged log (a value of the wrong type; a line cut in the middle of the log) stops the rerun with one
# line naming the file and line, before a table of it is written: no traceback, no table of a skipped record
log=$(ls "$OUT"/table2/llama-tiny_prac.jsonl); cp "$log" "$OUT/prac.jsonl.good"
sed -i '$ s/"val_loss":[0-9.e+-]*/"val_loss":"x"/' "$log"
out=$(cd "$OUT" && python3 "$ROOT/scripts/repro/table2.py" --quick --out table2 2>&1); rc=$?
[ "$rc" != 0 ] && grep -q "llama-tiny_prac.jsonl:[0-9]*: \"val_loss\" is \"x\", not a number" <<<"$out" && ! grep -q Traceback <<<"$out" \
  && ok "a kept log with a string val_loss: refused with the file and line, no traceback" \
  || { bad "a kept log with a string val_loss: exit $rc:"; tail -3 <<<"$out"; }
{ head -3 "$OUT/prac.jsonl.good"; echo '{"type":"step","step":5,"loss":'; tail -n +4 "$OUT/prac.jsonl.good"; } >"$log"
out=$(cd "$OUT" && python3 "$ROOT/scripts/repro/table2.py" --quick --out table2 2>&1); rc=$?
[ "$rc" != 0 ] && grep -q "llama-tiny_prac.jsonl:4: not a JSON object" <<<"$out" \
  && ok "a kept log with a line cut mid-file: refused with the file and line (plot_runs.py's rule)" \
  || { bad "a kept log with a line cut mid-file: exit $rc:"; tail -3 <<<"$out"; }
cp "$OUT/prac.jsonl.good" "$log"
# without a PNG (no log has a record to plot), an earlier invocation's is removed: the markdown says there is none
got=$(python3 - "$OUT/stale" <<'PY' 2>/dev/null
import os, sys, types
sys.path.insert(0, "scripts/repro"); import common as C
out = sys.argv[1]; os.makedirs(out)
open(os.path.join(out, "t.png"), "wb").write(b"old")
args = types.SimpleNamespace(out=out)
run = types.SimpleNamespace(name="r", plot_label="r", rc=0)
png, note = C.plot([run], args, "t", "title")
print(png, note, os.path.exists(os.path.join(out, "t.png")))
PY
)  # (stderr: the line naming the run left out)
[ "$got" = "None no log has a step or evaluation record to plot False" ] && ok "no PNG: an earlier invocation's removed" \
  || bad "stale PNG: $got"
# another command's runs in --out are refused before any run (they would be mixed into the table); --restart
# starts every run over
refused "table9.py --steps 3 into an --out of 20-step runs" "holds logs or checkpoints of runs made by another command" \
  python3 scripts/repro/table9.py --quick --dry-run --steps 3 --out "$OUT/table9"
out=$(python3 scripts/repro/table9.py --quick --dry-run --steps 3 --restart --out "$OUT/table9" 2>&1); rc=$?
[ "$rc" = 0 ] && [ "$(grep -c -- '--steps 3 .* --overwrite$' <<<"$out")" = 4 ] && ok "--restart: every run starts over (--overwrite)" \
  || { bad "--restart: exit $rc:"; tail -3 <<<"$out"; }
# the same --out through a symbolic link is the same runs (its .cmd files compared with the paths as written)
ln -s "$OUT/table2" "$OUT/table2-link"
out=$(python3 scripts/repro/table2.py --quick --dry-run --out "$OUT/table2-link" 2>&1); rc=$?
[ "$rc" = 0 ] && [ "$(grep -c ': kept, finished in an earlier invocation' <<<"$out")" = 8 ] \
  && ok "table2 through a link to its --out: the 8 runs kept" || { bad "table2 through a link: exit $rc:"; tail -3 <<<"$out"; }
# a run started over that stops before its first record (a refused flag) leaves no earlier finished log beside its
# command: a rerun of that command starts it, not "keeps" another command's numbers
python3 scripts/repro/table9.py --quick --restart --extra='--lr -1' --out "$OUT/table9" >"$OUT/t9bad.log" 2>&1
out=$(python3 scripts/repro/table9.py --quick --dry-run --extra='--lr -1' --out "$OUT/table9" 2>&1); rc=$?
# (the dry run's planner calls fail on --lr -1 too: its exit is 1)
! grep -q 'kept, finished' <<<"$out" && [ "$(grep -c -- '--overwrite$' <<<"$out")" = 4 ] \
  && ok "a restart refused at set-up leaves nothing a rerun keeps" || { bad "restart refused at set-up: exit $rc:"; grep '^\[' <<<"$out"; }
# honest labels: the CPU backend's "measured" peak is its plan; --quick has no OOM note; table4's one aggregation, one device
grep -q "equals the CPU fp32 plan by construction" "$OUT/table2/table2.md" && ! grep -q "^- OOM:" "$OUT/table2/table2.md" \
  && ok "table2.md: MEM measured on the CPU backend said to be the plan; no OOM note in --quick" \
  || bad "table2.md: no CPU MEM caveat, or an OOM note in --quick"
grep -q '^| Method | Batch Size | .* | tokens/s | ms/step | Δ tokens/s | projected time on one device' "$OUT/table4/table4.md" \
  && grep -q "Those hours are of 4 GPUs" "$OUT/table4/table4.md" && ok "table4.md: one tokens/s aggregation, the projection for one device" \
  || bad "table4.md's header or device note: $(grep '^| Method' "$OUT/table4/table4.md")"
echo "total $((SECONDS - t_all)) s"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
