#!/usr/bin/env bash
# scripts/gpu_verify.sh (the GPU recipe's first call) without a GPU and without building: the parts of its logic that
# decide what comes back from a call of the device tool.
#   1. FP32 build and tests skipped (not failed) when less than FP32_MIN seconds are left;
#   2. outside a dry run, a BF16 build and GPU tests skipped for lack of time fail the call;
#   3. a call killed in the middle of a step (the device tool's limit) still leaves summary.txt, results.json and
#      logs.tar.gz under OUT with the steps that finished, and a summary that says it is incomplete.
set -uo pipefail
cd "$(dirname "$0")/.."
S=scripts/gpu_verify.sh
fail=0
ok() { echo "  [ok] $*"; }
bad() { echo "  [FAIL] $*"; fail=1; }
# (pkill -s 0 is pkill's own session: ctest's and the shell's, were the test to end before sid is set)
W=$(mktemp -d); trap '[ -n "${sid:-}" ] && pkill -KILL -s "$sid" 2>/dev/null; rm -rf "$W"' EXIT
# DRY_RUN copies the tree into WORK and runs there; FORCE_DEBS=0: this machine has the build dependencies
common=(DRY_RUN=1 FORCE_DEBS=0 SKIP_CPU=1)

env "${common[@]}" WORK="$W/a" OUT="$W/a/out" STEPS=fp32 FP32_MIN=100000 bash "$S" >"$W/a.log" 2>&1; rc=$?
sum="$W/a/out/summary.txt"
[ "$rc" = 0 ] && ok "only skips: exit 0" || bad "exit $rc: $(tail -n 5 "$W/a.log")"
grep -qE '^build-fp32 +SKIP .*FP32_MIN=100000: run scripts/gpu_followup.sh fp32' "$sum" && ok "build-fp32 skipped, says why" \
  || bad "build-fp32 row: $(grep build-fp32 "$sum")"
grep -qE '^gpu-fp32 +SKIP ' "$sum" && ok "gpu-fp32 skipped" || bad "gpu-fp32 row: $(grep gpu-fp32 "$sum")"
grep -q '^RESULT: OK' "$sum" && ok "summary OK" || bad "summary verdict: $(tail -n 1 "$sum")"

# outside a dry run a skipped BF16 build and GPU tests (no time left) are no pass: exit 1, the RESULT line names them
# (they counted as passes: RESULT: OK with no GPU test run). A stand-in nvidia-smi (an H100), a configured-looking
# build folder, a budget below the steps' minimum.
mkdir -p "$W/c/build" "$W/c/bin" && touch "$W/c/build/CTestTestfile.cmake"
printf '#!/bin/sh
case "$*" in -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)";; *compute_cap*) echo "9.0";; esac
' \
  >"$W/c/bin/nvidia-smi" && chmod +x "$W/c/bin/nvidia-smi"
env PATH="$W/c/bin:$PATH" DRY_RUN=0 FORCE_DEBS=0 SKIP_CPU=1 WORK="$W/c" OUT="$W/c/out" PREFIX="$W/c/pracdeps" \
  BUILD_DIR="$W/c/build" STEPS=build,gpu TOTAL_BUDGET=25 bash "$S" >"$W/c.log" 2>&1; rc=$?
sum="$W/c/out/summary.txt"
grep -qE '^env +(PASS|INFO) ' "$sum" && grep -qE '^build +SKIP ' "$sum" && grep -qE '^gpu +SKIP ' "$sum" \
  && ok "env ran (the stand-in GPU); build and gpu skipped: no time left" \
  || bad "env/build/gpu rows: $(grep -E '^(env|build|gpu) ' "$sum")"
[ "$rc" = 1 ] && grep -q '^RESULT: FAILED (skipped: build, gpu)' "$sum" && ok "not a dry run: their skip fails, named" \
  || bad "exit $rc, verdict: $(tail -n 1 "$sum")"

# no GPU and no DRY_RUN (the dev machine, DRY_RUN=1 forgotten): it stops after env, exit 1, building nothing (it went
# on to build into the checkout's build/ and said so only at the end). A stand-in nvidia-smi that finds no GPU.
mkdir -p "$W/d/bin" && printf '#!/bin/sh\necho "No devices were found"; exit 6\n' >"$W/d/bin/nvidia-smi" \
  && chmod +x "$W/d/bin/nvidia-smi"
env PATH="$W/d/bin:$PATH" DRY_RUN=0 FORCE_DEBS=0 SKIP_CPU=1 WORK="$W/d" OUT="$W/d/out" PREFIX="$W/d/pracdeps" \
  BUILD_DIR="$W/d/build" STEPS=build,gpu bash "$S" >"$W/d.log" 2>&1; rc=$?
[ "$rc" = 1 ] && grep -q '^STOP: no GPU is visible .* nothing is built' "$W/d.log" && [ ! -e "$W/d/build" ] \
  && grep -qE '^env +FAIL .*not a dry run' "$W/d/out/summary.txt" && ! grep -qE '^(deps|build|gpu) ' "$W/d/out/summary.txt" \
  && ok "no GPU, no dry run: stopped after env, nothing built" \
  || bad "no GPU, no dry run: exit $rc, $(tail -n 4 "$W/d.log"), build dir $(ls -d "$W/d/build" 2>&1)"

# a later call on the warm machine (CLEAN=0, as gpu_followup.sh's fp32 job makes it) reuses the unpacked prefix and
# its exports: unpacking again removed the libraries where that call carried no .gpu_debs, and renewed the headers'
# times (an incremental build recompiled everything that includes them)
grep -q '^export CMAKE_PREFIX_PATH=' "$W/a/pracdeps/env.sh" 2>/dev/null && ok "deps wrote the prefix's env.sh" \
  || bad "no env.sh with the exports in $W/a/pracdeps"
echo "export PRAC_TEST_REUSED=yes" >>"$W/a/pracdeps/env.sh"
env "${common[@]}" WORK="$W/a" OUT="$W/a/out2" STEPS=fp32 FP32_MIN=100000 CLEAN=0 bash "$S" >"$W/a2.log" 2>&1
grep -qE '^deps +PASS .*reused .*pracdeps, unpacked by an earlier call' "$W/a/out2/summary.txt" \
  && grep -q 'PRAC_TEST_REUSED=yes' "$W/a/pracdeps/env.sh" && ok "CLEAN=0: the earlier call's prefix reused" \
  || bad "CLEAN=0 deps: $(grep -E '^deps' "$W/a/out2/summary.txt")"

# killed while the BF16 build configures (every process of the call's session, as the device tool's limit does)
setsid env "${common[@]}" WORK="$W/b" OUT="$W/b/out" STEPS=build bash "$S" >"$W/b.log" 2>&1 &
sid=$!
for _ in $(seq 1 600); do grep -q 'configure + build' "$W/b.log" 2>/dev/null && break; sleep 0.2; done
grep -q 'configure + build' "$W/b.log" || bad "the build step did not start within 120 s: $(tail -3 "$W/b.log")"
sleep 1
pkill -KILL -s "$sid"; wait "$sid" 2>/dev/null
sum="$W/b/out/summary.txt"
if [ -f "$sum" ]; then
  grep -qE '^deps +PASS' "$sum" && ok "the finished steps are in the summary" || bad "deps row missing: $(cat "$sum")"
  grep -q '^RESULT: INCOMPLETE (written after step deps' "$sum" && ok "the summary says it is incomplete" \
    || bad "verdict: $(tail -n 1 "$sum")"
  [ -f "$W/b/out/results.json" ] && ok "results.json written" || bad "no results.json"
  listing=$(tar -tzf "$W/b/out/logs.tar.gz")
  grep -q 'logs/env.log' <<<"$listing" && ok "logs.tar.gz holds env.log" || bad "logs tarball: $listing"
else
  bad "a killed call left no summary.txt"
fi

[ "$fail" = 0 ] && echo "test_gpu_verify: all passed" || echo "test_gpu_verify: FAILED"
exit "$fail"
