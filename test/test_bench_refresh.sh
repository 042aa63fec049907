#!/usr/bin/env bash
# tools/bench_refresh on the CPU at toy sizes (its numbers mean nothing here): a synthetic width prints its row with
# the fallback column; --npy times two dumps of a real site (gpt2-mini fch_gelu, layer 0, steps 0 and 1 of a
# 2-step baseline run); a malformed --npy or dumps of different widths exit 1 with what went wrong; --help lists
# the flags. The model part (llama-tiny) keeps N >= its widest site under a tiny --max-elems (never N = 0 and nan)
# and honours --exact-max-n; a bad --model is refused before any timing; --N, --max-elems, --widths and --model are
# refused with --npy; a malformed number exits 1 naming the flag and the value (never stoi's "stoi", a suffix
# dropped or a -1 wrapped); --npy refuses --bf16 with float dumps and dumps too narrow for its ranks, and a row whose
# exact path --exact-max-n skips keeps its note. Every refusal case also gives tiny sizes, so a build that accepts it
# still ends fast.
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
out=$("$B" --npy "$W/d0.npy,$W/d1.npy,$W/d1.npy" 2>&1); rc=$?  # it read "d1.npy,d1.npy" as one file's name
[ "$rc" = 1 ] && grep -q -- "--npy needs PREV.npy,CUR.npy: two files" <<<"$out" \
  && ok "--npy with three files: exit 1, says so" || bad "--npy three files (rc=$rc): $out"
# --bf16: dumps of bfloat16 bits ('<u2'), as read_npy's hint for such a file says (bench_refresh lacked the flag)
# (numpy comes with transformers and matplotlib, which scripts/install_deps.sh installs: without it these fail)
py_err=$(python3 -c "
import numpy as np
for s in (0, 1):
    x = np.load('$W/d%d.npy' % s).astype(np.float32)
    np.save('$W/b%d.npy' % s, (x.view(np.uint32) >> 16).astype(np.uint16))
    np.save('$W/narrow%d.npy' % s, x[:, :8])
np.save('$W/zeros.npy', np.zeros((64, 32), np.float32))" 2>&1) || bad "writing the test's .npy files with numpy: $py_err"
out=$("$B" --npy "$W/b0.npy,$W/b1.npy" 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q -- "--bf16" <<<"$out" && ok "--npy of bf16 bits without --bf16: exit 1, names --bf16" \
  || bad "--npy bf16 without --bf16 (rc=$rc): $out"
out=$("$B" --npy "$W/b0.npy,$W/b1.npy" --bf16 2>&1); rc=$?
[ "$rc" = 0 ] && grep -Eq "$row" <<<"$out" && ok "--npy --bf16: the dumped site's row" || bad "--npy --bf16 (rc=$rc): $out"
# --bf16 with float dumps: refused (it was ignored), as prac_analyze refuses it
out=$("$B" --npy "$W/d0.npy,$W/d1.npy" --bf16 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q "has dtype '<f4', not the '<u2' bfloat16 bit patterns --bf16 says" <<<"$out" \
  && ok "--npy of float dumps with --bf16: exit 1, says so" || bad "--npy float with --bf16 (rc=$rc): $out"
# dumps too narrow for the bench's ranks: refused with bench_refresh's own words (the hint named trainer flags)
out=$("$B" --npy "$W/narrow0.npy,$W/narrow1.npy" 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q "the dumps are 8 wide, too narrow for the bench's ranks" <<<"$out" \
  && ! grep -q -- "--prac-linear-ranks" <<<"$out" && ok "--npy of 8-wide dumps: exit 1, says so" \
  || bad "--npy narrow (rc=$rc): $out"
# a row whose exact path is skipped keeps its note
out=$("$B" --npy "$W/d0.npy,$W/d1.npy" --exact-max-n 100 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q "(exact above --exact-max-n)  (--npy: a dumped site)" <<<"$out" \
  && ok "--npy with --exact-max-n: the row says both" || bad "--npy --exact-max-n (rc=$rc): $out"
timeout -k 10 300 ./train_gpt2 --model gpt2-mini --device cpu --prac none --batch-size 1 --steps 1 \
  --dump-site ln1 --dump-layer 0 --dump-step 0 --dump-path "$W/ln1.npy" >"$W/train_ln1.log" 2>&1 </dev/null \
  || bad "the ln1 dump: $(tail -3 "$W/train_ln1.log")"
out=$("$B" --npy "$W/ln1.npy,$W/d1.npy" 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q "must be (N, n) activations of one site" <<<"$out" \
  && ok "--npy of two widths: exit 1, says so" || bad "--npy two widths (rc=$rc): $out"
# dumps of zeros: refused as prac_analyze refuses them (they were timed, exit 0)
out=$("$B" --npy "$W/zeros.npy,$W/zeros.npy" 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q -- "--npy: $W/zeros.npy is all zeros" <<<"$out" && ok "--npy of zeros: exit 1, says so" \
  || bad "--npy of zeros (rc=$rc): $out"
out=$("$B" --help 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q -- "--exact-max-n N" <<<"$out" && ok "--help: exit 0, lists the flags" \
  || bad "--help (rc=$rc): $out"
out=$("$B" --widht 96 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q -- "unknown argument --widht" <<<"$out" && ok "an unknown flag: exit 1, says so" \
  || bad "unknown flag (rc=$rc): $out"

tiny=(--widths 96 --N 256 --model none)  # first on every refusal's line: a build that accepts the bad flag ends fast
# the model part under a tiny --max-elems: N scaled down, but never below llama-tiny's widest site (176 -> 192)
out=$(timeout -k 10 120 "$B" --widths 96 --N 256 --max-elems 10000 --model llama-tiny 2>&1); rc=$?
[ "$rc" = 0 ] && grep -Eq '^ +96 +128 .*above --max-elems' <<<"$out" \
  && grep -q "llama-tiny (L = 2, site widths 64 and 176, N = 192, scaled down, above --max-elems" <<<"$out" \
  && ! grep -qi nan <<<"$out" && ok "a tiny --max-elems: N >= the widest site, no nan" \
  || bad "tiny --max-elems (rc=$rc): $out"
# --exact-max-n reaches the model's sites: 176 > 100 skips the exact path there, and says so
out=$(timeout -k 10 120 "$B" --widths 96 --N 256 --exact-max-n 100 --model llama-tiny 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q "exact skipped (site width 176 above --exact-max-n 100)" <<<"$out" \
  && grep -q "amortized at T1 = T2 = 500: exact skipped" <<<"$out" && ! grep -qi nan <<<"$out" \
  && ok "--exact-max-n: the model's wider site skips the exact path, says so" || bad "model --exact-max-n (rc=$rc): $out"
# a bad --model: refused before any width is timed, with the names
for m in bogus gpt2-tiny; do
  out=$(timeout -k 10 120 "$B" "${tiny[@]}" --model $m 2>&1); rc=$?
  [ "$rc" = 1 ] && grep -q -- "--model: unknown model '$m'" <<<"$out" && grep -q "none, llama-" <<<"$out" \
    && grep -q "llama-tiny" <<<"$out" && ! grep -q "subspace s" <<<"$out" \
    && ok "--model $m: exit 1 before any timing, lists the names" || bad "--model $m (rc=$rc): $out"
done
# flags that do nothing with --npy (refused before the files are read: these do not exist)
for f in "--N 256" "--max-elems 100000" "--widths 96" "--model none"; do
  out=$(timeout -k 10 120 "$B" --npy "$W/no0.npy,$W/no1.npy" $f 2>&1); rc=$?
  [ "$rc" = 1 ] && grep -q -- "${f%% *} does nothing with --npy" <<<"$out" && ok "--npy with $f: exit 1, says so" \
    || bad "--npy with $f (rc=$rc): $out"
done
# malformed numbers: exit 1, the message names the flag and the value, never a bare "stoi"
refuse() {
  local flag=$1 value=$2 out rc
  out=$(timeout -k 10 120 "$B" "${tiny[@]}" "$flag" "$value" 2>&1); rc=$?
  if [ "$rc" = 1 ] && grep -q -- "^bench_refresh: $flag: " <<<"$out" && grep -qF -- "$value" <<<"$out" \
    && ! grep -Eq "stoi|stoull|terminate called|nan" <<<"$out"; then ok "$flag '$value': exit 1, names flag and value"
  else bad "$flag '$value' (rc=$rc): $out"; fi
}
refuse --N x
refuse --N 0
refuse --N -5
refuse --N 256x
refuse --N 99999999999
refuse --widths 96x
refuse --widths 96,
refuse --widths ,96
refuse --widths ""
refuse --widths 0
refuse --widths 16  # (too narrow for ranks of 8 + 8: the hint named the trainers' --prac-linear-ranks)
refuse --max-elems -1
refuse --max-elems 1e6
refuse --max-elems 0
refuse --exact-max-n x
refuse --exact-max-n -1
[ "$fail" = 0 ] && echo "bench_refresh: all checks passed" || echo "bench_refresh: some checks FAILED"
exit $fail
