#!/usr/bin/env bash
# tools/bench_refresh on the CPU at toy sizes (its numbers mean nothing here): a synthetic width prints its row with
# the fallback column; --npy times two dumps of a real site (gpt2-mini fch_gelu, layer 0, steps 0 and 1 of a
# 2-step baseline run); a malformed --npy or dumps of different widths exit 1 with what went wrong; --help lists
# the flags.
# Usage: test_bench_refresh.sh [BENCH_REFRESH] (default build/tools/bench_refresh)
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build/tools/bench_refresh}
fail=0
ok() { echo "  [ok] $*"; }
bad() { echo "  [FAIL] $*"; fail=1; }
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

out=$("$B" --widths 96 --N 256 --model none 2>&1); rc=$?
row='^ +96 +256 +[0-9]+ .* [0-9]+\([0-9]+\)/[0-9]+ +[0-9.]+$'  # ... orth S(p)/H, HH s
[ "$rc" = 0 ] && grep -Eq "$row" <<<"$out" && ok "a synthetic width: its row" || bad "synthetic row (rc=$rc): $out"

for s in 0 1; do
  timeout -k 10 300 ./train_gpt2 --model gpt2-mini --device cpu --prac none --batch-size 1 --steps 2 \
    --dump-site fch_gelu --dump-layer 0 --dump-step $s --dump-path "$W/d$s.npy" >"$W/train$s.log" 2>&1 </dev/null \
    || bad "the dump at step $s: $(tail -3 "$W/train$s.log")"
done
out=$("$B" --npy "$W/d0.npy,$W/d1.npy" 2>&1); rc=$?
row='^ +512 +256 +[0-9]+ .*\(--npy: a dumped site\)$'
[ "$rc" = 0 ] && grep -Eq "$row" <<<"$out" && ok "--npy: the dumped site's row" || bad "--npy row (rc=$rc): $out"

out=$("$B" --npy "$W/d0.npy" 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q -- "--npy needs PREV.npy,CUR.npy" <<<"$out" && ok "--npy with one file: exit 1, says so" \
  || bad "--npy one file (rc=$rc): $out"
timeout -k 10 300 ./train_gpt2 --model gpt2-mini --device cpu --prac none --batch-size 1 --steps 1 \
  --dump-site ln1 --dump-layer 0 --dump-step 0 --dump-path "$W/ln1.npy" >"$W/train_ln1.log" 2>&1 </dev/null \
  || bad "the ln1 dump: $(tail -3 "$W/train_ln1.log")"
out=$("$B" --npy "$W/ln1.npy,$W/d1.npy" 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q "must be (N, n) activations of one site" <<<"$out" \
  && ok "--npy of two widths: exit 1, says so" || bad "--npy two widths (rc=$rc): $out"
out=$("$B" --help 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q -- "--exact-max-n N" <<<"$out" && ok "--help: exit 0, lists the flags" \
  || bad "--help (rc=$rc): $out"
out=$("$B" --widht 96 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q -- "unknown argument --widht" <<<"$out" && ok "an unknown flag: exit 1, says so" \
  || bad "unknown flag (rc=$rc): $out"
exit $fail
