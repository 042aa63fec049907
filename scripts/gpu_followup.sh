#!/usr/bin/env bash
# The GPU recipe's second call (docs/GPU.md): on the machine scripts/gpu_verify.sh has just used, while it is still
# warm (its build/, build-fp32/ and /opt/pracdeps stay), the measurements the first call has no time for, one after
# another under one time budget, each with its own limit; then a summary table with their RESULT lines. A warm
# machine goes back after 30 s idle, so this call must be ready before the first one returns: it takes no
# arguments that depend on the first call's output.
set -uo pipefail

usage() {
  cat <<'EOF'
usage: bash scripts/gpu_followup.sh [JOB...]      run these jobs (default: all, in the order below)
       bash scripts/gpu_followup.sh --list        the jobs and their commands

Jobs (each under its own time limit, seconds; a job of two runs makes both, and fails if either does):
  rebuild  120  cmake --build build, with REBUILD=1 only (skipped otherwise): after a fix made between the calls;
                refused when ninja would re-run CMake or rebuild more than 40 steps (the copied tree's files may
                all look new: a full rebuild does not fit)
  tests    150  REQUIRE_GPU=1 ctest --test-dir build -L gpu -R "$RERUN": the tests the first call failed, after a
                fix made between the calls (RERUN unset or empty: the job is skipped)
  accum    120  build/tools/bench_gpu --models llama-130m --no-max-batch --grad-accum 4, in place, then
                --refresh-overlap 2 (the staggered refresh steps at the paper's 512 sequences per step: B = 128 x 4;
                issue #15's decision)
  stagger   90  ./train_llama llama-130m B=32, 200 steps, T1 = T2 = 168 (a refresh every 2 steps), the first
                refreshes spread over 84 steps, in place and --prac-refresh-overlap 2; scripts/plot_runs.py: the
                slowest step over the median of each run (the trainer's own steps: real data, the spread window,
                first-use costs)
  overlap  150  build/tools/bench_gpu --quick --refresh-overlap 1, then 2 (the staggered refresh steps with each
                refresh solved beside one step, or two, at B = 32: a stress test)
  sanitize 150  scripts/gpu_sanitize.sh: compute-sanitizer's memcheck, racecheck, synccheck and initcheck over short
                CUDA trainer runs (tiny models; exit 3: a run timed out, 77: no usable compute-sanitizer, a SKIP)
  fp32     260  scripts/gpu_verify.sh's FP32 build and GPU tests (STEPS=fp32), when the first call had no time left
                for them
  align    150  build/tools/bench_gpu --models llama-1b --no-max-batch, without and with --hidden-align 8
  llmc     240  scripts/bench_vs_llmc.sh --llmc .llmc (carry .llmc: a copy of karpathy/llm.c, docs/GPU.md), with
                the BF16 build's ./train_gpt2 (the FP32 build keeps its trainers in build-fp32)
  stride    90  build/tools/bench_gpu_stride (llama-1b's F-wide GEMMs at N = 32768, three row layouts)
  table    240  build/tools/bench_gpu --models gpt2-124m,llama-130m,llama-350m,llama-1b
                --optimizers adamw,galore,rso,muon,adam-mini --json (Table 2's memory, Table 9's step times)
  mma       90  PRAC_ATTENTION=mma build/tools/bench_gpu --quick (our attention kernel instead of cuDNN's)

Environment: TOTAL_BUDGET (required: the device time left, the first call's reply's lease.budget_left_s, minus 75 s
for the turn between the calls, the transfers and the reply, and at most 580: a call's limit is 600; each job gets
at most what is left of it, minus 15 s for the summary), OUT (default /tmp/gpu_followup; the device tool's $OUT
there), DRY_RUN=1 (print each command, run nothing), REBUILD=1 (run the rebuild job), RERUN (the tests job's
ctest -R pattern), BENCH_GPU (default build/tools/bench_gpu). Without WARM_MARK (default build/CMakeCache.txt: the
first call's configured build) the machine is not the first call's warm one, and the script stops, exit 4.
What comes back under OUT: summary.txt (also printed last) and followup_logs.tar.gz (every job's log), both
rewritten after each job, so a call killed at its limit returns the jobs that finished.
Exit status: 0 when every job that ran passed (a job's exit 77 is a SKIP), 1 otherwise.
EOF
}

# The jobs, in the order they run: NAME|LIMIT SECONDS|COMMAND (one string for bash -c; printed by --list and DRY_RUN)
JOB_TABLE=(
  'rebuild|120|plan=$(cmake --build build -- -n 2>/dev/null); n=$(grep -cE "^\[[0-9]+/[0-9]+\]" <<<"$plan"); echo "rebuild: $n steps"; if grep -q "Re-running CMake" <<<"$plan"; then echo "refused: ninja would re-run CMake first (the copied CMake files look new), then rebuild everything"; exit 3; fi; if [ "$n" -gt 40 ]; then echo "refused: $n steps would not fit (the copied files look new to ninja?)"; exit 3; fi; cmake --build build -j"$(nproc)"'
  'tests|150|REQUIRE_GPU=1 ctest --test-dir build -L gpu -R "$RERUN" -V --output-on-failure --timeout 140'
  'accum|120|$BENCH_GPU --models llama-130m --no-max-batch --grad-accum 4; r=$?; $BENCH_GPU --models llama-130m --no-max-batch --grad-accum 4 --refresh-overlap 2 || r=1; exit $r'
  'stagger|90|r=0; for d in 0 2; do ./train_llama --model llama-130m --batch-size 32 --seq-len 256 --steps 200 --warmup 84 --prac prac --prac-t1 168 --prac-t2 168 --prac-initial-spread 84 --prac-refresh-overlap $d --eval-tokens 8192 --log "$LOGS/stagger_o$d.jsonl" >"$LOGS/stagger_o$d.log" 2>&1 || { tail -5 "$LOGS/stagger_o$d.log"; r=1; }; done; python3 scripts/plot_runs.py --no-plot --skip 2 --labels in_place,overlap2 "$LOGS/stagger_o0.jsonl" "$LOGS/stagger_o2.jsonl" || r=1; exit $r'
  'overlap|150|$BENCH_GPU --quick --refresh-overlap 1; r=$?; $BENCH_GPU --quick --refresh-overlap 2 || r=1; exit $r'
  'sanitize|150|LOGS="$LOGS/sanitize" bash scripts/gpu_sanitize.sh'
  'fp32|260|CLEAN=0 SKIP_CPU=1 USE_MAKE=0 STEPS=fp32 FP32_MIN=0 TOTAL_BUDGET=$((LIMIT - 10)) OUT="$LOGS/fp32" bash scripts/gpu_verify.sh'
  'align|150|$BENCH_GPU --models llama-1b --no-max-batch; r=$?; $BENCH_GPU --models llama-1b --no-max-batch --hidden-align 8 || r=1; exit $r'
  'llmc|240|bash scripts/bench_vs_llmc.sh --llmc .llmc --out "$LOGS/bench_vs_llmc"'
  'stride|90|build/tools/bench_gpu_stride'
  'table|240|$BENCH_GPU --models gpt2-124m,llama-130m,llama-350m,llama-1b --optimizers adamw,galore,rso,muon,adam-mini --json "$LOGS/bench.json"'
  'mma|90|PRAC_ATTENTION=mma $BENCH_GPU --quick'
)
ALL_JOBS=(); for row in "${JOB_TABLE[@]}"; do ALL_JOBS+=("${row%%|*}"); done
RERUN=${RERUN:-}
job_field() {  # NAME 2|3: the job's limit or command; empty for an unknown job
  local row; for row in "${JOB_TABLE[@]}"; do
    [ "${row%%|*}" = "$1" ] && { cut -d'|' -f"$2"- <<<"$row"; return; }
  done
}
job_limit() { job_field "$1" 2 | cut -d'|' -f1; }
# FOLLOWUP_CMD_<job> replaces a job's command (test/test_gpu_followup.sh runs the script's logic with stand-ins)
job_cmd() {
  local override="FOLLOWUP_CMD_$1"
  if [ -n "${!override:-}" ]; then echo "${!override}"; else job_field "$1" 3; fi
}

jobs=()
for a in "$@"; do
  case "$a" in
    -h|--help) usage; exit 0 ;;
    --list) for j in "${ALL_JOBS[@]}"; do printf '%-8s %4s s  %s\n' "$j" "$(job_limit "$j")" "$(job_cmd "$j")"; done; exit 0 ;;
    -*) echo "gpu_followup: unknown option $a" >&2; echo "---> HINT: --help lists the options and jobs" >&2; exit 2 ;;
    *) if [ -z "$(job_limit "$a")" ]; then
         echo "gpu_followup: unknown job '$a' (jobs: ${ALL_JOBS[*]})" >&2; exit 2
       fi
       jobs+=("$a") ;;
  esac
done
[ ${#jobs[@]} -eq 0 ] && jobs=("${ALL_JOBS[@]}")

cd "$(dirname "$0")/.." || exit 1
if [ -z "${TOTAL_BUDGET:-}" ] && [ "${DRY_RUN:-0}" != 1 ]; then  # a guess that outlives the device time loses it all
  echo "gpu_followup: set TOTAL_BUDGET (seconds): the first call's lease.budget_left_s minus 75, at most 580" >&2; exit 2
fi
TOTAL_BUDGET=${TOTAL_BUDGET:-600}
OUT=${OUT:-/tmp/gpu_followup}
TMP=$(mktemp -d /tmp/gpu_followup_logs.XXXXXX) || { echo "gpu_followup: cannot make a folder in /tmp" >&2; exit 1; }
LOGS=$TMP/logs
trap 'rm -rf "$TMP"' EXIT  # (what comes back is under OUT)
mkdir -p "$OUT" "$LOGS"
BENCH_GPU=${BENCH_GPU:-build/tools/bench_gpu}
REBUILD=${REBUILD:-0}
export RERUN LOGS BENCH_GPU
# a machine that went cold between the calls starts bare: every job would fail on the missing build, minutes lost
# (the first call's configured build is the mark; a bench_gpu that failed to compile costs only the jobs that run it)
WARM_MARK=${WARM_MARK:-build/CMakeCache.txt}
if [ "${DRY_RUN:-0}" != 1 ] && [ ! -f "$WARM_MARK" ]; then
  echo "gpu_followup: no $WARM_MARK: this is not the first call's warm machine (a fresh one starts bare);" \
       "run scripts/gpu_verify.sh there first (docs/GPU.md)" | tee "$OUT/summary.txt" >&2
  exit 4
fi
# what scripts/gpu_verify.sh unpacked (docs/GPU.md): carried libraries and the cudnn-frontend headers
[ -d /opt/pracdeps/lib ] && export LD_LIBRARY_PATH="/opt/pracdeps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -d /opt/pracdeps/cudnn_frontend ] && export CUDNN_FRONTEND_PATH=${CUDNN_FRONTEND_PATH:-/opt/pracdeps/cudnn_frontend}
T0=$(date +%s)
SUMMARY=()
failed=0
# summary.txt and the logs' tarball under OUT: rewritten after each job (INCOMPLETE until the last), printed at the end
write_summary() {  # FINAL: 1 at the end
  {
    echo "gpu_followup $(date -u +%Y-%m-%dT%H:%M:%SZ)  GIT_REV=${GIT_REV:-unset}  elapsed $(( $(date +%s) - T0 ))s of ${TOTAL_BUDGET}s"
    printf '%-8s %-6s %6s  %s\n' job status secs note
    [ ${#SUMMARY[@]} -gt 0 ] && printf '%s\n' "${SUMMARY[@]}"
    [ -f "$LOGS/results.txt" ] && sed 's/^/  /' "$LOGS/results.txt"
    if [ "$1" != 1 ]; then echo "RESULT: INCOMPLETE (written after job ${SUMMARY[-1]%% *}; the script did not finish)"
    elif [ "$failed" = 0 ]; then echo "RESULT: OK"; else echo "RESULT: FAILED"; fi
  } >"$OUT/summary.txt.tmp" && mv "$OUT/summary.txt.tmp" "$OUT/summary.txt"
  # (written aside, then renamed: a call killed during tar keeps the tarball of the job before)
  tar -C "$(dirname "$LOGS")" -czf "$OUT/followup_logs.tar.gz.tmp" logs && mv "$OUT/followup_logs.tar.gz.tmp" "$OUT/followup_logs.tar.gz"
}
for j in "${jobs[@]}"; do
  cmd=$(job_cmd "$j")
  left=$(( TOTAL_BUDGET - 15 - ($(date +%s) - T0) ))
  limit=$(job_limit "$j"); [ "$left" -lt "$limit" ] && limit=$left
  if [ "$j" = tests ] && [ -z "$RERUN" ]; then SUMMARY+=("$(printf '%-8s %-6s %6s  %s' "$j" SKIP 0 "RERUN is empty")"); continue; fi
  if [ "$j" = rebuild ] && [ "$REBUILD" != 1 ]; then SUMMARY+=("$(printf '%-8s %-6s %6s  %s' "$j" SKIP 0 "REBUILD is not 1")"); continue; fi
  if [ "$limit" -lt 10 ]; then SUMMARY+=("$(printf '%-8s %-6s %6s  %s' "$j" SKIP 0 "no time left")"); continue; fi
  echo "==> $j (limit ${limit}s): $cmd"
  if [ "${DRY_RUN:-0}" = 1 ]; then SUMMARY+=("$(printf '%-8s %-6s %6s  %s' "$j" DRY 0 "$cmd")"); continue; fi
  t=$(date +%s)
  LIMIT=$limit timeout --kill-after=5 "$limit" bash -c "$cmd" >"$LOGS/$j.log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - t ))
  tail -n 12 "$LOGS/$j.log" | sed 's/^/  | /'
  if [ "$rc" = 0 ]; then st=PASS; note="$(grep -c '^RESULT ' "$LOGS/$j.log") RESULT lines"
  elif [ "$rc" = 77 ]; then st=SKIP; note=$(grep -m 1 'SKIP' "$LOGS/$j.log" | cut -c1-100)  # the job says why
  else
    st=FAIL; failed=1; note="rc=$rc"
    { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && note="timed out after ${limit}s"
  fi
  SUMMARY+=("$(printf '%-8s %-6s %6s  %s' "$j" "$st" "$secs" "$note")")
  grep '^RESULT ' "$LOGS/$j.log" >>"$LOGS/results.txt"
  write_summary 0
done

write_summary 1
cat "$OUT/summary.txt"
exit "$failed"
