#!/usr/bin/env bash
# CTest bench_vs_llmc.dry_run: scripts/bench_vs_llmc.sh without a GPU or llm.c. A fake train_gpt2cu stands in for
# llm.c's: it checks its arguments and reads the shards' headers as llm.c's loader does (magic 20240520, version 1,
# file size 1024 + 2 ntok), then prints llm.c-format lines with known times (step k: 100 + k ms; 4321 MiB). Ours
# runs for real on the CPU (gpt2-tiny, B=2, T=32). Checked: the RESULT line's llm.c numbers against the arithmetic
# done here, ours against the JSONL recomputed by python, the ratio, and refusals of bad input (non-zero exit and
# a message naming the problem). Needs ./train_gpt2 and ./prep_data at the repository root.
set -u
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/bench_vs_llmc.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
pass=0; fail=0
ok() { echo "PASS: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
for b in train_gpt2 prep_data; do
  [ -x "./$b" ] || { echo "FAIL: ./$b is not built"; echo "0 passed, 1 failed"; exit 1; }
done

# the fake llm.c (STEP_LINES: how many step lines it prints; default all)
cat > "$TMP/train_gpt2cu" <<'EOF'
#!/usr/bin/env bash
declare -A a
while [ $# -gt 0 ]; do a[$1]="$2"; shift 2; done
for k in -i -j -e -b -t -x -d; do [ -n "${a[$k]:-}" ] || { echo "fake llm.c: missing $k"; exit 1; }; done
[ "${a[-e]}" = d12 ] || { echo "fake llm.c: -e ${a[-e]}, want d12 (random init)"; exit 1; }
[ "${a[-d]}" = $(( ${a[-b]} * ${a[-t]} )) ] || { echo "fake llm.c: -d ${a[-d]} is not B*T"; exit 1; }
for pat in "${a[-i]}" "${a[-j]}"; do
  n=0
  for f in $pat; do
    [ -f "$f" ] || { echo "fake llm.c: no file matches $pat"; exit 1; }
    read -r magic version ntok < <(od -An -t d4 -N 12 "$f")
    [ "$magic" = 20240520 ] || { echo "fake llm.c: Bad magic in the data file $f"; exit 1; }
    [ "$version" = 1 ] || { echo "fake llm.c: Bad version in data file $f"; exit 1; }
    [ "$(stat -c %s "$f")" = $((1024 + 2 * ntok)) ] || { echo "fake llm.c: file size is not as expected: $f"; exit 1; }
    [ "$ntok" -gt $(( ${a[-b]} * ${a[-t]} )) ] || { echo "fake llm.c: $f has $ntok tokens, fewer than B*T+1"; exit 1; }
    n=$((n + 1))
  done
  echo "fake llm.c: $n shard(s) for $pat"
done
echo "device memory usage: 4321 MiB / 81559 MiB"
lines=${STEP_LINES:-${a[-x]}}
for ((s = 1; s <= lines; s++)); do
  printf "step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s\n" \
    "$s" "${a[-x]}" 10.9 0 1.5 0 0.0003 $((100 + s)) 40.0 99999
done
echo "total average iteration time: 0 ms"
EOF
chmod +x "$TMP/train_gpt2cu"

run() { bash scripts/bench_vs_llmc.sh --llmc-bin "$TMP/train_gpt2cu" --model gpt2-tiny --device cpu --batch 2 --seq 32 \
  --steps 4 --warmup 1 --max-docs 600 --out "$TMP/out" "$@"; }

# 1. a whole run
if run > "$TMP/run.log" 2>&1; then ok "the dry run exits 0"; else bad "the dry run failed:"; tail -30 "$TMP/run.log"; fi
grep -q "fake llm.c: 1 shard(s)" "$TMP/out/llmc.log" && ok "llm.c's header checks accept prep_data's shards" \
  || bad "the fake llm.c did not read the shards"
R=$(grep '^RESULT bench_vs_llmc' "$TMP/run.log" || true)
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$R"; }
[ -n "$R" ] && ok "RESULT line printed" || bad "no RESULT line"
# llm.c: steps 2..4 of 101..104 ms -> 103 ms; 2 * 32 tokens / 0.103 s = 621.36 tok/s
[ "$(field llmc_ms)" = "103.000" ] && ok "llm.c ms/step 103.000 (mean of steps 2-4)" || bad "llm.c ms/step '$(field llmc_ms)', want 103.000"
[ "$(field llmc_tok_s)" = "621" ] && ok "llm.c tok/s 621" || bad "llm.c tok/s '$(field llmc_tok_s)', want 621"
[ "$(field llmc_own_mib)" = "4321" ] && ok "llm.c's own memory line 4321 MiB" || bad "llm.c memory '$(field llmc_own_mib)'"
# ours: recomputed from the JSONL by python
want=$(python3 -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if "\"type\":\"step\"" in l]
ms = [r["ms_per_step"] for r in recs if r["step"] > 1]
m = sum(ms) / len(ms)
print("%d %.3f %.0f %.1f %.4f" % (len(ms), m, 2 * 32 * 1000 / m, max(r["mem_peak_bytes"] for r in recs) / 1048576,
                                 (2 * 32 * 1000 / m) / (2 * 32 * 1000 / 103.0)))' "$TMP/out/ours.jsonl" 2>&1)
read -r n ms tok mib ratio <<<"$want"
[ "$n" = 3 ] && ok "our JSONL has 3 timed steps" || bad "our JSONL: '$want'"
near() { awk -v a="$1" -v b="$2" -v tol="$3" 'BEGIN { d = a - b; exit !(a != "" && d <= tol && -d <= tol) }'; }
# (within the printed precision: both round the same mean, summed in another order)
near "$(field ours_ms)" "$ms" 0.0011 && ok "our ms/step $ms" || bad "our ms/step '$(field ours_ms)', want $ms"
near "$(field ours_tok_s)" "$tok" 1.01 && ok "our tok/s $tok" || bad "our tok/s '$(field ours_tok_s)', want $tok"
near "$(field ours_own_mib)" "$mib" 0.051 && ok "our peak $mib MiB" || bad "our peak '$(field ours_own_mib)', want $mib"
# the ratio: from the rounded ms of the line (4 digits), within 1e-3 of the exact one
awk -v a="$(field tok_s_ratio)" -v b="$ratio" 'BEGIN { exit !(a > 0 && (a - b) ^ 2 < 1e-6) }' \
  && ok "tok/s ratio $(field tok_s_ratio)" || bad "tok/s ratio '$(field tok_s_ratio)', want $ratio"
grep -q "^ours / llm.c" "$TMP/run.log" && ok "the ratio row is printed" || bad "no ratio row"

# 2. refusals
expect_fail() {  # WHAT GREP-PATTERN ARGS...
  local what=$1 pat=$2; shift 2
  if "$@" > "$TMP/bad.log" 2>&1; then bad "$what: exit 0"
  elif grep -q "$pat" "$TMP/bad.log"; then ok "$what: refused ($(grep -m1 "$pat" "$TMP/bad.log"))"
  else bad "$what: no message matching '$pat'"; cat "$TMP/bad.log"; fi
}
expect_fail "no llm.c" "no llm.c: pass --llmc DIR (a copy of llm.c: git clone https://github.com/karpathy/llm.c" bash scripts/bench_vs_llmc.sh --out "$TMP/o2"
expect_fail "--llmc without train_gpt2.cu" "has no train_gpt2.cu" bash scripts/bench_vs_llmc.sh --llmc "$TMP" --out "$TMP/o2"
expect_fail "no timed step" "must exceed --warmup" run --steps 2 --warmup 2
expect_fail "bad --batch" "whole number" run --batch 2x
# bash's arithmetic reads 010 as octal 8 (llm.c was given -d 256 for B x T = 10 x 32 and the run exited 0)
expect_fail "--batch with a leading zero" "without leading zeros (got '010')" run --batch 010
expect_fail "--seq past 9 digits" "below 10^9" run --seq 99999999999999999999
expect_fail "a flag without its value" "bench_vs_llmc: --steps needs a value" run --steps
# relative paths are the caller's: a fake llm.c named from another directory is found (it was looked up from the
# repository root: "is not an executable"), and a relative --out is made there, not in the repository
mkdir -p "$TMP/elsewhere/bin" && cp "$TMP/train_gpt2cu" "$TMP/elsewhere/bin/"
if (cd "$TMP/elsewhere" && bash "$OLDPWD/scripts/bench_vs_llmc.sh" --llmc-bin bin/train_gpt2cu --model gpt2-tiny \
      --device cpu --batch 2 --seq 32 --steps 2 --warmup 1 --max-docs 600 --out rel_out) > "$TMP/rel.log" 2>&1 \
   && [ -f "$TMP/elsewhere/rel_out/llmc.log" ]; then
  ok "relative --llmc-bin and --out are read from the caller's directory"
else
  bad "relative paths:"; tail -5 "$TMP/rel.log"
fi
STEP_LINES=3 expect_fail "llm.c printed fewer step lines" "expected 3" run

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
