#!/usr/bin/env bash
# The GPU benchmarks' flags (tools/bench_gpu*.cu) without a GPU: a bad value, an unknown --model (a config.json that
# is none, or of no architecture it runs) or a --json that
# cannot be written is refused with its reason and exit 2 before any GPU work (not read as 0 by atoi, not an
# uncaught exception's abort, not a JSON lost after an hour of runs). Usage: test_bench_gpu_args.sh TOOLS_DIR
set -uo pipefail
T=${1:?usage: test_bench_gpu_args.sh TOOLS_DIR}
fail=0
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT

# refused TOOL_AND_FLAGS... -- PATTERN: exit 2 and the message matches PATTERN
refused() {
  local args=() ; while [ "$1" != "--" ]; do args+=("$1"); shift; done; shift
  timeout 60 "$T/${args[0]}" "${args[@]:1}" >"$W/o" 2>&1; local rc=$?  # an accepted flag would run the benchmark
  if [ "$rc" = 2 ] && grep -q -- "$1" "$W/o"; then echo "  [ok] ${args[*]}: exit 2, $1"
  else echo "  [FAIL] ${args[*]}: rc=$rc, wanted exit 2 and '$1':"; cat "$W/o"; fail=1; fi
}

refused bench_gpu --steps 5x -- "--steps: '5x' is not a whole number"
refused bench_gpu --initial-spread abc -- "--initial-spread: 'abc' is not a whole number"
refused bench_gpu --refresh-overlap 9 -- "--refresh-overlap: 9 is out of range"
refused bench_gpu --grad-accum 0 -- "--grad-accum: 0 is out of range"
refused bench_gpu --tiny --json "$W/no/such/dir/r.json" -- "cannot write into $W/no/such/dir"
refused bench_gpu --tiny --json "$W" -- "--json $W: that is a directory"
refused bench_gpu --models nosuch -- 'unknown model "nosuch"'  # (it was the no-GPU skip, 77, on a machine without one)
# --models another named model or a FILE (a config.json's architecture from its model_type): GPT-2 or LLaMA only;
# --seq-len within its positions
refused bench_gpu --models roberta-base -- "--models roberta-base: a RoBERTa config; bench_gpu runs GPT-2 and LLaMA"
refused bench_gpu --models gpt2-mini --seq-len 257 -- "--seq-len 257: longer than gpt2-mini's 256 positions"
refused bench_gpu --models "$W/none.json" -- "cannot open model config $W/none.json"
echo '{"model_type": "bert", "vocab_size": 512}' >"$W/bert.json"
refused bench_gpu --models "$W/bert.json" -- "model_type is \"bert\", none of \"gpt2\", \"llama\", \"roberta\""
echo '{"model_type": "roberta"}' >"$W/roberta.json"
refused bench_gpu --models "$W/roberta.json" -- "a RoBERTa config; bench_gpu runs GPT-2 and LLaMA"
G=$(cd "$(dirname "$0")/.." && pwd)/test/fixtures/v512/gpt2-tiny.json
refused bench_gpu --models "$G" --seq-len 65 -- "--seq-len 65: longer than $G's 64 positions"
refused bench_gpu --tiny --batch-size 0 -- "--batch-size: 0 is out of range"
refused bench_gpu_refresh --widths 88,x -- "--widths: 'x' is not a whole number"
refused bench_gpu_refresh --N -5 -- "--N: -5 is out of range"
refused bench_gpu_stride --model nosuch -- 'unknown model "nosuch"'
refused bench_gpu_stride --iters 3.5 -- "--iters: '3.5' is not a whole number"
exit $fail
