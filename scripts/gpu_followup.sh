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

Jobs (each under its own time limit, seconds):
  rebuild  120  cmake --build build (the call's tree may differ from the first call's: a fix made in between)
  tests    150  REQUIRE_GPU=1 ctest --test-dir build -L gpu -R "$RERUN": the tests the first call failed, after a
                fix made between the calls (RERUN unset or empty: the job is skipped)
  overlap  150  build/tools/bench_gpu --quick --refresh-overlap 1, then 2 (the staggered refresh steps with each
                refresh solved beside one step, or two: the first call's bench_gpu --quick has them in place)
  accum    120  build/tools/bench_gpu --models llama-130m --no-max-batch --grad-accum 4, in place, then
                --refresh-overlap 2 (the same staggered steps at the paper's 512 sequences per step: B = 128 x 4)
  align    150  build/tools/bench_gpu --models llama-1b --no-max-batch, without and with --hidden-align 8
  llmc     240  scripts/bench_vs_llmc.sh --llmc .llmc (carry .llmc: a copy of karpathy/llm.c, docs/GPU.md)
  stride    90  build/tools/bench_gpu_stride (llama-1b's F-wide GEMMs at N = 32768, three row layouts)
  table    240  build/tools/bench_gpu --models gpt2-124m,llama-130m,llama-350m,llama-1b
                --optimizers adamw,galore,rso,muon,adam-mini --json (Table 2's memory, Table 9's step times)
  mma       90  PRAC_ATTENTION=mma build/tools/bench_gpu --quick (our attention kernel instead of cuDNN's)

Environment: TOTAL_BUDGET (default 380 s: what a session's 900 s of device time leaves after the machine's start
and a first call of about 430 s; each job gets at most what is left, minus 15 s for the summary),
OUT (default /tmp/gpu_followup; the device tool's $OUT there), DRY_RUN=1 (print each command, run nothing),
RERUN (the tests job's ctest -R pattern).
What comes back under OUT: summary.txt (also printed last) and followup_logs.tar.gz (every job's log).
Exit status: 0 when every job that ran passed, 1 otherwise.
EOF
}

# The jobs, in the order they run: NAME|LIMIT SECONDS|COMMAND (one string for bash -c; printed by --list and DRY_RUN)
JOB_TABLE=(
  'rebuild|120|cmake --build build -j"$(nproc)"'
  'tests|150|REQUIRE_GPU=1 ctest --test-dir build -L gpu -R "$RERUN" --output-on-failure --timeout 140'
  'overlap|150|build/tools/bench_gpu --quick --refresh-overlap 1 && build/tools/bench_gpu --quick --refresh-overlap 2'
  'accum|120|build/tools/bench_gpu --models llama-130m --no-max-batch --grad-accum 4 && build/tools/bench_gpu --models llama-130m --no-max-batch --grad-accum 4 --refresh-overlap 2'
  'align|150|build/tools/bench_gpu --models llama-1b --no-max-batch && build/tools/bench_gpu --models llama-1b --no-max-batch --hidden-align 8'
  'llmc|240|rm -f train_gpt2 && cmake --build build --target train_gpt2 prep_data -j"$(nproc)" && bash scripts/bench_vs_llmc.sh --llmc .llmc --out "$LOGS/bench_vs_llmc"'
  'stride|90|build/tools/bench_gpu_stride'
  'table|240|build/tools/bench_gpu --models gpt2-124m,llama-130m,llama-350m,llama-1b --optimizers adamw,galore,rso,muon,adam-mini --json "$LOGS/bench.json"'
  'mma|90|PRAC_ATTENTION=mma build/tools/bench_gpu --quick'
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
TOTAL_BUDGET=${TOTAL_BUDGET:-380}
OUT=${OUT:-/tmp/gpu_followup}
LOGS=$(mktemp -d /tmp/gpu_followup_logs.XXXXXX)/logs
mkdir -p "$OUT" "$LOGS"
export RERUN LOGS
# what scripts/gpu_verify.sh unpacked (docs/GPU.md): carried libraries and the cudnn-frontend headers
[ -d /opt/pracdeps/lib ] && export LD_LIBRARY_PATH="/opt/pracdeps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -d /opt/pracdeps/cudnn_frontend ] && export CUDNN_FRONTEND_PATH=${CUDNN_FRONTEND_PATH:-/opt/pracdeps/cudnn_frontend}
T0=$(date +%s)
SUMMARY=()
failed=0
for j in "${jobs[@]}"; do
  cmd=$(job_cmd "$j")
  left=$(( TOTAL_BUDGET - 15 - ($(date +%s) - T0) ))
  limit=$(job_limit "$j"); [ "$left" -lt "$limit" ] && limit=$left
  if [ "$j" = tests ] && [ -z "$RERUN" ]; then SUMMARY+=("$(printf '%-8s %-6s %6s  %s' "$j" SKIP 0 "RERUN is empty")"); continue; fi
  if [ "$limit" -lt 10 ]; then SUMMARY+=("$(printf '%-8s %-6s %6s  %s' "$j" SKIP 0 "no time left")"); continue; fi
  echo "==> $j (limit ${limit}s): $cmd"
  if [ "${DRY_RUN:-0}" = 1 ]; then SUMMARY+=("$(printf '%-8s %-6s %6s  %s' "$j" DRY 0 "$cmd")"); continue; fi
  t=$(date +%s)
  timeout --kill-after=5 "$limit" bash -c "$cmd" >"$LOGS/$j.log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - t ))
  tail -n 12 "$LOGS/$j.log" | sed 's/^/  | /'
  if [ "$rc" = 0 ]; then st=PASS; note="$(grep -c '^RESULT ' "$LOGS/$j.log") RESULT lines"
  else
    st=FAIL; failed=1; note="rc=$rc"
    { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && note="timed out after ${limit}s"
  fi
  SUMMARY+=("$(printf '%-8s %-6s %6s  %s' "$j" "$st" "$secs" "$note")")
  grep '^RESULT ' "$LOGS/$j.log" >>"$LOGS/results.txt"
done

{
  echo "gpu_followup $(date -u +%Y-%m-%dT%H:%M:%SZ)  GIT_REV=${GIT_REV:-unset}  elapsed $(( $(date +%s) - T0 ))s of ${TOTAL_BUDGET}s"
  printf '%-8s %-6s %6s  %s\n' job status secs note
  printf '%s\n' "${SUMMARY[@]}"
  [ -f "$LOGS/results.txt" ] && sed 's/^/  /' "$LOGS/results.txt"
  if [ "$failed" = 0 ]; then echo "RESULT: OK"; else echo "RESULT: FAILED"; fi
} | tee "$OUT/summary.txt"
tar -C "$(dirname "$LOGS")" -czf "$OUT/followup_logs.tar.gz" logs
exit "$failed"
