#!/usr/bin/env bash
# scripts/plot_runs.py's step-time statistics (issue #15's "no step above 1.2x the median") on a log of known step
# times: the median, the slowest step and their ratio, with and without --skip, in the table and the RESULT line;
# a diverged run (null losses) and a log without memory data; refused arguments; and scripts/plot_spectrum.py's
# output extension; a write that fails part way (full disk) leaves the earlier picture whole.
set -uo pipefail
cd "$(dirname "$0")/.."
fail=0
ok() { echo "  [ok] $*"; }
bad() { echo "  [FAIL] $*"; fail=1; }
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
# steps 1..10: 100 ms (start-up), then 10 11 12 10 30 11 10 12 11: median 11 (of 9), slowest 30 at step 6
i=0
for ms in 100 10 11 12 10 30 11 10 12 11; do
  i=$((i + 1))
  echo "{\"type\":\"step\",\"step\":$i,\"loss\":5.0,\"lr\":0.001,\"norm\":1.0,\"tokens_per_s\":100,\"ms_per_step\":$ms,\"mem_peak_bytes\":1048576}"
done >"$W/run.jsonl"
echo '{"type":"eval","step":10,"val_loss":4.5,"val_ppl":90.0,"tokens":64}' >>"$W/run.jsonl"

out=$(python3 scripts/plot_runs.py --no-plot --skip 1 --labels spiky "$W/run.jsonl" 2>&1); rc=$?
[ "$rc" = 0 ] && ok "exit 0" || bad "exit $rc: $out"
grep -qx 'RESULT step_time run=spiky steps=9 median_ms=11.000 worst_ms=30.000 worst_step=6 worst_over_median=2.727' <<<"$out" \
  && ok "--skip 1: median 11, slowest 30 at step 6, 2.727x" || bad "RESULT line: $(grep RESULT <<<"$out")"
grep -q '| 11.00 | 30.00 ms at step 6 (2.73x) |' <<<"$out" && ok "the table's step-time columns" || bad "table: $out"
out=$(python3 scripts/plot_runs.py --no-plot --labels spiky "$W/run.jsonl" 2>&1)
grep -q 'median_ms=11.000 worst_ms=100.000 worst_step=1 worst_over_median=9.091' <<<"$out" \
  && ok "without --skip the start-up step is the slowest (median of 10: 11)" || bad "no skip: $(grep RESULT <<<"$out")"
python3 scripts/plot_runs.py --no-plot --skip -1 "$W/run.jsonl" >/dev/null 2>&1 && bad "--skip -1 accepted" \
  || ok "--skip -1 refused"

# a run killed at step 7 and resumed (--resume) from its step-3 checkpoint: the trainer appends, so the log holds
# steps 4..7 (and the eval at 5) twice; the last record of each step counts, which leaves the log above
i=0
for ms in 100 10 11 90 90 90 90; do
  i=$((i + 1))
  echo "{\"type\":\"step\",\"step\":$i,\"loss\":5.0,\"tokens_per_s\":100,\"ms_per_step\":$ms,\"mem_peak_bytes\":1048576}"
  [ $i = 5 ] && echo '{"type":"eval","step":5,"val_loss":9.0,"val_ppl":8103.0,"tokens":64}'
done >"$W/resumed.jsonl"
i=3
for ms in 12 10 30 11 10 12 11; do
  i=$((i + 1))
  echo "{\"type\":\"step\",\"step\":$i,\"loss\":5.0,\"tokens_per_s\":100,\"ms_per_step\":$ms,\"mem_peak_bytes\":1048576}"
  [ $i = 5 ] && echo '{"type":"eval","step":5,"val_loss":4.8,"val_ppl":121.5,"tokens":64}'
done >>"$W/resumed.jsonl"
echo '{"type":"eval","step":10,"val_loss":4.5,"val_ppl":90.0,"tokens":64}' >>"$W/resumed.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot --skip 1 --labels resumed "$W/resumed.jsonl" 2>&1); rc=$?
[ "$rc" = 0 ] && ok "resumed log: exit 0" || bad "resumed log: exit $rc: $out"
grep -qx 'RESULT step_time run=resumed steps=9 median_ms=11.000 worst_ms=30.000 worst_step=6 worst_over_median=2.727' <<<"$out" \
  && ok "resumed log: the replayed steps count once (the resumed run's records)" || bad "resumed log: $(grep RESULT <<<"$out")"
grep -q '^| resumed | 10 | 5.0000 | 4.5000 | 90.00 |' <<<"$out" && ok "resumed log: 10 steps in the table" \
  || bad "resumed log table: $(grep '^| resumed' <<<"$out")"
grep -q '^resumed: 5 replayed record(s) dropped' <<<"$out" && ok "resumed log: says 5 replayed records were dropped" \
  || bad "resumed log: no 'dropped' line: $out"
out=$(python3 scripts/plot_runs.py --no-plot "$W/run.jsonl" 2>&1)
grep -q 'dropped' <<<"$out" && bad "a log without a resume reports dropped records: $out" \
  || ok "a log without a resume drops nothing"
# --eval-only appends an eval record at step 0 to a training log: not a resume, nothing dropped
{ cat "$W/run.jsonl"; echo '{"type":"eval","step":0,"val_loss":4.4,"val_ppl":81.5,"tokens":64}'; } >"$W/evalonly.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot --skip 1 --labels evalonly "$W/evalonly.jsonl" 2>&1)
grep -q 'dropped' <<<"$out" && bad "an --eval-only record dropped records: $out" \
  || ok "an --eval-only record appended after training drops nothing"

# a run that diverged: the trainer logs a non-finite loss as null (train/metrics_log.h); steps 5-8 null and a null
# final eval must read nan, never the mean of steps 1-4 as if it were the final loss
i=0
for loss in 10.4 10.3 10.2 10.1 null null null null; do
  i=$((i + 1))
  echo "{\"type\":\"step\",\"step\":$i,\"loss\":$loss,\"tokens_per_s\":100,\"ms_per_step\":10,\"mem_peak_bytes\":1048576}"
done >"$W/diverged.jsonl"
echo '{"type":"eval","step":8,"val_loss":null,"val_ppl":null,"val_tokens":64}' >>"$W/diverged.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/diverged.jsonl" 2>&1)
grep -q '^| diverged | 8 | nan (4 non-finite steps) | nan | nan |' <<<"$out" \
  && ok "a diverged run: train loss 'nan (4 non-finite steps)', val loss and ppl nan" \
  || bad "a diverged run: $(grep '^| diverged' <<<"$out")"
grep -q '^diverged: non-finite values.*4 step(s) with a non-finite loss, the first at step 5' <<<"$out" \
  && ok "a diverged run: a line names its first non-finite step" || bad "a diverged run: no non-finite line: $out"
grep -q 'non-finite' <<<"$(python3 scripts/plot_runs.py --no-plot "$W/run.jsonl" 2>&1)" \
  && bad "a finite run reported non-finite values" || ok "a finite run reports no non-finite values"
# no record with memory data: "-", not 0.0
printf '{"type":"step","step":%d,"loss":5.0,"ms_per_step":10}\n' 1 2 3 >"$W/nomem.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/nomem.jsonl" 2>&1)
grep -q '^| nomem | 3 | 5.0000 | - | - | - | - |' <<<"$out" && ok "no memory data: peak memory '-'" \
  || bad "no memory data: $(grep '^| nomem' <<<"$out")"
if python3 -c 'import matplotlib' 2>/dev/null; then
  python3 scripts/plot_runs.py --out "$W/diverged.png" "$W/diverged.jsonl" "$W/nomem.jsonl" >/dev/null 2>&1 \
    && [ -s "$W/diverged.png" ] && ok "a PNG of a diverged run and a log without memory data" \
    || bad "no PNG of the diverged / no-memory logs"
fi

# bad arguments: a clear message and a non-zero exit, never a traceback
refused() {  # refused WHAT PATTERN CMD...: CMD exits non-zero, prints PATTERN, no traceback
  local what=$1 pat=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" != 0 ] && grep -q -- "$pat" <<<"$out" && ! grep -q Traceback <<<"$out"; then ok "$what refused: $out"
  else bad "$what: exit $rc: $out"; fi
}
refused "--smooth 0" "--smooth must be 1 or more" python3 scripts/plot_runs.py --smooth 0 --out "$W/s.png" "$W/run.jsonl"
refused "--smooth -2" "--smooth must be 1 or more" python3 scripts/plot_runs.py --smooth -2 --out "$W/s.png" "$W/run.jsonl"
refused "a missing log" "$W/missing.jsonl: cannot open the log" python3 scripts/plot_runs.py --no-plot "$W/missing.jsonl"
# logs written by hand or by another tool: one line naming the line and what is wrong (they were tracebacks)
echo '[1, 2]' >"$W/array.jsonl"
refused "a line that is not an object" "array.jsonl:1: not a JSON object (a list)" \
  python3 scripts/plot_runs.py --no-plot "$W/array.jsonl"
echo '{"type":"step","step":1,"loss":"x"}' >"$W/text.jsonl"
refused "a loss that is text" 'text.jsonl:1: "loss" is "x", not a number' python3 scripts/plot_runs.py --no-plot "$W/text.jsonl"
echo '{"type":"step","loss":1.5}' >"$W/nostep.jsonl"
refused "a step record without its step" 'nostep.jsonl:1: a step record without "step"' \
  python3 scripts/plot_runs.py --no-plot "$W/nostep.jsonl"
out=$(python3 scripts/plot_spectrum.py --help 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q "plot_spectrum" <<<"$out" && ok "plot_spectrum.py --help exits 0" \
  || bad "plot_spectrum.py --help: exit $rc"
refused "--out in a missing directory" "the directory $W/nodir does not exist" \
  python3 scripts/plot_runs.py --out "$W/nodir/x.png" "$W/run.jsonl"
[ -e "$W/nodir" ] && bad "--out in a missing directory created it" || ok "--out's missing directory not created"
if python3 -c 'import matplotlib' 2>/dev/null; then
  refused "--out x.txt" "unsupported format .txt; supported: .*\.png" python3 scripts/plot_runs.py --out "$W/x.txt" "$W/run.jsonl"
  [ -e "$W/x.txt" ] && bad "--out x.txt wrote a file" || ok "--out x.txt wrote nothing"
  refused "--out without an extension" "no extension; supported" python3 scripts/plot_runs.py --out "$W/x" "$W/run.jsonl"
  python3 scripts/plot_runs.py --smooth 3 --out "$W/ok.png" "$W/run.jsonl" "$W/resumed.jsonl" >/dev/null 2>&1 && [ -s "$W/ok.png" ] \
    && ok "a PNG into an existing directory" || bad "no PNG written to $W/ok.png"
  # scripts/plot_spectrum.py (prac_analyze --png's plotter) guards its output's extension the same way
  echo '{"file":"x.npy","shape":[2,3],"singular_values":[2.0,1.0,0.5],"cumulative_energy":[0.76,0.95,1.0]}' >"$W/spec.json"
  refused "plot_spectrum.py x.jpg2" "x.jpg2: unsupported format .jpg2; supported: .*\.png" \
    python3 scripts/plot_spectrum.py "$W/spec.json" "$W/x.jpg2"
  [ -e "$W/x.jpg2" ] && bad "plot_spectrum.py x.jpg2 wrote a file" || ok "plot_spectrum.py x.jpg2 wrote nothing"
  refused "plot_spectrum.py without an extension" "no extension; supported" \
    python3 scripts/plot_spectrum.py "$W/spec.json" "$W/x"
  python3 scripts/plot_spectrum.py "$W/spec.json" "$W/spec.png" && [ -s "$W/spec.png" ] \
    && ok "plot_spectrum.py writes a PNG" || bad "plot_spectrum.py wrote no PNG"
  # a write that fails part way (here a 1 KiB file-size limit, as a full disk would) leaves the earlier picture
  # whole and no temporary file: the scripts write beside OUT and rename (python ignores SIGXFSZ: writes get EFBIG)
  cp "$W/ok.png" "$W/ok.before"; cp "$W/spec.png" "$W/spec.before"
  refused "plot_runs.py over a full disk" "cannot write $W/ok.png: .*left as it was" \
    bash -c 'ulimit -f 1; exec "$@"' - python3 scripts/plot_runs.py --out "$W/ok.png" "$W/run.jsonl"
  refused "plot_spectrum.py over a full disk" "cannot write $W/spec.png: .*left as it was" \
    bash -c 'ulimit -f 1; exec "$@"' - python3 scripts/plot_spectrum.py "$W/spec.json" "$W/spec.png"
  cmp -s "$W/ok.png" "$W/ok.before" && cmp -s "$W/spec.png" "$W/spec.before" \
    && ok "a failed write leaves the earlier PNGs whole" || bad "a failed write changed an earlier PNG"
  left=$(ls -A "$W" | grep '^\.' || true)
  [ -z "$left" ] && ok "a failed write leaves no temporary file" || bad "temporary files left: $left"
else
  echo "  [skip] --out format checks and the PNGs (plot_runs.py, plot_spectrum.py): matplotlib is not installed"
fi
[ "$fail" = 0 ] && echo "test_plot_runs: all passed" || echo "test_plot_runs: FAILED"
exit "$fail"
