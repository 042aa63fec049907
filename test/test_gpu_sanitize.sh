#!/usr/bin/env bash
# scripts/gpu_sanitize.sh (the GPU recipe's compute-sanitizer job) without a GPU: a stand-in compute-sanitizer
# (COMPUTE_SANITIZER) prints what the real one prints at the end of a run (its "ERROR SUMMARY" / "RACECHECK SUMMARY"
# lines, exit code --error-exitcode on errors, "Device not supported" on gVisor), so that the script's verdicts are
# checked here: clean, errors, a failed program, a timed-out run, no time left, no sanitizer, an unusable device.
#
# --commands TRAINER_DIR (ctest cuda-emu.bf16.gpu_sanitize_commands): the script's real trainer commands, each run
# through a pass-through stand-in on the emulated CUDA trainers in TRAINER_DIR, must all end clean: no flag the
# trainers refuse, no run that fails, found here rather than on the GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
S=scripts/gpu_sanitize.sh
fail=0
ok() { echo "  [ok] $*"; }
bad() { echo "  [FAIL] $*"; fail=1; }
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT

if [ "${1:-}" = --commands ]; then
  printf '#!/usr/bin/env bash\n[ "$1" = --version ] && exit 0\nshift 6\n"$@"; rc=$?\necho "========= ERROR SUMMARY: 0 errors"\nexit $rc\n' >"$W/pass"
  chmod +x "$W/pass"
  COMPUTE_SANITIZER="$W/pass" TRAINER_DIR="$2" LOGS="$W/logs" BUDGET=1500 RUN_CAP=600 bash "$S" >"$W/out" 2>&1; r=$?
  cat "$W/out"
  n=$(grep -c 'status=clean' "$W/out")
  [ "$r" = 0 ] && [ "$n" -ge 8 ] && ok "all $n commands ran clean on $2" \
    || { bad "rc=$r, $n clean"; for f in "$W"/logs/*.log; do grep -q 'error' "$f" && { echo "== $f"; tail -5 "$f"; }; done; }
  [ "$fail" = 0 ] && echo "test_gpu_sanitize --commands: all passed" || echo "test_gpu_sanitize --commands: FAILED"
  exit "$fail"
fi

# The stand-in: records its arguments and PRAC_ATTENTION; FAKE_<tool> chooses what it does for that tool
cat >"$W/cs" <<EOF
#!/usr/bin/env bash
[ "\$1" = --version ] && { echo "Compute Sanitizer stand-in"; echo "Version 0000.0.0"; exit 0; }
tool=\$2; code=\$4
echo "\$* attention=\${PRAC_ATTENTION:-auto}" >>"$W/calls"
var="FAKE_\$tool"; mode=\${!var:-clean}
echo "========= COMPUTE-SANITIZER"
case "\$mode" in
  clean) echo "========= ERROR SUMMARY: 0 errors"; exit 0 ;;
  errors) echo "========= Invalid __global__ write of size 4 bytes"; echo "========= ERROR SUMMARY: 3 errors"; exit "\$code" ;;
  races) echo "========= Error: Race reported between Write access and Read access"
         echo "========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)"; exit "\$code" ;;
  crash) echo "train_llama: error: something"; echo "========= ERROR SUMMARY: 0 errors"; exit 1 ;;
  slow) sleep 30 ;;
  slowbad) echo "========= Invalid __shared__ read of size 16 bytes"; sleep 30 ;;
  gvisor) echo "========= Error: Device not supported"; exit 255 ;;
esac
EOF
chmod +x "$W/cs"
run() {  # NAME [ENV...]: runs the script with the stand-in; its output in $W/NAME.out, exit status in $W/NAME.rc
  local name=$1; shift
  : >"$W/calls"
  env COMPUTE_SANITIZER="$W/cs" LOGS="$W/logs_$name" "$@" bash "$S" >"$W/$name.out" 2>&1
  echo $? >"$W/$name.rc"
}
rc() { cat "$W/$1.rc"; }

run clean BUDGET=120
[ "$(rc clean)" = 0 ] && ok "every run clean: exit 0" || bad "clean: rc=$(rc clean) $(cat "$W/clean.out")"
n=$(grep -c '^RESULT gpu_sanitize .*status=clean errors=0' "$W/clean.out")
[ "$n" -ge 8 ] && [ "$n" = "$(grep -c '^RESULT' "$W/clean.out")" ] && ok "$n RESULT lines, all clean" || bad "clean lines: $n"
for t in memcheck racecheck synccheck initcheck; do
  grep -q -- "--tool $t --error-exitcode 86 .*train_llama --model test/fixtures/v512/llama-tiny.json --device cuda" "$W/calls" \
    && ok "$t runs train_llama on the CUDA backend" || bad "$t: $(cat "$W/calls")"
done
grep -q -- "train_gpt2 --model test/fixtures/v512/gpt2-tiny.json --device cuda.*--optimizer muon" "$W/calls" \
  && ok "gpt2 with Muon" || bad "gpt2 run"
grep -q -- "--train-data test/fixtures/v512/train.bin --val-data test/fixtures/v512/val.bin" "$W/calls" \
  && ok "the runs train on the 512-id fixture's shards" || bad "the fixture's shards: $(head -1 "$W/calls")"
grep -q -- "--prac-refresh-overlap 1" "$W/calls" && ok "an overlapped refresh (second stream)" || bad "no overlap run"
grep -q -- "--tool racecheck .*attention=mma" "$W/calls" && grep -q -- "--tool racecheck .*attention=simt" "$W/calls" \
  && ok "racecheck over the mma and simt attention kernels" || bad "racecheck attention: $(grep racecheck "$W/calls")"

run races BUDGET=120 FAKE_racecheck=races
[ "$(rc races)" = 1 ] && grep -q 'tool=racecheck run=llama_mma status=errors errors=2' "$W/races.out" \
  && grep -q 'Race reported' "$W/races.out" && ok "racecheck hazards: exit 1, counted, the report printed" \
  || bad "races: rc=$(rc races) $(grep RESULT "$W/races.out")"
grep -q 'tool=memcheck run=llama_prac_overlap status=clean' "$W/races.out" && ok "the other tools still clean" || bad "races: memcheck row"

run errors BUDGET=120 FAKE_memcheck=errors
[ "$(rc errors)" = 1 ] && grep -q 'tool=memcheck run=llama_prac_overlap status=errors errors=3' "$W/errors.out" \
  && ok "memcheck errors: exit 1, 3 counted" || bad "errors: rc=$(rc errors) $(grep RESULT "$W/errors.out")"

run crash BUDGET=120 FAKE_synccheck=crash
[ "$(rc crash)" = 1 ] && grep -q 'tool=synccheck run=llama status=failed errors=0' "$W/crash.out" \
  && ok "a failed program with no sanitizer error: exit 1, status failed" || bad "crash: rc=$(rc crash)"

# a run past RUN_CAP is stopped and makes the result incomplete (exit 3), not clean; one that printed a report
# before it was stopped counts as errors; the runs after the budget are named as not reached
t0=$(date +%s)
run slow BUDGET=24 RUN_CAP=6 FAKE_memcheck=slow  # (two runs of 6 s, each started with 10 s to spare)
secs=$(( $(date +%s) - t0 ))
[ "$(rc slow)" = 3 ] && grep -q 'tool=memcheck run=llama_prac_overlap status=timeout' "$W/slow.out" \
  && grep -q 'INCOMPLETE' "$W/slow.out" && ok "a timed-out run: exit 3, INCOMPLETE" || bad "slow: rc=$(rc slow) $(cat "$W/slow.out")"
grep -q 'status=timeout errors=0 secs=0 (not reached' "$W/slow.out" && ok "runs past the budget: not reached" \
  || bad "no 'not reached' row: $(grep RESULT "$W/slow.out")"
[ "$secs" -ge 11 ] && [ "$secs" -le 24 ] && ok "kept to its budget (${secs}s of 24)" || bad "took ${secs}s with BUDGET=24"
run slowbad BUDGET=20 RUN_CAP=6 FAKE_memcheck=slowbad  # (run 1 gets its 6 s after up to 4 s of start; run 2 under 5: not reached)
[ "$(rc slowbad)" = 1 ] && grep -q 'tool=memcheck run=llama_prac_overlap status=errors errors=1' "$W/slowbad.out" \
  && ok "a report printed before a timeout: errors, exit 1" || bad "slowbad: rc=$(rc slowbad) $(grep RESULT "$W/slowbad.out")"

run gvisor BUDGET=120 FAKE_memcheck=gvisor
[ "$(rc gvisor)" = 77 ] && grep -q 'SKIP: compute-sanitizer cannot use this GPU' "$W/gvisor.out" \
  && ok "Device not supported: skip (77)" || bad "gvisor: rc=$(rc gvisor) $(cat "$W/gvisor.out")"
env -u COMPUTE_SANITIZER PATH=/usr/bin:/bin bash "$S" >"$W/none.out" 2>&1; r=$?
if [ -x /usr/local/cuda/bin/compute-sanitizer ]; then echo "  [skip] no-tool case not checked: this machine has /usr/local/cuda/bin/compute-sanitizer"
else [ "$r" = 77 ] && grep -q 'SKIP: no compute-sanitizer' "$W/none.out" && ok "no compute-sanitizer: skip (77), said" || bad "none: rc=$r"
fi

# gpu_followup.sh runs it as its job sanitize, whose rc 77 is a SKIP row
grep -q '^sanitize .*scripts/gpu_sanitize.sh' <(bash scripts/gpu_followup.sh --list) && ok "gpu_followup's job sanitize" \
  || bad "gpu_followup --list lacks sanitize"
FOLLOWUP_CMD_sanitize='echo "gpu_sanitize: SKIP: no compute-sanitizer"; exit 77' TOTAL_BUDGET=60 OUT="$W/fu" \
  bash scripts/gpu_followup.sh sanitize >/dev/null 2>&1; r=$?
[ "$r" = 0 ] && grep -qE '^sanitize +SKIP .*no compute-sanitizer' "$W/fu/summary.txt" \
  && ok "followup: exit 77 is a SKIP row with the reason, not a failure" || bad "followup 77: rc=$r $(cat "$W/fu/summary.txt")"

[ "$fail" = 0 ] && echo "test_gpu_sanitize: all passed" || echo "test_gpu_sanitize: FAILED"
exit "$fail"
