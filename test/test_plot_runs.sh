#!/usr/bin/env bash
# scripts/plot_runs.py's step-time statistics (issue #15's "no step above 1.2x the median") on a log of known step
# times: the median, the slowest step and their ratio, with and without --skip, in the table and the RESULT line;
# a diverged run (null losses), skipped steps and a log without memory data; tokens/s as tokens over time; an
# --eval-only record kept off the curve and the final val loss; fine-tuning logs' dev scores (glue_eval records) and a
# log with nothing to plot (only a memory record); --hellaswag's scores; refused arguments; and scripts/plot_spectrum.py's
# output extension; a write that fails part way (full disk) leaves the earlier picture whole; default labels of logs of
# one file name, --labels given twice, the loss curve's gaps (non-finite losses, --smooth, a lone step's marker), an
# overflowed perplexity's line, a JSON file that is not a run log.
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
# each process's first step ("startup":true; here step 1 and a resume's first, step 6) is left out of the times, and
# the RESULT line's steps= counts the steps timed (it said 10)
sed -e '/"step":1,/s/}$/,"startup":true}/' -e '/"step":6,/s/}$/,"startup":true}/' "$W/run.jsonl" >"$W/startup.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot --labels st "$W/startup.jsonl" 2>&1)
grep -qx 'RESULT step_time run=st steps=8 median_ms=11.000 worst_ms=12.000 worst_step=9 worst_over_median=1.091' <<<"$out" \
  && ok "start-up steps left out: 8 steps timed, median 11, slowest 12" || bad "start-up steps: $(grep RESULT <<<"$out")"
python3 scripts/plot_runs.py --no-plot --skip -1 "$W/run.jsonl" >/dev/null 2>&1 && bad "--skip -1 accepted" \
  || ok "--skip -1 refused"

# a diverged run's perplexity that double still holds (exp(568)): in scientific notation, not 247 digits
{ grep '"type":"step"' "$W/run.jsonl"; echo '{"type":"eval","step":10,"val_loss":568.4,"val_ppl":4.1e246,"tokens":64}'; } \
  >"$W/huge.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot --labels huge "$W/huge.jsonl" 2>&1)
grep -q '^| huge | 10 | 5.0000 | 568.4000 | 4.100e+246 |' <<<"$out" && ok "a huge perplexity in scientific notation" \
  || bad "huge perplexity: $(grep '^| huge' <<<"$out")"

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
# the trainer marks it ("eval_only":true): of loaded weights, not the run's final evaluation; a line reports it
{ cat "$W/run.jsonl"; echo '{"type":"eval","step":0,"val_loss":4.4,"val_ppl":81.5,"val_tokens":64,"eval_only":true}'; } >"$W/evalflag.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot --labels evalflag "$W/evalflag.jsonl" 2>&1)
grep -q '^| evalflag | 10 | 5.0000 | 4.5000 | 90.00 |' <<<"$out" \
  && ok "an --eval-only record: the final val loss stays the training's (step 10)" \
  || bad "an --eval-only record taken as the final evaluation: $(grep '^| evalflag' <<<"$out")"
grep -qx 'evalflag: --eval-only evaluation (line 12 of the log): val loss 4.4000, ppl 81.50 over 64 tokens' <<<"$out" \
  && ok "an --eval-only record: a line after the table" || bad "an --eval-only record: no line of its own: $out"
# between a run and its resume: neither dropped nor counted as a replayed record
{ for i in 1 2 3 4 5; do echo "{\"type\":\"step\",\"step\":$i,\"loss\":5.0,\"ms_per_step\":10}"; done
  echo '{"type":"eval","step":0,"val_loss":4.4,"val_ppl":81.5,"val_tokens":64,"eval_only":true}'
  for i in 4 5 6; do echo "{\"type\":\"step\",\"step\":$i,\"loss\":5.0,\"ms_per_step\":10}"; done; } >"$W/evalresume.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/evalresume.jsonl" 2>&1)
grep -q '^| evalresume | 6 | 5.0000 | - | - |' <<<"$out" && grep -q '^evalresume: 2 replayed record(s) dropped' <<<"$out" \
  && grep -q '^evalresume: --eval-only evaluation (line 6 of the log): val loss 4.4000' <<<"$out" \
  && ok "an --eval-only record between a run and its resume: kept, not a replay" || bad "--eval-only and a resume: $out"
# an --eval-only run's own log: that evaluation is the run's
echo '{"type":"eval","step":0,"val_loss":4.4,"val_ppl":81.5,"val_tokens":64,"eval_only":true}' >"$W/evalrun.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/evalrun.jsonl" 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q '^| evalrun | 0 | - | 4.4000 | 81.50 | - |' <<<"$out" \
  && ok "an --eval-only run's own log: its evaluation in the table" || bad "an --eval-only run's own log: exit $rc: $out"

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
# --on-nonfinite skip: step 3 skipped for its gradient norm (its finite loss 8.0 counts), step 6 for its loss (null:
# left out, its update was not applied): the mean of the other 9 is 48/9
i=0
for s in ok ok norm ok ok loss ok ok ok ok; do
  i=$((i + 1))
  case $s in
    ok) r='"loss":5.0,"grad_norm":1.0' ;;
    norm) r='"loss":8.0,"grad_norm":null,"skipped":true' ;;
    loss) r='"loss":null,"grad_norm":null,"skipped":true' ;;
  esac
  echo "{\"type\":\"step\",\"step\":$i,$r,\"tokens_per_s\":100,\"ms_per_step\":10,\"mem_peak_bytes\":1048576}"
done >"$W/skipped.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/skipped.jsonl" 2>&1)
grep -q '^| skipped | 10 | 5.3333 (1 non-finite step, 2 skipped steps) |' <<<"$out" \
  && ok "skipped steps: counted in the train loss cell, a skipped null loss left out of the mean" \
  || bad "skipped steps: $(grep '^| skipped' <<<"$out")"
grep -q '^skipped: non-finite values.*the first at step 6; 2 skipped step(s) .*the first at step 3$' <<<"$out" \
  && ok "skipped steps: a line names the count and the first" || bad "skipped steps: no line: $out"
# a step of padding alone (null loss, "padding":true, no update) is no loss: left out of the mean and of the
# non-finite count, and counted on its own (it read "nan (1 non-finite step)")
printf '{"type":"step","step":%d,"loss":%s,"grad_norm":%s%s,"ms_per_step":10}\n' 1 5.0 1.0 '' 2 5.0 1.0 '' \
  3 null 0 ',"padding":true' 4 5.0 1.0 '' >"$W/padding.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/padding.jsonl" 2>&1)
grep -q '^| padding | 4 | 5.0000 (1 padding step) |' <<<"$out" && ! grep -q 'non-finite' <<<"$out" \
  && ok "a padding step: left out of the loss, counted, not non-finite" || bad "padding step: $(grep '^| padding' <<<"$out")"
# no "skipped" flag but a null gradient norm: a step the trainer did not apply either
printf '{"type":"step","step":%d,"loss":5.0,"grad_norm":%s,"ms_per_step":10}\n' 1 1.0 2 null 3 1.0 >"$W/nullnorm.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/nullnorm.jsonl" 2>&1)
grep -q '^| nullnorm | 3 | 5.0000 (1 skipped step) |' <<<"$out" \
  && grep -q '^nullnorm: .*no step with a non-finite loss; 1 skipped step(s) .*the first at step 2$' <<<"$out" \
  && ok "a null gradient norm counts as a skipped step" || bad "a null gradient norm: $out"
# the last 10 steps all skipped with null losses: nan, not step 1's loss
{ echo '{"type":"step","step":1,"loss":5.0,"grad_norm":1.0}'
  for i in $(seq 2 11); do echo "{\"type\":\"step\",\"step\":$i,\"loss\":null,\"grad_norm\":null,\"skipped\":true}"; done; } >"$W/allskipped.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/allskipped.jsonl" 2>&1)
grep -q '^| allskipped | 11 | nan (10 non-finite steps, 10 skipped steps) |' <<<"$out" \
  && ok "the last 10 steps all skipped: nan" || bad "the last 10 steps all skipped: $(grep '^| allskipped' <<<"$out")"
grep -q 'skipped' <<<"$(python3 scripts/plot_runs.py --no-plot "$W/run.jsonl" 2>&1)" \
  && bad "a run without skipped steps reported some" || ok "a run without skipped steps reports none"
# tokens/s: the steps' tokens over their time (a record without its time counts for nothing): a 1000 ms start-up
# step at 10 tokens/s, 10 ms at 1000 and 100 ms at 100: 30 tokens in 1.11 s = 27, with --skip 1 20 in 0.11 s = 182
# (the mean of the rates, 402, overstates it); no step left after --skip: "-"
printf '{"type":"step","step":%d,"loss":5.0,"tokens_per_s":%s,"ms_per_step":%s}\n' 1 10 1000 2 1000 10 3 100 100 >"$W/tps.jsonl"
echo '{"type":"step","step":4,"loss":5.0,"tokens_per_s":500}' >>"$W/tps.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/tps.jsonl" 2>&1)
grep -q '^| tps | 4 | 5.0000 | - | - | 27 |' <<<"$out" && ok "tokens/s: tokens over time (27)" \
  || bad "tokens/s: $(grep '^| tps' <<<"$out")"
out=$(python3 scripts/plot_runs.py --no-plot --skip 1 "$W/tps.jsonl" 2>&1)
grep -q '^| tps | 4 | 5.0000 | - | - | 182 |' <<<"$out" && ok "tokens/s: --skip 1 leaves the start-up step out (182)" \
  || bad "tokens/s --skip 1: $(grep '^| tps' <<<"$out")"
out=$(python3 scripts/plot_runs.py --no-plot --skip 4 "$W/tps.jsonl" 2>&1)
grep -q '^| tps | 4 | 5.0000 | - | - | - |' <<<"$out" && ok "tokens/s: no timed step after --skip: '-'" \
  || bad "tokens/s --skip 4: $(grep '^| tps' <<<"$out")"
# each process's first step ("startup":true: a run's, here 1 s, and a resume's, here 5 s) is left out of tokens/s and
# the step times as --skip's are: steps 2 and 4, 20 tokens in 20 ms (with them: 40 tokens in 6.02 s = 7)
{ echo '{"type":"step","step":1,"loss":5.0,"tokens_per_s":10,"ms_per_step":1000,"startup":true}'
  echo '{"type":"step","step":2,"loss":5.0,"tokens_per_s":1000,"ms_per_step":10}'
  echo '{"type":"step","step":3,"loss":5.0,"tokens_per_s":2,"ms_per_step":5000,"startup":true}'
  echo '{"type":"step","step":4,"loss":5.0,"tokens_per_s":1000,"ms_per_step":10}'; } >"$W/startup.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/startup.jsonl" 2>&1)
grep -q "^| startup | 4 | 5.0000 | - | - | 1000 | - | 10.00 | 10.00 ms at step 4 (1.00x) |" <<<"$out" \
  && ok "startup steps left out of tokens/s (1000) and the step times" || bad "startup steps: $(grep '^| startup' <<<"$out")"
# no record with memory data: "-", not 0.0
printf '{"type":"step","step":%d,"loss":5.0,"ms_per_step":10}\n' 1 2 3 >"$W/nomem.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/nomem.jsonl" 2>&1)
grep -q '^| nomem | 3 | 5.0000 | - | - | - | - |' <<<"$out" && ok "no memory data: peak memory '-'" \
  || bad "no memory data: $(grep '^| nomem' <<<"$out")"
# fine-tuning logs (finetune_roberta): the dev score of their glue_eval records, the metric of the task's Table 5
# column (MRPC f1, STS-B pearson, MNLI dev_matched accuracy), final and best with their steps, in a line per run; a
# null (undefined) score is no best and reads undefined as the final one
mem='{"type":"memory","B":16,"T":25,"planned_activation_bytes":1980160,"arena_bytes":1980160}'
steps() { for i in $(seq 1 "$1"); do echo "{\"type\":\"step\",\"step\":$i,\"loss\":0.7,\"ms_per_step\":10,\"tokens_per_s\":1000,\"mem_peak_bytes\":2606848}"; done; }
{ echo "$mem"; steps 2
  echo '{"type":"glue_eval","task":"mrpc","split":"dev","step":2,"epoch":1,"val_loss":0.6,"f1":0.9,"accuracy":0.85}'
  steps 4 | tail -2
  echo '{"type":"glue_eval","task":"mrpc","split":"dev","step":4,"epoch":2,"val_loss":0.5,"f1":0.8,"accuracy":0.95}'
  echo '{"type":"final","metric":"f1","step":4,"best":0.9,"best_epoch":1,"final":0.8,"seconds":1.0}'; } >"$W/ftm.jsonl"
{ echo "$mem"; steps 2
  echo '{"type":"glue_eval","task":"mnli","split":"dev_matched","step":2,"epoch":1,"val_loss":0.9,"accuracy":0.6}'
  echo '{"type":"glue_eval","task":"mnli","split":"dev_mismatched","step":2,"epoch":1,"val_loss":0.8,"accuracy":0.7}'; } >"$W/ftn.jsonl"
{ echo "$mem"; steps 2
  echo '{"type":"glue_eval","task":"stsb","split":"dev","step":2,"epoch":1,"val_loss":2.0,"pearson":0.5,"spearman":0.4}'
  steps 4 | tail -2
  echo '{"type":"glue_eval","task":"stsb","split":"dev","step":4,"epoch":2,"val_loss":2.0,"pearson":null,"spearman":null}'; } >"$W/fts.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/ftm.jsonl" "$W/ftn.jsonl" "$W/fts.jsonl" 2>&1); rc=$?
[ "$rc" = 0 ] && grep -qx 'ftm: GLUE mrpc dev f1: final 0.8000 (step 4, epoch 2), best 0.9000 (step 2, epoch 1) over 2 evaluation(s)' <<<"$out" \
  && ok "a fine-tuning log: its final and best dev F1 (MRPC) in a line" || bad "a fine-tuning log (MRPC): exit $rc: $out"
grep -qx 'ftn: GLUE mnli dev_matched accuracy: final 0.6000 (step 2, epoch 1), best 0.6000 (step 2, epoch 1) over 1 evaluation(s)' <<<"$out" \
  && ok "MNLI: the dev_matched accuracy (not dev_mismatched's)" || bad "MNLI's line: $(grep '^ftn' <<<"$out")"
grep -qx 'fts: GLUE stsb dev pearson: final undefined (null) (step 4, epoch 2), best 0.5000 (step 2, epoch 1) over 2 evaluation(s)' <<<"$out" \
  && ok "STS-B: a null Pearson is no best and reads undefined as the final" || bad "STS-B's line: $(grep '^fts' <<<"$out")"
# an --eval-only evaluation appended to a fine-tuning log (of another model, f1 0) is not the run's final score
{ cat "$W/ftm.jsonl"
  echo '{"type":"glue_eval","task":"mrpc","split":"dev","step":0,"epoch":0,"val_loss":0.9,"f1":0,"accuracy":0.3,"eval_only":true}'; } \
  >"$W/ftme.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/ftme.jsonl" 2>&1)
grep -qx 'ftme: GLUE mrpc dev f1: final 0.8000 (step 4, epoch 2), best 0.9000 (step 2, epoch 1) over 2 evaluation(s)' <<<"$out" \
  && grep -qx 'ftme: --eval-only evaluation (line 9 of the log): GLUE mrpc dev f1 0.0000' <<<"$out" \
  && ok "an --eval-only glue_eval record: not the run's final score, a line of its own" || bad "--eval-only glue_eval: $out"
got=$(python3 -c 'import sys; sys.path[:0] = ["scripts", "scripts/repro"]; import table5; print(table5.scores(sys.argv[1], "mrpc"))' \
      "$W/ftme.jsonl" 2>&1)
[ "$got" = "(0.9, 0.8)" ] && ok "table5's scores leave the --eval-only record out" || bad "table5.scores: $got, want (0.9, 0.8)"
# a resumed fine-tuning log: the earlier process's epoch past the checkpoint (f1 0.9, replayed as 0.7) is not the best
{ printf '{"type":"step","step":%d}\n' 1 2
  echo '{"type":"glue_eval","task":"mrpc","split":"dev","step":2,"epoch":1,"f1":0.5}'
  printf '{"type":"step","step":%d}\n' 3 4
  echo '{"type":"glue_eval","task":"mrpc","split":"dev","step":4,"epoch":2,"f1":0.9}'
  printf '{"type":"step","step":%d}\n' 3 4
  echo '{"type":"glue_eval","task":"mrpc","split":"dev","step":4,"epoch":2,"f1":0.7}'; } >"$W/ftresumed.jsonl"
got=$(python3 -c 'import sys; sys.path[:0] = ["scripts", "scripts/repro"]; import table5; print(table5.scores(sys.argv[1], "mrpc"))' \
      "$W/ftresumed.jsonl" 2>&1)
[ "$got" = "(0.7, 0.7)" ] && ok "table5's scores: a resumed run's replayed epoch once (run_log.py)" \
  || bad "table5.scores of a resumed log: $got, want (0.7, 0.7)"
# a run killed during the evaluation that ends an epoch, its checkpoint written at that step before it
# (finetune_roberta): the resume evaluates that epoch again before any step; the two records count once (the later),
# so 3 epochs are 3 evaluations; MNLI's two dev splits at one step stay two records
{ printf '{"type":"step","step":%d}\n' 1 2
  echo '{"type":"glue_eval","task":"mrpc","split":"dev","step":2,"epoch":1,"f1":0.5}'
  echo '{"type":"glue_eval","task":"mrpc","split":"dev","step":2,"epoch":1,"f1":0.6}'
  printf '{"type":"step","step":%d}\n' 3 4
  echo '{"type":"glue_eval","task":"mrpc","split":"dev","step":4,"epoch":2,"f1":0.7}'
  printf '{"type":"step","step":%d}\n' 5 6
  echo '{"type":"glue_eval","task":"mrpc","split":"dev","step":6,"epoch":3,"f1":0.4}'; } >"$W/ftreeval.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/ftreeval.jsonl" 2>&1)
grep -qx 'ftreeval: GLUE mrpc dev f1: final 0.4000 (step 6, epoch 3), best 0.7000 (step 4, epoch 2) over 3 evaluation(s)' <<<"$out" \
  && grep -q '^ftreeval: 1 replayed record(s) dropped' <<<"$out" \
  && ok "an epoch's evaluation run again by a resume counts once" || bad "an evaluation repeated at one step: $out"
# (plot_runs leaves dev_mismatched out before the rule: asked of the rule itself, which table5.scores uses)
got=$(python3 -c 'import json, sys; sys.path.insert(0, "scripts"); import run_log
recs = [json.loads(l) for l in open(sys.argv[1]) if "glue_eval" in l]
kept, dropped = run_log.drop_replayed(recs); print(len(recs), len(kept), dropped)' "$W/ftn.jsonl" 2>&1)
[ "$got" = "2 2 0" ] && ok "MNLI's two dev splits at one step: both kept, nothing dropped" \
  || bad "MNLI's two dev splits at one step (records, kept, dropped): $got"
# many runs in one plot (Table 5's 24, Table 2's 20): each its own colour and line style
got=$(python3 -c 'import sys; sys.path.insert(0, "scripts"); import plot_runs
s = plot_runs.run_styles(40, list("abcdefghij")); print(len(set(s)), s[0], s[10], s[39])' 2>&1)
[ "$got" = "40 ('a', '-') ('a', '--') ('j', '-.')" ] && ok "40 runs: 40 distinct (colour, line style) pairs" \
  || bad "run_styles: $got"
# an --eval-only run's own log: its evaluation is the run's
echo '{"type":"glue_eval","task":"mrpc","split":"dev","step":0,"epoch":0,"val_loss":0.9,"f1":0.5,"eval_only":true}' >"$W/ftonly.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/ftonly.jsonl" 2>&1)
grep -qx 'ftonly: GLUE mrpc dev f1: final 0.5000 (step 0, epoch 0), best 0.5000 (step 0, epoch 0) over 1 evaluation(s)' <<<"$out" \
  && ok "an --eval-only fine-tuning log: its evaluation is the run's" || bad "--eval-only glue log alone: $out"
got=$(python3 -c 'import sys; sys.path[:0] = ["scripts", "scripts/repro"]; import plot_runs, table5
print(plot_runs.GLUE_METRIC == table5.COLUMN)' 2>&1)
[ "$got" = True ] && ok "the dev score's metric per task is table5.py's COLUMN" || bad "GLUE_METRIC vs table5.COLUMN: $got"
# a log with nothing to plot (a fine-tuning run killed before step 1: only its memory record) is left out with a
# line, not fatal to the others' table and PNG; alone it is refused
echo "$mem" >"$W/memonly.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/run.jsonl" "$W/memonly.jsonl" 2>&1); rc=$?
[ "$rc" = 0 ] && grep -qx "memonly: $W/memonly.jsonl has no step or evaluation record: left out of the table and the plot" <<<"$out" \
  && ! grep -q '^| memonly' <<<"$out" && grep -q '^| run | 10 |' <<<"$out" \
  && ok "a log holding only a memory record is left out, with a line" || bad "a memory-only log beside another: exit $rc: $out"
# logs of one file name (the README's --log metrics.jsonl, one folder per run): each its own label, as much of its
# path as tells them apart, in the table, the RESULT lines (and the legend, below); they all read "metrics"
mkdir -p "$W/A" "$W/B"; cp "$W/run.jsonl" "$W/A/metrics.jsonl"; cp "$W/run.jsonl" "$W/B/metrics.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/A/metrics.jsonl" "$W/B/metrics.jsonl" "$W/nomem.jsonl" 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q '^| A/metrics | 10 |' <<<"$out" && grep -q '^| B/metrics | 10 |' <<<"$out" \
  && grep -q '^| nomem | 3 |' <<<"$out" && grep -q '^RESULT step_time run=A/metrics ' <<<"$out" \
  && grep -q '^RESULT step_time run=B/metrics ' <<<"$out" \
  && ok "logs of one file name: labelled A/metrics and B/metrics (nomem stays nomem)" || bad "labels of one file name: exit $rc: $out"
# an evaluation whose perplexity overflowed (val_ppl null, val_loss finite: exp past a double's range) is a gap in
# the perplexity curve: said in a line, not left to vanish
{ cat "$W/nomem.jsonl"; echo '{"type":"eval","step":2,"val_loss":750.5,"val_ppl":null,"val_tokens":64}'
  echo '{"type":"eval","step":3,"val_loss":4.5,"val_ppl":90.0,"val_tokens":64}'; } >"$W/pploverflow.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/pploverflow.jsonl" 2>&1)
grep -qx "pploverflow: 1 evaluation(s) with a finite val loss but a perplexity past a double's range (val_ppl null: exp(val_loss) overflows), the first at step 2 (val loss 750.5000): inf in the table, a gap in the perplexity curve" <<<"$out" \
  && ok "a perplexity that overflowed: a line says so" || bad "a perplexity that overflowed: no line: $out"

echo '{"type":"glue_eval","task":"mrpc","split":"dev","step":2,"f1":"x"}' >"$W/gluetext.jsonl"
if python3 -c 'import matplotlib' 2>/dev/null; then
  python3 scripts/plot_runs.py --out "$W/diverged.png" "$W/diverged.jsonl" "$W/nomem.jsonl" >/dev/null 2>&1 \
    && [ -s "$W/diverged.png" ] && ok "a PNG of a diverged run and a log without memory data" \
    || bad "no PNG of the diverged / no-memory logs"
  # the curves as drawn: plot_runs.py under a savefig that prints each panel's lines ("TITLE|LABEL|x x ...")
  panels() {
    python3 - "$@" <<'PY'
import os, runpy, sys
import matplotlib.figure
def show(fig, *a, **k):
    for ax in fig.axes:
        for line in ax.get_lines():
            print(f"{ax.get_title()}|{line.get_label()}|" + " ".join(str(x) for x in line.get_xdata()))
matplotlib.figure.Figure.savefig = show
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
PY
  }
  out=$(panels scripts/plot_runs.py --out "$W/panels.png" "$W/evalflag.jsonl" "$W/evalrun.jsonl" 2>&1)
  grep -qx 'validation perplexity|evalflag|10' <<<"$out" \
    && ok "the PNG: an --eval-only record stays off the training's perplexity curve" \
    || bad "the PNG's perplexity curve: $(grep '^validation' <<<"$out" || echo "$out")"
  grep -qx 'validation perplexity|evalrun|0' <<<"$out" && ok "the PNG: an --eval-only run's own log at step 0" \
    || bad "the PNG, an --eval-only run's own log: $(grep '^validation' <<<"$out" || echo "$out")"
  # the fifth panel: each step's learning rate (a record without one, or a null, is left out of it)
  sed -e '/"step":3,/s/"lr":0.001,//' -e '/"step":4,/s/"lr":0.001/"lr":null/' "$W/run.jsonl" >"$W/lr.jsonl"
  out=$(panels scripts/plot_runs.py --out "$W/panels.png" "$W/lr.jsonl" 2>&1)
  grep -qx 'learning rate|lr|1 2 5 6 7 8 9 10' <<<"$out" && ok "the PNG: the learning rate of each step that has one" \
    || bad "the PNG's learning-rate panel: $(grep '^learning' <<<"$out" || echo "$out")"
  # --hellaswag's scores (eval records with hellaswag_*): a sixth panel of acc_norm at each evaluation that has one,
  # a line after the table with the last; logs without them keep five panels
  { cat "$W/run.jsonl"
    echo '{"type":"eval","step":5,"val_loss":4.8,"val_ppl":121.5,"val_tokens":64,"hellaswag_acc_norm":0.25,"hellaswag_acc":0.2,"hellaswag_examples":20}'
    echo '{"type":"eval","step":12,"val_loss":4.4,"val_ppl":81.5,"val_tokens":64,"hellaswag_acc_norm":0.3,"hellaswag_acc":0.35,"hellaswag_examples":20}'; } >"$W/hs.jsonl"
  out=$(panels scripts/plot_runs.py --out "$W/panels.png" "$W/hs.jsonl" "$W/run.jsonl" 2>&1)
  grep -qx 'HellaSwag acc_norm (chance 0.25)|hs|5 12' <<<"$out" && ! grep -q '^HellaSwag.*|run|' <<<"$out" \
    && grep -qx 'hs: HellaSwag acc_norm 0.3000 (acc 0.3500, 20 examples) at step 12' <<<"$out" \
    && ok "the PNG: HellaSwag's acc_norm at the evaluations that scored it; the last in a line" \
    || bad "the HellaSwag panel: $(grep -i 'hellaswag' <<<"$out" || echo "$out")"
  out=$(panels scripts/plot_runs.py --out "$W/panels.png" "$W/run.jsonl" 2>&1)
  grep -q '^HellaSwag' <<<"$out" && bad "a HellaSwag panel without scores" || ok "no HellaSwag panel without scores"
  # fine-tuning logs only (no perplexity evaluation): the second panel is their dev score at each evaluation
  out=$(panels scripts/plot_runs.py --out "$W/panels.png" "$W/ftm.jsonl" "$W/fts.jsonl" "$W/memonly.jsonl" 2>&1)
  grep -qx 'dev score (MRPC f1, STSB pearson)|ftm|2 4' <<<"$out" && grep -qx 'dev score (MRPC f1, STSB pearson)|fts|2 4' <<<"$out" \
    && ok "the PNG: fine-tuning logs' dev scores in the second panel (a memory-only log left out)" \
    || bad "the PNG's dev score panel: $(grep -v '^training\|^peak\|^step' <<<"$out")"
  # a run keeps its colour in every panel: the first log has no evaluation, so a panel it is missing from must not
  # shift the others' colours (they were a colour apart in the perplexity panel)
  grep -v '"eval"' "$W/run.jsonl" >"$W/noeval.jsonl"
  out=$(python3 - scripts/plot_runs.py --out "$W/colours.png" "$W/noeval.jsonl" "$W/run.jsonl" <<'PY' 2>&1
import os, runpy, sys
import matplotlib.figure
def show(fig, *a, **k):
    seen = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            seen.setdefault(line.get_label(), set()).add(line.get_color())
    print("colours " + " ".join(f"{k}:{len(v)}" for k, v in sorted(seen.items())))
matplotlib.figure.Figure.savefig = show
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
PY
)
  grep -qx 'colours noeval:1 run:1' <<<"$out" && ok "each run one colour in every panel" || bad "colours across panels: $out"
  # the legend of logs of one file name: A/metrics and B/metrics (both read "metrics")
  out=$(panels scripts/plot_runs.py --out "$W/panels.png" "$W/A/metrics.jsonl" "$W/B/metrics.jsonl" 2>&1)
  grep -q '^training loss|A/metrics|' <<<"$out" && grep -q '^training loss|B/metrics|' <<<"$out" \
    && ok "the PNG: logs of one file name, the legend A/metrics and B/metrics" || bad "the legend: $(grep '^training' <<<"$out")"
  # the loss curve as drawn, its y values and marked points ("TITLE|LABEL|x ...|y ...|marker|markevery"): a
  # non-finite loss (null, skipped or not) is a gap (NaN), --smooth's mean starts again after it, a lone finite step
  # between two gaps is marked (a line has no segment there); a padding step is left out, no gap (the line goes on)
  curves() {
    python3 - "$@" <<'PY'
import os, runpy, sys
import matplotlib.figure
def show(fig, *a, **k):
    for ax in fig.axes:
        for line in ax.get_lines():
            print(f"{ax.get_title()}|{line.get_label()}|" + " ".join(str(x) for x in line.get_xdata()) + "|" +
                  " ".join(f"{y:g}" for y in line.get_ydata()) + f"|{line.get_marker()}|{line.get_markevery()}")
matplotlib.figure.Figure.savefig = show
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
PY
  }
  printf '{"type":"step","step":%d,"loss":%s%s}\n' 1 1 '' 2 2 '' 3 null ',"skipped":true' 4 10 '' 5 null ',"padding":true' \
    6 20 '' 7 null '' 8 7 '' 9 null ',"skipped":true' >"$W/gaps.jsonl"
  out=$(curves scripts/plot_runs.py --smooth 3 --out "$W/panels.png" "$W/gaps.jsonl" 2>&1)
  grep -qx 'training loss (running mean 3)|gaps|1 2 3 4 6 7 8 9|1 1.5 nan 10 15 nan 7 nan|o|\[6\]' <<<"$out" \
    && ok "the PNG: non-finite losses are gaps, --smooth not across them, a lone step marked, padding no gap" \
    || bad "the loss curve's gaps: $(grep '^training' <<<"$out" || echo "$out")"
  out=$(curves scripts/plot_runs.py --out "$W/panels.png" "$W/run.jsonl" 2>&1)
  grep -qx 'training loss|run|1 2 3 4 5 6 7 8 9 10|5 5 5 5 5 5 5 5 5 5|None|None' <<<"$out" \
    && ok "the PNG: a loss curve without gaps is a plain line (no markers)" || bad "the plain loss curve: $(grep '^training' <<<"$out")"
  # an overflowed perplexity is a gap in the perplexity curve (the line above says so)
  out=$(curves scripts/plot_runs.py --out "$W/panels.png" "$W/pploverflow.jsonl" 2>&1)
  grep -qx 'validation perplexity|pploverflow|2 3|nan 90|o|None' <<<"$out" \
    && ok "the PNG: an overflowed perplexity is a gap" || bad "the overflowed perplexity: $(grep '^validation' <<<"$out")"
fi
# a log cut in its last record (a run killed while writing it): that record skipped, said; the others plotted
{ cat "$W/run.jsonl"; printf '{"type":"step","step":11,"lo'; } >"$W/cut.jsonl"
out=$(python3 scripts/plot_runs.py --no-plot "$W/cut.jsonl" 2>&1); rc=$?
[ $rc = 0 ] && grep -q 'cut.jsonl:12: a record cut short' <<<"$out" && grep -q '^| cut | 10 |' <<<"$out" \
  && ok "a record cut short at the end skipped: $(grep 'cut short' <<<"$out")" || bad "a cut log: exit $rc: $out"

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
refused "--labels a,a" "--labels a,a: 'a' labels more than one log" \
  python3 scripts/plot_runs.py --no-plot --labels a,a "$W/A/metrics.jsonl" "$W/B/metrics.jsonl"
refused "one log given twice without --labels" "$W/run.jsonl: given more than once" \
  python3 scripts/plot_runs.py --no-plot "$W/run.jsonl" "$W/run.jsonl"
refused "one log given twice, spelled two ways" "given more than once" \
  python3 scripts/plot_runs.py --no-plot "$W/run.jsonl" "$W/./run.jsonl"
refused "a missing log" "$W/missing.jsonl: cannot open the log" python3 scripts/plot_runs.py --no-plot "$W/missing.jsonl"
# logs written by hand or by another tool: one line naming the line and what is wrong (they were tracebacks)
echo '[1, 2]' >"$W/array.jsonl"
refused "a line that is not an object" "array.jsonl:1: not a JSON object (a list)" \
  python3 scripts/plot_runs.py --no-plot "$W/array.jsonl"
echo '{"type":"step","step":1,"loss":"x"}' >"$W/text.jsonl"
refused "a loss that is text" 'text.jsonl:1: "loss" is "x", not a number' python3 scripts/plot_runs.py --no-plot "$W/text.jsonl"
head -c 300 /bin/ls >"$W/binary.jsonl"
refused "a binary file" "binary.jsonl:1: not a JSON object" python3 scripts/plot_runs.py --no-plot "$W/binary.jsonl"
echo '{"type":"step","loss":1.5}' >"$W/nostep.jsonl"
refused "a step record without its step" 'nostep.jsonl:1: a step record without "step"' \
  python3 scripts/plot_runs.py --no-plot "$W/nostep.jsonl"
# another tool's JSON (prac_analyze --json's spectrum): not a run log, said so (it read "a step record without step")
echo '{"file":"x.npy","shape":[2,3],"singular_values":[2.0,1.0,0.5],"cumulative_energy":[0.76,0.95,1.0]}' >"$W/spectrum.json"
refused "a JSON file that is not a run log" \
  'spectrum.json:1: not a run log (the --log JSONL of train_gpt2, train_llama or finetune_roberta): a JSON object without "type" or "step" (its keys: cumulative_energy, file, shape, singular_values)' \
  python3 scripts/plot_runs.py --no-plot "$W/spectrum.json"
# prac_analyze --json files written by hand or by another tool: one line naming the field (they were tracebacks)
python3 -c 'import matplotlib' 2>/dev/null && \
for bad in '"shape":[256]' '"singular_values":null' '"ranks":{"r1":9,"r2":1,"k":1.0,"mode":"prac"}' \
           '"reshaped_from":7' '"singular_values":[0,0,0]' '"singular_values":[NaN,1.0,0.5]' \
           '"singular_values":[-2.0,-1.0,-0.5]' '"cumulative_energy":[NaN,NaN,NaN]' \
           '"cumulative_energy":[0.76,0.5,1.0]' '"cumulative_energy":[0.76,0.95,1.5]'; do
  # (a key given twice: json takes the last, the bad one)
  echo "{\"file\":\"x.npy\",\"shape\":[2,3],\"singular_values\":[2.0,1.0,0.5],\"cumulative_energy\":[0.76,0.95,1.0],$bad}" >"$W/badspec.json"
  refused "plot_spectrum.py with $bad" "cannot read .*badspec.json as prac_analyze --json output" \
    python3 scripts/plot_spectrum.py "$W/badspec.json" "$W/badspec.png"
done
out=$(python3 scripts/plot_spectrum.py --help 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q "plot_spectrum" <<<"$out" && ok "plot_spectrum.py --help exits 0" \
  || bad "plot_spectrum.py --help: exit $rc"
refused "--out in a missing directory" "the directory $W/nodir does not exist" \
  python3 scripts/plot_runs.py --out "$W/nodir/x.png" "$W/run.jsonl"
[ -e "$W/nodir" ] && bad "--out in a missing directory created it" || ok "--out's missing directory not created"
refused "a log holding only a memory record, alone" "memonly.jsonl: no step or evaluation record" \
  python3 scripts/plot_runs.py --no-plot "$W/memonly.jsonl"
refused "a glue_eval score that is text" 'gluetext.jsonl:1: "f1" is "x", not a number' \
  python3 scripts/plot_runs.py --no-plot "$W/gluetext.jsonl"
# the table to a full disk: one line and exit 1 (a traceback, and a second one at exit)
refused "the table to a full disk" "plot_runs.py: cannot write the table to the standard output: No space left on device" \
  bash -c 'exec "$@" > /dev/full' - python3 scripts/plot_runs.py --no-plot "$W/run.jsonl"
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
  # the error names OUT, not the hidden temporary it would write ($W/nodir/.spec.png.XXXX.png)
  msg=$(python3 scripts/plot_spectrum.py "$W/spec.json" "$W/nodir/spec.png" 2>&1)
  grep -q "cannot write $W/nodir/spec.png: \[Errno 2\] No such file or directory (an earlier" <<<"$msg" \
    && ok "the error names no temporary file: $msg" || bad "the error names the temporary file: $msg"
  cmp -s "$W/ok.png" "$W/ok.before" && cmp -s "$W/spec.png" "$W/spec.before" \
    && ok "a failed write leaves the earlier PNGs whole" || bad "a failed write changed an earlier PNG"
  # an earlier picture is replaced (above); another file or a pipe at --out is not (a text file named x.png was)
  echo "notes" >"$W/notes.png"; mkfifo "$W/pipe.png"
  refused "plot_runs.py over a text file" "notes.png: exists and is not a .png picture (not an earlier plot)" \
    python3 scripts/plot_runs.py --out "$W/notes.png" "$W/run.jsonl"
  [ "$(cat "$W/notes.png")" = notes ] && ok "the text file is left as it was" || bad "the text file was replaced"
  refused "plot_runs.py over a named pipe" "pipe.png: not a regular file (a pipe or a device)" \
    timeout 60 python3 scripts/plot_runs.py --out "$W/pipe.png" "$W/run.jsonl"
  [ -p "$W/pipe.png" ] && ok "the named pipe is left as it was" || bad "the named pipe was replaced"
  refused "plot_spectrum.py over a text file" "notes.png: exists and is not a .png picture" \
    python3 scripts/plot_spectrum.py "$W/spec.json" "$W/notes.png"
  rm -f "$W/notes.png" "$W/pipe.png"
  left=$(ls -A "$W" | grep '^\.' || true)
  [ -z "$left" ] && ok "a failed write leaves no temporary file" || bad "temporary files left: $left"
else
  echo "  [skip] --out format checks and the PNGs (plot_runs.py, plot_spectrum.py): matplotlib is not installed"
fi
[ "$fail" = 0 ] && echo "test_plot_runs: all passed" || echo "test_plot_runs: FAILED"
exit "$fail"
