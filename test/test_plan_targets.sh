#!/usr/bin/env bash
# CTest plan.targets: issue 16's acceptance, planned with the DEFAULT flags (no storage or recompute flag given):
# LLaMA-1B at 128 x 256 with PRAC plans <= 45 GiB (<= 38 GiB with --optimizer-states 8bit), and at 130M PRAC plans
# <= 0.60x the baseline. Builds nothing: ./train_llama must exist at the repository root.
set -u
cd "$(dirname "$0")/.."
[ -x ./train_llama ] || { echo "FAIL: ./train_llama is not built"; exit 1; }
pass=0; fail=0
gib() {  # the planned total of ./train_llama --plan --json "$@", in GiB
  ./train_llama --plan --json --precision bf16 --batch-size 128 --seq-len 256 "$@" |
    python3 -c 'import json, sys; print("%.2f" % (json.load(sys.stdin)["total"] / 2**30))'
}
check() {  # label, python condition over the numbers
  if python3 -c "import sys; sys.exit(0 if $2 else 1)"; then echo "PASS: $1"; pass=$((pass + 1));
  else echo "FAIL: $1"; fail=$((fail + 1)); fi
}
big=$(gib --model llama-1b --prac prac) || exit 1
big8=$(gib --model llama-1b --prac prac --optimizer-states 8bit) || exit 1
base=$(gib --model llama-130m) || exit 1
prac=$(gib --model llama-130m --prac prac) || exit 1
check "llama-1b 128 x 256 --prac prac plans $big GiB <= 45" "$big <= 45"
check "llama-1b with --optimizer-states 8bit plans $big8 GiB <= 38" "$big8 <= 38"
check "llama-130m: PRAC $prac GiB / baseline $base GiB <= 0.60" "$prac / $base <= 0.60"
echo "$pass passed, $fail failed"
[ $fail = 0 ]
