#!/usr/bin/env python3
"""Plots one or several JSONL metrics logs (train_gpt2 / train_llama / finetune_roberta --log FILE) and prints a
markdown summary.

    python3 scripts/plot_runs.py run_a.jsonl run_b.jsonl [--labels a,b] [--out runs.png] [--smooth 10]
                                 [--skip N] [--no-plot]

The PNG has five panels: training loss (optionally smoothed with a running mean), validation perplexity at each
evaluation, peak memory of the backend's own allocations, each step's time (where PRAC's basis refreshes show as
spikes), and the learning rate of each step (--lr-schedule's shape: warmup, then cosine, linear, constant or wsd's
stable phase and cooldown); a sixth, HellaSwag's acc_norm at each evaluation, where a log has it (--hellaswag), and
after the table one line per such run with its last evaluation's acc_norm, acc and examples. The markdown table lists per run: steps, final train loss (mean of the last 10 steps), final
validation loss and perplexity, tokens/s, peak memory ("-" when no record has it), the median step time and the
slowest step against it (issue #15's goal: no step above 1.2x the median), each process's first step
("startup":true in the log: a run's first, a resume's first; it carries one-time set-up: allocations, plans, graph
builds) and the first --skip steps left out of tokens/s and those two. tokens/s is the steps' tokens (tokens_per_s x ms_per_step
/ 1000) over their time, records lacking either left out ("-" when none): a mean of per-step rates would overstate
it (a slow step weighs by its time). The trainer logs a non-finite loss as null and leaves that step's update out
("skipped":true: --on-nonfinite stop, the default, ends the run there, skip goes on; a null gradient norm is never
applied either): the train loss cell counts both, "(N non-finite steps, N skipped steps)", and a line after the
table names the run and its first such step. A skipped step's finite loss still counts in the mean (it was
measured; only the update was left out), its null loss does not (the weights after it are those before; nan when
all of the last 10 are such), so a run stopped at its first non-finite loss reads as the mean of the steps before
it with those counts beside it. A null loss on a step not marked skipped (a log of an older trainer) counts as NaN:
the cell reads "nan (N non-finite steps)"; a null final val loss reads "nan". A step of padding alone ("padding":true,
its loss null: no update, nothing to score) is no loss at all: left out, and counted as "N padding steps"; this
mean is scripts/run_log.py's train_loss, the repro tables' too. On the loss curve a non-finite loss, skipped or not,
is a gap (the line is not drawn across it, and --smooth's running mean starts again after it), a finite step between
two gaps a marker; a skipped step's finite loss is drawn; a padding step is left out and is no gap (no update: the
line goes on across it). An evaluation with a finite val loss but a null val_ppl (exp overflowed: inf in the table)
is a gap in the perplexity curve and gets a line after the table: "LABEL: N evaluation(s) with a finite val loss but
a perplexity past a double's range ...". Then one line per run for scripts: "RESULT step_time
run=LABEL steps=N median_ms=... worst_ms=... worst_step=S worst_over_median=..." (N: the steps timed, as the median's). Needs matplotlib for the PNG
(pip install matplotlib); --no-plot: the table only. --out's directory must exist; its extension picks the format
(.png, .pdf, .svg, ... as matplotlib writes them).

A run's label (its table row, RESULT line and legend entry) is its log's file name without the extension; logs of one
name (runs/A/metrics.jsonl and runs/B/metrics.jsonl, each run's --log metrics.jsonl) get as many of their folders as
tell them apart (A/metrics, B/metrics). --labels a,b gives them instead, one per log, all different (a label given
twice is refused, as is a log given twice without --labels). A JSON file that is not a run log (an object without
"type" or "step": prac_analyze --json's output) is refused with a line saying so.

Fine-tuning logs (finetune_roberta): their glue_eval records' dev score is the metric of the task's column in the PRAC
paper's Table 5 (scripts/repro/table5.py's COLUMN: Matthews for CoLA, Pearson for STS-B, F1 for MRPC, accuracy
elsewhere), on the dev split (MNLI: dev_matched). When no log has a perplexity evaluation, the second panel plots
that score at each evaluation instead ("dev score (MRPC f1, STSB pearson)"; a null, undefined, score is a gap), and
each such run gets a line after the table: "LABEL: GLUE TASK SPLIT METRIC: final X (step S, epoch E), best Y (step
S, epoch E) over N evaluation(s)". Their memory and final records are not plotted. A log with no step or evaluation
record at all (a fine-tuning run killed before its first step holds only its memory record) is left out of the
table and the plot, with a line after the table saying so; when no log has one, the script stops with that.

A log that a run killed and restarted with --resume appended to holds the steps after the checkpoint twice (the
trainer appends; the resumed run logs them again): where the step records' numbers go back, the resumed run's
records replace the earlier run's step, eval and glue_eval records of that step and after, so every step counts once (the
last record of each), and the table is followed by a line saying how many replayed records were dropped.

An --eval-only evaluation appended to a training log (the same --log; its record has "eval_only":true, at step 0;
finetune_roberta's glue_eval records too) is of loaded weights, not of the run at a step: it stays off the curves
and out of the final val loss, ppl and dev score, never drops or is dropped as a replay, and gets a line after the
table: "LABEL: --eval-only evaluation (line N of the log): val loss X, ppl Y over T tokens" (or "GLUE TASK SPLIT
METRIC X"). A log holding only such records (an --eval-only run with its own --log) has them as its evaluations:
the table's val loss and ppl are the last one's, the curve has them at step 0 (and each still gets its line).
"""
import argparse
import errno
import math
import os
import signal
import sys

from save_figure import other_file_at, save_figure  # scripts/save_figure.py
# scripts/run_log.py: how a log is read, and the final train loss, one rule for this table and the repro tables'
from run_log import GLUE_SCORES, LogError, drop_replayed, finite, read_records, skipped, train_loss


# the dev score of a fine-tuning log's glue_eval records: the metric of the task's column in Table 5 (as
# scripts/repro/table5.py's COLUMN: Matthews for CoLA, Pearson for STS-B, F1 for MRPC, accuracy elsewhere), on the dev
# split (MNLI: dev_matched)
GLUE_METRIC = dict(cola="matthews", stsb="pearson", mrpc="f1", rte="accuracy", sst2="accuracy", mnli="accuracy",
                   qnli="accuracy", qqp="accuracy")
DEV_SPLITS = ("dev", "dev_matched")


def load(path):
    """(step records, eval records, (line, --eval-only eval record)s, dev glue_eval records, replayed records dropped)
    of one log; all empty for a log with none of them (main leaves it out, or stops when no log has any)."""
    ruled, evalonly = [], []  # the step, eval and dev glue_eval records in the log's order; --eval-only evaluations
    try:
        lines = read_records(path)  # checked, a record cut short by a kill skipped (run_log.py)
    except OSError as e:
        sys.exit(f"{path}: cannot open the log: {e.strerror}")
    except LogError as e:
        sys.exit(str(e))
    for n, rec in lines:
        if rec.get("eval_only") and (rec.get("type") == "eval" or
                                     (rec.get("type") == "glue_eval" and rec.get("split") in DEV_SPLITS)):
            evalonly.append((n, rec))  # kept apart: of loaded weights, not of this run's step 0 (no replay)
        elif rec.get("type", "step") in ("step", "eval") or \
                (rec.get("type") == "glue_eval" and rec.get("split") in DEV_SPLITS):
            ruled.append(rec)  # (MNLI's dev_mismatched is not the column's; memory and final records skipped)
    ruled, dropped = drop_replayed(ruled)  # a resumed run's records replace the earlier process's (run_log.py)

    def of(kind):
        return [r for r in ruled if r.get("type", "step") == kind]
    return of("step"), of("eval"), evalonly, of("glue_eval"), dropped


def plot_formats():
    """The --out extensions matplotlib writes, or None without matplotlib (main says so after the table)."""
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        return None
    return sorted(FigureCanvasBase.get_supported_filetypes())


def run_styles(n, colours):
    """(colour, line style) of each of n runs, all distinct up to 4x the colours (Table 5's 24 runs, Table 2's 20):
    the colours first, then again dashed, dotted, dash-dotted."""
    dashes = ["-", "--", ":", "-."]
    return [(colours[i % len(colours)], dashes[(i // len(colours)) % len(dashes)]) for i in range(n)]


def running_mean(xs, k):
    """The mean of each x and the up to k - 1 before it, none from before a gap: a NaN (a non-finite loss) stays NaN
    and starts the window again, so a mean never joins the steps either side of a divergence."""
    out, acc = [], []
    for x in xs:
        if math.isnan(x):
            acc = []
            out.append(math.nan)
            continue
        acc.append(x)
        if len(acc) > k:
            acc.pop(0)
        out.append(sum(acc) / len(acc))
    return out


def lone_points(ys):
    """The indices of the finite ys with no finite neighbour (a NaN or the end each side): a line has no segment
    there, so they need a marker to be seen (one step between two non-finite ones, a one-step run)."""
    def gap(i):
        return i < 0 or i >= len(ys) or math.isnan(ys[i])
    return [i for i in range(len(ys)) if not gap(i) and gap(i - 1) and gap(i + 1)]


def draw(a, xs, ys, **style):
    """A run's line on the panel a, its lone points (lone_points) marked: a line of one point is not drawn."""
    lone = lone_points(ys)
    a.plot(xs, ys, **style, **(dict(marker="o", markersize=3, markevery=lone) if lone else {}))


def default_labels(paths):
    """Each log's file name without its extension; logs of one name (runs/A/metrics.jsonl, runs/B/metrics.jsonl:
    the README's --log metrics.jsonl) get as many of their folders as tell them apart (A/metrics, B/metrics), and
    those that no folder tells apart (a.jsonl and a.json) the paths as given. The same log named twice: None."""
    whole = [os.path.normpath(os.path.abspath(p)) for p in paths]
    if len(set(whole)) < len(whole):  # (a.jsonl and ./a.jsonl too)
        return None
    parts = [w.split(os.sep) for w in whole]
    parts = [x[:-1] + [os.path.splitext(x[-1])[0]] for x in parts]
    depth = [1] * len(paths)
    while True:
        labels = ["/".join(x[-d:]).lstrip("/") for x, d in zip(parts, depth)]
        clash = [i for i, l in enumerate(labels) if labels.count(l) > 1]
        longer = [i for i in clash if depth[i] < len(parts[i])]
        if not longer:
            break
        for i in longer:
            depth[i] += 1
    labels = [p if i in clash else l for i, (l, p) in enumerate(zip(labels, paths))]
    return labels if len(set(labels)) == len(labels) else None


def num(x, fmt):
    """x formatted; "-" for no value; nan / inf for a non-finite one (a diverged run), never "-" or a number; in
    scientific notation from 1e7 up (a diverged run's perplexity of exp(600) printed 261 digits)."""
    if x is None:
        return "-"
    if not math.isfinite(x):
        return str(x)
    return f"{x:.3e}" if abs(x) >= 1e7 else fmt.format(x)


def val(e):
    """(val loss, val ppl) of an eval record: a null val_loss is a non-finite loss (nan); a null val_ppl with a finite
    loss is exp's overflow (inf); an absent one None ("-")."""
    vl = math.nan if "val_loss" in e and e["val_loss"] is None else e.get("val_loss")
    ppl = e.get("val_ppl")
    if "val_ppl" in e and ppl is None:
        ppl = math.inf if finite(vl) else math.nan
    return vl, ppl


def glue_metric(rec):
    """The metric of a glue_eval record's task column (accuracy for a task not named)."""
    return GLUE_METRIC.get(rec.get("task"), "accuracy")


def dev_score(rec):
    """The dev score of a glue_eval record: its task's metric, NaN where null (a correlation of constant
    predictions is undefined) or missing."""
    v = rec.get(glue_metric(rec))
    return math.nan if v is None else v


def glue_line(label, glue):
    """A fine-tuning run's line after the table: its final and best dev score, with their steps and epochs."""
    last = glue[-1]
    task, metric = last.get("task", "?"), glue_metric(last)

    def at(r):
        return f"step {r['step']}" + (f", epoch {r['epoch']}" if r.get("epoch") is not None else "")
    defined = [r for r in glue if finite(dev_score(r))]
    best = max(defined, key=dev_score) if defined else None
    final = f"{dev_score(last):.4f}" if finite(dev_score(last)) else "undefined (null)"
    return (f"{label}: GLUE {task} {last.get('split')} {metric}: final {final} ({at(last)}), best " +
            (f"{dev_score(best):.4f} ({at(best)})" if best else "-") + f" over {len(glue)} evaluation(s)")


def timed_steps(steps, skip):
    """The step records that timings count: those after the first `skip`, less each process's first step
    ("startup":true: a run's first, a resume's first), which carries one-time set-up."""
    return [s for s in steps[skip:] if not s.get("startup")]


def throughput(steps, skip):
    """tokens/s over the timed steps: their tokens (tokens_per_s x ms_per_step / 1000) over their time, so a slow
    step weighs by its time (a mean of per-step rates overstates it); None without both."""
    timed = [(s["tokens_per_s"], s["ms_per_step"]) for s in timed_steps(steps, skip)
             if s.get("tokens_per_s") is not None and s.get("ms_per_step") is not None]
    ms = sum(t for _, t in timed)
    return sum(r * t for r, t in timed) / ms if ms > 0 else None


def step_times(steps, skip):
    """(median ms, slowest ms, its step, how many steps) over the timed steps; None without times."""
    timed = [(s["ms_per_step"], s["step"]) for s in timed_steps(steps, skip) if s.get("ms_per_step") is not None]
    if not timed:
        return None
    ms = sorted(t for t, _ in timed)
    n = len(ms)
    median = ms[n // 2] if n % 2 else (ms[n // 2 - 1] + ms[n // 2]) / 2
    worst, at = max(timed)
    return median, worst, at, n


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # (| head: end quietly, not with a BrokenPipeError traceback)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--labels", help="comma-separated labels, one per log, all different (default: the file names "
                    "without extension; logs of one name with their folders: A/metrics, B/metrics)")
    ap.add_argument("--out", default="runs.png", help="output PNG")
    ap.add_argument("--smooth", type=int, default=1, help="running mean over this many steps for the loss curve")
    ap.add_argument("--title", default="")
    ap.add_argument("--skip", type=int, default=0, help="leading steps left out of tokens/s and the step times "
                    "(besides each process's first, \"startup\":true, always left out)")
    ap.add_argument("--no-plot", action="store_true", help="print the table only (no matplotlib needed)")
    args = ap.parse_args()
    if args.skip < 0:
        sys.exit("--skip must be 0 or more")
    if args.smooth < 1:
        sys.exit("--smooth must be 1 or more (1: no smoothing)")
    if not args.no_plot:
        ext = os.path.splitext(args.out)[1].lstrip(".").lower()
        formats = plot_formats()
        if formats is not None and ext not in formats:
            sys.exit(f"--out {args.out}: " + (f"unsupported format .{ext}" if ext else "no extension") +
                     f"; supported: {', '.join('.' + x for x in formats)}")
        d = os.path.dirname(args.out)
        if d and not os.path.isdir(d):
            sys.exit(f"--out {args.out}: the directory {d} does not exist (create it first)")
        other = other_file_at(args.out)
        if other:
            sys.exit(f"--out {args.out}: {other}")
    # a label names a run in the table, its RESULT line and the legend: two runs of one label read as one
    labels = args.labels.split(",") if args.labels else default_labels(args.logs)
    if labels is None:
        whole = [os.path.normpath(os.path.abspath(p)) for p in args.logs]
        twice = sorted({p for p, w in zip(args.logs, whole) if whole.count(w) > 1})
        sys.exit(f"{', '.join(twice)}: given more than once (to plot it twice, give --labels a label for each)")
    if len(labels) != len(args.logs):
        sys.exit("--labels must name every log")
    twice = sorted({l for l in labels if labels.count(l) > 1})
    if twice:
        sys.exit(f"--labels {args.labels}: {', '.join(repr(l) for l in twice)} labels more than one log (the table's "
                 f"rows, RESULT lines and the legend would not tell those runs apart): give each log its own label")
    loaded, empty = [], []
    for label, p in zip(labels, args.logs):
        steps, evals, evalonly, glue, dropped = load(p)
        if steps or evals or evalonly or glue:
            loaded.append((label, steps, evals, evalonly, glue, dropped))
        else:  # e.g. a fine-tuning run killed before its first step: only its memory record
            empty.append((label, p))
    if not loaded:
        sys.exit("; ".join(f"{p}: no step or evaluation record" for _, p in empty))
    # a log of --eval-only records only (an --eval-only run's own --log): they are its evaluations
    runs = [(label, steps, evals, glue) if steps or evals or glue else
            (label, steps, [e for _, e in evalonly if e.get("type") == "eval"],
             [e for _, e in evalonly if e.get("type") == "glue_eval"])
            for label, steps, evals, evalonly, glue, _ in loaded]

    print("| run | steps | train loss (last 10) | val loss | val ppl | tokens/s | peak memory (MiB) | median ms/step | "
          "slowest step |")
    print("|---|---|---|---|---|---|---|---|---|")
    results, diverged = [], []
    for label, steps, evals, _ in runs:
        loss, bad = train_loss(steps)
        vl, ppl = val(evals[-1] if evals else {})  # no eval record: "-"
        skips = [s.get("step") for s in steps if skipped(s)]
        # records without memory data (older logs, other writers) count for nothing: none at all shows "-", not 0
        mems = [s["mem_peak_bytes"] for s in steps if s.get("mem_peak_bytes") is not None]
        st = step_times(steps, args.skip)
        slowest = f"{st[1]:.2f} ms at step {st[2]} ({st[1] / st[0]:.2f}x)" if st and st[0] > 0 else "-"
        pads = sum(s.get("padding") is True for s in steps)
        notes = ([f"{bad} non-finite step{'s' if bad != 1 else ''}"] if bad else []) + \
                ([f"{len(skips)} skipped step{'s' if len(skips) != 1 else ''}"] if skips else []) + \
                ([f"{pads} padding step{'s' if pads != 1 else ''}"] if pads else [])
        print(f"| {label} | {len(steps)} | {num(loss, '{:.4f}')}{' (' + ', '.join(notes) + ')' if notes else ''} | "
              f"{num(vl, '{:.4f}')} | {num(ppl, '{:.2f}')} | {num(throughput(steps, args.skip), '{:.0f}')} | "
              f"{num(max(mems) / 2**20 if mems else None, '{:.1f}')} | "
              f"{num(st[0] if st else None, '{:.2f}')} | {slowest} |")
        if bad or skips or (vl is not None and not finite(vl)):
            first = next((s.get("step") for s in steps
                          if "loss" in s and not finite(s["loss"]) and s.get("padding") is not True), None)
            diverged.append(f"{label}: non-finite values (diverged?): " +
                            (f"{bad} step(s) with a non-finite loss, the first at step {first}" if bad else
                             "no step with a non-finite loss") +
                            (f"; {len(skips)} skipped step(s) (non-finite loss or gradient norm: update not applied), "
                             f"the first at step {skips[0]}" if skips else "") +
                            ("; the final eval's val_loss is non-finite" if vl is not None and not finite(vl) else ""))
        if st and st[0] > 0:
            results.append(f"RESULT step_time run={label.replace(' ', '_')} steps={st[3]} "
                           f"median_ms={st[0]:.3f} worst_ms={st[1]:.3f} worst_step={st[2]} "
                           f"worst_over_median={st[1] / st[0]:.3f}")
    for label, p in empty:
        print(f"{label}: {p} has no step or evaluation record: left out of the table and the plot")
    for label, _, _, glue in runs:
        if glue:
            print(glue_line(label, glue))
    for label, _, _, evalonly, _, dropped in loaded:
        if dropped:
            print(f"{label}: {dropped} replayed record(s) dropped (the log holds a resumed run's repeated steps; "
                  f"the last record of each step is kept)")
        for n, e in evalonly:
            if e.get("type") == "glue_eval":
                score = f"{dev_score(e):.4f}" if finite(dev_score(e)) else "undefined (null)"
                print(f"{label}: --eval-only evaluation (line {n} of the log): GLUE {e.get('task', '?')} "
                      f"{e.get('split')} {glue_metric(e)} {score}")
                continue
            vl, ppl = val(e)
            tokens = f" over {e['val_tokens']} tokens" if e.get("val_tokens") is not None else ""
            hs = (f"; HellaSwag acc_norm {num(e.get('hellaswag_acc_norm'), '{:.4f}')} over {e['hellaswag_examples']} "
                  f"examples" if e.get("hellaswag_examples") else "")
            print(f"{label}: --eval-only evaluation (line {n} of the log): val loss {num(vl, '{:.4f}')}, "
                  f"ppl {num(ppl, '{:.2f}')}{tokens}{hs}")
    for label, _, evals, _ in runs:  # --hellaswag: the last evaluation's score
        hs = [e for e in evals if e.get("hellaswag_examples")]
        if hs:
            e = hs[-1]
            print(f"{label}: HellaSwag acc_norm {num(e.get('hellaswag_acc_norm'), '{:.4f}')} (acc "
                  f"{num(e.get('hellaswag_acc'), '{:.4f}')}, {e['hellaswag_examples']} examples) at step {e['step']}")
    for line in diverged:
        print(line)
    for label, _, evals, _ in runs:
        # a null val_ppl of a finite val_loss: exp's overflow (past ~709.78 nats), no point on the perplexity curve
        # (a gap there, as a non-finite loss is), so it is said here; the table's last one reads inf
        over = [e for e in evals if "val_ppl" in e and e["val_ppl"] is None and finite(e.get("val_loss"))]
        if over:
            print(f"{label}: {len(over)} evaluation(s) with a finite val loss but a perplexity past a double's range "
                  f"(val_ppl null: exp(val_loss) overflows), the first at step {over[0].get('step')} (val loss "
                  f"{num(over[0]['val_loss'], '{:.4f}')}): inf in the table, a gap in the perplexity curve")
    for line in results:
        print(line)
    if args.no_plot:
        return

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("matplotlib is not installed: pip install matplotlib")
    # a sixth panel where an evaluation scored --hellaswag (llm.c's curve: acc_norm over the steps)
    hellaswag = any(e.get("hellaswag_examples") for _, _, evals, _ in runs for e in evals)
    fig, ax = plt.subplots(1, 6 if hellaswag else 5, figsize=(30 if hellaswag else 25, 4.2))
    # the second panel: validation perplexity; fine-tuning logs (no perplexity evaluation in any log): the dev score
    scores = not any(evals for _, _, evals, _ in runs) and any(glue for _, _, _, glue in runs)
    styles = run_styles(len(runs), plt.rcParams["axes.prop_cycle"].by_key()["color"])
    for (label, steps, evals, glue), (c, ls) in zip(runs, styles):  # a run's style in every panel
        # a non-finite loss (null; skipped or not) is NaN: a gap in the line, which --smooth's mean does not cross
        # (a line drawn across it read as a run that went on training). A padding step ("padding":true, its loss
        # null: no batch, no update, the weights those of the step before) is no loss and no gap: left out, as in
        # the table's mean, the line going on across it. A skipped step's finite loss was measured: drawn.
        lossy = [s for s in steps if "loss" in s and s.get("padding") is not True]
        ys = running_mean([s["loss"] if finite(s["loss"]) else math.nan for s in lossy], args.smooth)
        draw(ax[0], [s["step"] for s in lossy], ys, label=label, linewidth=1.2, color=c, linestyle=ls)
        if scores and glue:  # a null (undefined) score is a gap
            ax[1].plot([g["step"] for g in glue], [dev_score(g) for g in glue], marker="o", label=label, color=c, linestyle=ls)
        elif evals:  # a null (non-finite) perplexity is a gap, as the non-finite losses are
            ax[1].plot([e["step"] for e in evals], [e["val_ppl"] if finite(e.get("val_ppl")) else math.nan
                                                    for e in evals], marker="o", label=label, color=c, linestyle=ls)
        mem = [s for s in steps if s.get("mem_peak_bytes") is not None]
        draw(ax[2], [s["step"] for s in mem], [s["mem_peak_bytes"] / 2**20 for s in mem], label=label, color=c,
             linestyle=ls)
        timed = [s for s in steps if s.get("ms_per_step") is not None]
        draw(ax[3], [s["step"] for s in timed], [s["ms_per_step"] for s in timed], label=label, linewidth=0.8,
             color=c, linestyle=ls)
        rated = [s for s in steps if finite(s.get("lr"))]
        draw(ax[4], [s["step"] for s in rated], [s["lr"] for s in rated], label=label, color=c, linestyle=ls)
        hs = [e for e in evals if e.get("hellaswag_examples")]
        if hellaswag and hs:
            ax[5].plot([e["step"] for e in hs], [e["hellaswag_acc_norm"] if finite(e.get("hellaswag_acc_norm"))
                                                 else math.nan for e in hs], marker="o", label=label, color=c,
                       linestyle=ls)
    ax[0].set(title="training loss" + (f" (running mean {args.smooth})" if args.smooth > 1 else ""), xlabel="step",
              ylabel="loss (nats)")
    if scores:
        tasks = {}
        for _, _, _, glue in runs:
            for g in glue:
                tasks.setdefault(g.get("task", "?"), glue_metric(g))
        ax[1].set(title="dev score (" + ", ".join(f"{t.upper()} {m}" for t, m in tasks.items()) + ")", xlabel="step",
                  ylabel="score")
    else:
        ax[1].set(title="validation perplexity", xlabel="step", ylabel="perplexity", yscale="log")
    ax[2].set(title="peak memory (backend allocations)", xlabel="step", ylabel="MiB")
    ax[3].set(title="step time (refreshes show as spikes)", xlabel="step", ylabel="ms")
    ax[4].set(title="learning rate", xlabel="step", ylabel="lr")
    if hellaswag:
        ax[5].axhline(0.25, color="gray", linewidth=0.8, linestyle=":")  # chance: one of HellaSwag's 4 endings
        ax[5].set(title="HellaSwag acc_norm (chance 0.25)", xlabel="step", ylabel="accuracy")
        lo, hi = ax[5].get_ylim()
        ax[5].set_ylim(min(lo, 0.2), max(hi, 0.3))  # (the chance line in sight)
    from matplotlib.ticker import MaxNLocator  # (matplotlib is there: plot_formats found it)
    for a in ax:
        a.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole (a short run's axis read 2.5, 7.5)
        a.grid(alpha=0.3)
        if a.get_legend_handles_labels()[0]:  # (a panel no run has data for: no legend, and no matplotlib warning)
            a.legend()
        else:
            a.text(0.5, 0.5, "no records", transform=a.transAxes, ha="center", va="center", color="gray")
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    try:
        save_figure(fig, args.out, dpi=110)
    except OSError as e:
        sys.exit(f"plot_runs.py: cannot write {args.out}: {e} (an earlier file of that name is left as it was)")
    print(f"\nwrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    try:
        main()
        sys.stdout.flush()
    except OSError as e:
        if e.filename is not None or e.errno not in (errno.ENOSPC, errno.EPIPE, errno.EIO, errno.EFBIG, errno.EDQUOT):
            raise
        # the table to a full disk or a closed pipe: one line, not a traceback (and no second failure at exit)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(f"plot_runs.py: cannot write the table to the standard output: {e.strerror}")
