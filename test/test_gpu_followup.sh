#!/usr/bin/env bash
# scripts/gpu_followup.sh (the GPU recipe's second call) without a GPU: its jobs run stand-in commands
# (FOLLOWUP_CMD_<job>) so that the time budget, the per-job limits, the statuses, the RESULT lines, the summary
# and the exit status are checked here; the real commands are those `--list` prints.
set -uo pipefail
cd "$(dirname "$0")/.."
S=scripts/gpu_followup.sh
fail=0
ok() { echo "  [ok] $*"; }
bad() { echo "  [FAIL] $*"; fail=1; }
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
export BENCH_GPU=/bin/true WARM_MARK="$W/CMakeCache.txt"  # (the warm machine's build: the script stops without one,
touch "$WARM_MARK"                                          # below)

out=$(bash "$S" --list)
for j in rebuild tests accum stagger overlap sanitize fp32 stride align llmc table mma; do
  grep -q "^$j " <<<"$out" && ok "--list names $j" || bad "--list lacks $j"
done
grep -q 'bench_vs_llmc.sh --llmc .llmc' <<<"$out" && ok "llmc runs scripts/bench_vs_llmc.sh" || bad "llmc command"
# --help's table of jobs gives each the seconds --list (the jobs' own setting) gives (fp32's said 200, ran 260)
help=$(bash "$S" --help)
while read -r j secs _; do
  grep -qE "^  $j +$secs  " <<<"$help" && ok "--help gives $j its $secs s" || bad "--help's $j: $(grep -E "^  $j " <<<"$help")"
done < <(grep -E '^[a-z0-9]+ +[0-9]+ s ' <<<"$out")

env -u TOTAL_BUDGET OUT="$W/nob" bash "$S" stride >"$W/o" 2>&1; rc=$?
[ "$rc" = 2 ] && grep -q "set TOTAL_BUDGET" "$W/o" && ok "no TOTAL_BUDGET: exit 2, says so" || bad "no TOTAL_BUDGET: rc=$rc $(cat "$W/o")"

bash "$S" nosuch >"$W/o" 2>&1; rc=$?
[ "$rc" = 2 ] && grep -q "unknown job 'nosuch'" "$W/o" && ok "an unknown job: exit 2, named" || bad "unknown job: rc=$rc $(cat "$W/o")"

# stride passes with one RESULT line, align fails, mma outlives its limit (the budget's remainder), table finds
# no time left; the exit status is 1 and summary.txt + the logs come back under OUT
t0=$(date +%s)
FOLLOWUP_CMD_stride='echo warming; echo "RESULT bench_gpu_stride x=1"' FOLLOWUP_CMD_align='echo oops; exit 3' \
FOLLOWUP_CMD_mma='sleep 60' FOLLOWUP_CMD_table='echo never' TOTAL_BUDGET=28 OUT="$W/out" \
  bash "$S" stride align mma table >"$W/run" 2>&1; rc=$?
secs=$(( $(date +%s) - t0 ))
sum="$W/out/summary.txt"
[ "$rc" = 1 ] && ok "a failed job: exit 1" || bad "exit $rc, expected 1"
[ -f "$sum" ] || { bad "no summary.txt"; cat "$W/run"; exit 1; }
grep -qE '^stride +PASS .*1 RESULT lines' "$sum" && ok "stride PASS, 1 RESULT line" || bad "stride row: $(grep stride "$sum")"
grep -qE '^align +FAIL .*rc=3' "$sum" && ok "align FAIL rc=3" || bad "align row: $(grep align "$sum")"
# (28 s less stride's and align's few seconds and the margin: 13 s at most; fewer on a loaded machine)
mma_s=$(sed -nE 's/^mma +FAIL .*timed out after ([0-9]+)s.*/\1/p' "$sum")
[ -n "$mma_s" ] && [ "$mma_s" -ge 3 ] && [ "$mma_s" -le 13 ] && ok "mma stopped at the budget's remainder (${mma_s}s)" \
  || bad "mma row: $(grep mma "$sum")"
grep -qE '^table +SKIP .*no time left' "$sum" && ok "table skipped: no time left" || bad "table row: $(grep table "$sum")"
grep -q '^  RESULT bench_gpu_stride x=1' "$sum" && ok "RESULT line copied into the summary" || bad "RESULT line missing"
grep -q '^RESULT: FAILED' "$sum" && ok "summary ends FAILED" || bad "summary verdict"
[ "$secs" -le 25 ] && ok "the run kept to its budget (${secs}s of 28)" || bad "the run took ${secs}s, budget 28"
# the listing is read whole first: under pipefail, `tar | grep -q` fails whenever grep's early exit cuts tar off
listing=$(tar -tzf "$W/out/followup_logs.tar.gz")
grep -q 'logs/align.log' <<<"$listing" && ok "logs in followup_logs.tar.gz" || bad "logs tarball: $listing"

# every job passing: exit 0, RESULT: OK; DRY_RUN runs nothing
FOLLOWUP_CMD_stride='true' TOTAL_BUDGET=60 OUT="$W/out2" bash "$S" stride >/dev/null 2>&1 && grep -q '^RESULT: OK' "$W/out2/summary.txt" \
  && ok "all passed: exit 0, OK" || bad "all-pass run"
DRY_RUN=1 FOLLOWUP_CMD_stride="touch $W/ran" OUT="$W/out3" bash "$S" stride >/dev/null 2>&1
[ ! -e "$W/ran" ] && grep -qE '^stride +DRY' "$W/out3/summary.txt" && ok "DRY_RUN runs nothing" || bad "DRY_RUN ran the job"

env -u RERUN TOTAL_BUDGET=60 OUT="$W/out4" bash "$S" tests >/dev/null 2>&1
grep -qE '^tests +SKIP .*RERUN is empty' "$W/out4/summary.txt" && ok "tests without RERUN: skipped" || bad "tests job ran without RERUN"
# rebuild only when asked (a full rebuild after the copy's new timestamps took a whole job's limit), and then not when
# ninja would re-run CMake (its dry run counts 1 step then); a machine without the first call's build: stop at once
env -u REBUILD FOLLOWUP_CMD_rebuild="touch $W/rebuilt" TOTAL_BUDGET=60 OUT="$W/out7" bash "$S" rebuild >/dev/null 2>&1
[ ! -e "$W/rebuilt" ] && grep -qE '^rebuild +SKIP .*REBUILD is not 1' "$W/out7/summary.txt" \
  && ok "rebuild without REBUILD=1: skipped" || bad "rebuild ran without REBUILD=1"
printf '#!/bin/sh\necho "[1/1] Re-running CMake..."\n' >"$W/cmake"; chmod +x "$W/cmake"
PATH="$W:$PATH" REBUILD=1 TOTAL_BUDGET=60 OUT="$W/out8" bash "$S" rebuild >"$W/o8" 2>&1; rc=$?
[ "$rc" = 1 ] && grep -qE '^rebuild +FAIL .*rc=3' "$W/out8/summary.txt" && grep -q 'refused: ninja would re-run CMake' "$W/o8" \
  && ok "rebuild refused when ninja would re-run CMake" || bad "rebuild with CMake's re-run: rc=$rc $(cat "$W/o8")"
WARM_MARK="$W/none" FOLLOWUP_CMD_stride="touch $W/ran9" TOTAL_BUDGET=60 OUT="$W/out9" bash "$S" stride >"$W/o9" 2>&1; rc=$?
[ "$rc" = 4 ] && [ ! -e "$W/ran9" ] && grep -q "not the first call's warm machine" "$W/out9/summary.txt" \
  && ok "no build (a cold machine): exit 4 at once, said in summary.txt" || bad "no build: rc=$rc $(cat "$W/o9")"

# a job of two runs (the real overlap command, a stand-in bench_gpu whose first run fails) makes both and fails
printf '#!/bin/sh\necho "$*" >>%s\ncase "$*" in *"overlap 1"*) exit 1;; esac\necho "RESULT bench_gpu $*"\n' "$W/calls" >"$W/bench"
chmod +x "$W/bench"
BENCH_GPU="$W/bench" TOTAL_BUDGET=60 OUT="$W/out5" bash "$S" overlap >/dev/null 2>&1; rc=$?
[ "$rc" = 1 ] && [ "$(grep -c . "$W/calls")" = 2 ] && grep -q -- '--refresh-overlap 2' "$W/calls" \
  && grep -qE '^overlap +FAIL' "$W/out5/summary.txt" && ok "overlap: the second run after a failed first, job FAIL" \
  || bad "overlap: rc=$rc, calls: $(cat "$W/calls")"

# a call killed during a job (the device tool's limit) still leaves the finished jobs' summary and logs under OUT
setsid env FOLLOWUP_CMD_stride='echo "RESULT s=1"' FOLLOWUP_CMD_mma='sleep 60' TOTAL_BUDGET=90 OUT="$W/out6" \
  bash "$S" stride mma >"$W/run6" 2>&1 &
sid=$!
for _ in $(seq 1 600); do grep -q '==> mma' "$W/run6" && break; sleep 0.2; done
grep -q '==> mma' "$W/run6" || bad "mma did not start within 120 s: $(tail -3 "$W/run6")"
pkill -KILL -s "$sid"; wait "$sid" 2>/dev/null
grep -qE '^stride +PASS' "$W/out6/summary.txt" && grep -q '^RESULT: INCOMPLETE (written after job stride' "$W/out6/summary.txt" \
  && tar -tzf "$W/out6/followup_logs.tar.gz" | grep -c 'logs/stride.log' >/dev/null \
  && ok "killed during mma: stride's row, INCOMPLETE, its log" || bad "killed run: $(cat "$W/out6/summary.txt" 2>&1)"

[ "$fail" = 0 ] && echo "test_gpu_followup: all passed" || echo "test_gpu_followup: FAILED"
exit "$fail"
