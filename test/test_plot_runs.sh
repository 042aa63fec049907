#!/usr/bin/env bash
# scripts/plot_runs.py's step-time statistics (issue #15's "no step above 1.2x the median") on a log of known step
# times: the median, the slowest step and their ratio, with and without --skip, in the table and the RESULT line.
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
[ "$fail" = 0 ] && echo "test_plot_runs: all passed" || echo "test_plot_runs: FAILED"
exit "$fail"
