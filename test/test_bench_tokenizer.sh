#!/usr/bin/env bash
# tools/bench_tokenizer's flags: a malformed --threads, --repeat or --doc-bytes ("", ",", "x", 0, -1, "4x") exits 1
# with a message naming the flag, never a crash (an uncaught exception's abort, an empty thread list read out of
# bounds) nor a value silently changed (0 -> 1, -1 wrapped); --help lists the flags; a tiny text with --no-tiktoken
# prints its row; where python3 imports tiktoken, a --ranks path with a space and a quote reaches tiktoken whole.
# Usage: test_bench_tokenizer.sh [BENCH_TOKENIZER] (default build/tools/bench_tokenizer)
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build/tools/bench_tokenizer}
fail=0
ok() { echo "  [ok] $*"; }
bad() { echo "  [FAIL] $*"; fail=1; }
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
printf 'It is a truth universally acknowledged, that a single man in possession of a good fortune.\n\nHello world.\n\n' \
  >"$W/t.txt"

# refuse FLAG VALUE: exit 1, the message names the flag, no abort/segfault text
refuse() {
  local flag=$1 value=$2 out rc
  out=$(timeout -k 5 60 "$B" --no-tiktoken "$flag" "$value" "$W/t.txt" 2>&1); rc=$?
  if [ "$rc" = 1 ] && grep -q -- "$flag" <<<"$out" && ! grep -Eqi "terminate called|core dumped|Aborted|Segmentation" \
    <<<"$out"; then ok "$flag '$value': exit 1, names the flag"
  else bad "$flag '$value' (rc=$rc): $out"; fi
}
refuse --threads ""
refuse --threads ,
refuse --threads 1,
refuse --threads x
refuse --threads 0
refuse --threads 2x
refuse --repeat x
refuse --repeat 0
refuse --repeat -1
refuse --doc-bytes x
refuse --doc-bytes -1
refuse --doc-bytes 4096x

out=$("$B" --repeat 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q -- "--repeat needs a value" <<<"$out" && ok "a flag without its value: exit 1, says so" \
  || bad "--repeat without a value (rc=$rc): $out"
# a directory and an empty file: refused (they timed nothing with exit 0, the ratio printed as -nan)
out=$("$B" --no-tiktoken --repeat 1 "$W" 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q -- "$W is a directory" <<<"$out" && ok "a directory: exit 1, says so" \
  || bad "a directory (rc=$rc): $out"
: >"$W/empty.txt"
out=$("$B" --no-tiktoken --repeat 1 "$W/empty.txt" 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q -- "the input holds no text" <<<"$out" && ok "an empty file: exit 1, says so" \
  || bad "an empty file (rc=$rc): $out"
out=$("$B" --threds 1 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q -- "unknown flag --threds" <<<"$out" && ok "an unknown flag: exit 1, says so" \
  || bad "unknown flag (rc=$rc): $out"
out=$("$B" --help 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q -- "--doc-bytes N" <<<"$out" && grep -q -- "--no-tiktoken" <<<"$out" \
  && ok "--help: exit 0, lists the flags" || bad "--help (rc=$rc): $out"

# a tiny run: one document, one thread, one repeat (a build without PCRE2 has no tokenizer: skipped)
out=$(timeout -k 5 60 "$B" --no-tiktoken --threads 1 --repeat 1 --doc-bytes 0 "$W/t.txt" 2>&1); rc=$?
if grep -q "without PCRE2" <<<"$out"; then
  echo "  [skip] a tiny run: this build has no PCRE2"
else
  [ "$rc" = 0 ] && grep -q "1 documents (--doc-bytes 0), threads 1," <<<"$out" && grep -Eq '^ +1 +[0-9.]+ ' <<<"$out" \
    && grep -q "tiktoken: skipped (--no-tiktoken)" <<<"$out" && ok "a tiny text with --no-tiktoken: its row" \
    || bad "tiny run (rc=$rc): $out"

  # the tiktoken command's paths are quoted: a --ranks path with a space and a ' is one argument
  if ${PYTHON:-python3} -c 'import tiktoken' >/dev/null 2>&1; then
    mkdir -p "$W/it's a dir" && cp data/gpt2/r50k_base.tiktoken "$W/it's a dir/r50k base.tiktoken"
    out=$(timeout -k 5 120 "$B" --ranks "$W/it's a dir/r50k base.tiktoken" --threads 1 --repeat 1 "$W/t.txt" 2>&1)
    rc=$?
    [ "$rc" = 0 ] && grep -Eq '^ +1 +[0-9.]+ .* yes$' <<<"$out" \
      && ok "--ranks with a space and a quote: tiktoken ran, same tokens" || bad "quoted --ranks (rc=$rc): $out"
  else
    echo "  [skip] the quoted --ranks path: ${PYTHON:-python3} cannot import tiktoken"
  fi
fi
[ "$fail" = 0 ] && echo "bench_tokenizer: all checks passed" || echo "bench_tokenizer: some checks FAILED"
exit $fail
