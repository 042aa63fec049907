#!/usr/bin/env bash
# scripts/gpu_sanitize.sh -- NVIDIA's compute-sanitizer over short CUDA training runs, on the GPU machine
# (scripts/gpu_followup.sh's job `sanitize`; docs/GPU.md).
#
# The CPU execution layer (kernels/cuda_emu) already runs every kernel under AddressSanitizer and a shared-memory
# race check; what it cannot show is what the hardware does: the real tensor-core and PTX paths, warp-level
# hazards inside a kernel, barriers reached by part of a block, and what cuBLAS/cuDNN/cuSOLVER read of our buffers.
# One tiny training run covers nearly every kernel of a step (forward, backward, attention, PRAC compress,
# reconstruct and refresh on the second stream, the optimizer), so the runs below are whole trainer runs at
# B = 2, T = 32 (llama-tiny's and gpt2-tiny's layouts with 512 ids: test/fixtures/v512), each under one tool:
#
#   memcheck   llama (cuDNN attention when it is built, PRAC with overlapped refreshes, grad-accum 2, AdamW),
#              gpt2 (PRAC, Muon), llama with PRAC_ATTENTION=mma, llama with galore
#   racecheck  llama with PRAC_ATTENTION=mma, then simt (the shared-memory attention kernels), llama default
#   synccheck  llama default
#   initcheck  llama default (reads of device memory never written; library internals may be named here too:
#              read the log before calling it ours)
#
# Each run gets at most RUN_CAP seconds (default 60) and what is left of BUDGET (default: $LIMIT from
# gpu_followup.sh, else 150). It prints one line per run:
#   RESULT gpu_sanitize tool=T run=NAME status=clean|errors|failed|timeout errors=N secs=S
# Exit status: 0 every run clean; 1 a run with sanitizer errors or a failed run; 3 no errors seen but a run timed
# out or was not reached (incomplete: say so, do not call it clean); 77 no usable compute-sanitizer (not installed,
# or the device is not supported, as on gVisor machines) -- a skip.
# Environment: COMPUTE_SANITIZER (the binary; default from PATH or /usr/local/cuda/bin), BUDGET, RUN_CAP, LOGS
# (each run's full output, default /tmp/gpu_sanitize), TRAINER_DIR (where train_llama and train_gpt2 are; default
# the repository root).
set -uo pipefail
case "${1:-}" in
  -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "gpu_sanitize: takes no arguments (the environment above sets it up; --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.." || exit 1

SAN=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || true)}
[ -z "$SAN" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && SAN=/usr/local/cuda/bin/compute-sanitizer
if [ -z "$SAN" ] || [ ! -x "$SAN" ]; then
  echo "gpu_sanitize: SKIP: no compute-sanitizer (not on PATH, not in /usr/local/cuda/bin; set COMPUTE_SANITIZER)"
  exit 77
fi
BUDGET=${BUDGET:-${LIMIT:-150}}
RUN_CAP=${RUN_CAP:-60}
LOGS=${LOGS:-/tmp/gpu_sanitize}
TRAINER_DIR=${TRAINER_DIR:-.}
mkdir -p "$LOGS"
T0=$(date +%s)

common="--device cuda --batch-size 2 --seq-len 32 --eval-tokens 64 --lr 1e-3 --log-interval 1"
# the tiny layouts with 512 ids and the fixture's shards (test/fixtures/v512/make.py): the named tiny models'
# vocabularies made the classifier and the AdamW update over the embeddings most of a run's time
v512=test/fixtures/v512
common="$common --train-data $v512/train.bin --val-data $v512/val.bin"
llama="$TRAINER_DIR/train_llama --model $v512/llama-tiny.json $common"
gpt2="$TRAINER_DIR/train_gpt2 --model $v512/gpt2-tiny.json $common"
prac="--prac prac --prac-t1 2 --prac-t2 1 --prac-initial-spread 0"
# RUNS: TOOL|NAME|ENV ASSIGNMENTS (may be empty)|COMMAND, in the order they run (the most coverage first)
RUNS=(
  "memcheck|llama_prac_overlap||$llama --steps 4 --grad-accum 2 $prac --prac-refresh-overlap 1"
  "memcheck|gpt2_prac_muon||$gpt2 --steps 3 $prac --optimizer muon"
  "racecheck|llama_mma|PRAC_ATTENTION=mma|$llama --steps 2 $prac"
  "synccheck|llama||$llama --steps 2 $prac"
  "memcheck|llama_mma|PRAC_ATTENTION=mma|$llama --steps 2 $prac"
  "racecheck|llama_simt|PRAC_ATTENTION=simt|$llama --steps 2"
  "memcheck|llama_galore||$llama --steps 3 --optimizer galore --galore-gap 2"
  "racecheck|llama||$llama --steps 2 $prac"
  "initcheck|llama||$llama --steps 2 $prac"
)

echo "gpu_sanitize: $("$SAN" --version 2>/dev/null | grep -iE 'version' | head -1)"
errors_total=0; failed=0; incomplete=0
for row in "${RUNS[@]}"; do
  IFS='|' read -r tool name envs cmd <<<"$row"
  left=$(( BUDGET - ($(date +%s) - T0) - 10 ))  # (a run may outlive its cap by timeout's 5 s --kill-after)
  cap=$RUN_CAP; [ "$left" -lt "$cap" ] && cap=$left
  if [ "$cap" -lt 5 ]; then
    echo "RESULT gpu_sanitize tool=$tool run=$name status=timeout errors=0 secs=0 (not reached: no time left)"
    incomplete=1; continue
  fi
  log="$LOGS/${tool}_$name.log"
  t=$(date +%s)
  # shellcheck disable=SC2086 # envs and cmd are word lists
  timeout --kill-after=5 "$cap" env $envs "$SAN" --tool "$tool" --error-exitcode 86 --print-limit 20 $cmd >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - t ))
  # A device the sanitizer cannot attach to (gVisor: "Device not supported", then error 999) is a skip, not a defect
  if grep -qi "device not supported" "$log"; then
    echo "gpu_sanitize: SKIP: compute-sanitizer cannot use this GPU:"; grep -i -m 3 "not supported\|error" "$log"
    exit 77
  fi
  # the tool's last line: "========= ERROR SUMMARY: N errors"; racecheck's "RACECHECK SUMMARY: N hazards displayed"
  n=$(grep -oE 'ERROR SUMMARY: [0-9]+' "$log" | grep -oE '[0-9]+$' | tail -n 1)
  [ -z "$n" ] && n=$(grep -oE 'RACECHECK SUMMARY: [0-9]+' "$log" | grep -oE '[0-9]+$' | tail -n 1)
  n=${n:-0}
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then  # no summary line: count the reports printed before the kill
    st=timeout; incomplete=1
    n=$(grep -cE '^========= (Invalid|Program hit|Error:|Uninitialized|Barrier error|Malloc|Leaked)' "$log")
    [ "$n" -gt 0 ] && { st=errors; failed=1; }
  elif [ "$n" -gt 0 ] || [ "$rc" = 86 ]; then st=errors; failed=1
  elif [ "$rc" != 0 ]; then st=failed; failed=1
  else st=clean
  fi
  errors_total=$(( errors_total + n ))
  echo "RESULT gpu_sanitize tool=$tool run=$name status=$st errors=$n secs=$secs"
  [ "$st" = errors ] || [ "$st" = failed ] && { grep -m 12 -E '^=========' "$log" | sed 's/^/    /'; tail -n 3 "$log" | sed 's/^/    /'; }
done

echo "gpu_sanitize: ${#RUNS[@]} runs, $errors_total sanitizer errors; logs in $LOGS"
[ "$failed" = 1 ] && exit 1
[ "$incomplete" = 1 ] && { echo "gpu_sanitize: INCOMPLETE: a run timed out or was not reached (not a clean result)"; exit 3; }
exit 0
