"""How a training log is read, one rule for every reader of it (scripts/plot_runs.py and the repro tables'
summaries, scripts/repro/common.py): its records checked (read_records), the replay rule (drop_replayed), and the
final train loss (train_loss: which steps' losses count, and how a non-finite one shows).

A resumed run (--resume) starts again after its checkpoint's step, and the trainer appends to the log
(train/metrics_log.h): the steps the earlier process ran past that checkpoint, and their evaluations, are written
again. The log's last process is the run: from a replayed step on, the earlier process's records are superseded,
including those past where the resumed run stopped (a resume with fewer --steps, or one stopped again)."""

import json
import math
import sys

RULED = ("step", "eval", "glue_eval")  # the records with a place in the run's step order
NUMBERS = ("step", "loss", "lr", "grad_norm", "tokens_per_s", "ms_per_step", "mem_peak_bytes", "val_loss", "val_ppl",
           "val_tokens")
GLUE_SCORES = ("matthews", "pearson", "spearman", "f1", "accuracy")


class LogError(ValueError):
    """A line of a log that is not a record as the trainers write them; the message names the file and line (each
    caller says it in its own words and exits: plot_runs.py, scripts/repro/common.py)."""


def is_number(v):
    """A JSON number (not true or false, which Python counts as ints)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_record(rec, path, n):
    """A record as the trainers write them (train/metrics_log.h), or LogError saying in one line what is not (a log
    written by hand or by another tool would read as a traceback)."""
    if not isinstance(rec, dict):
        raise LogError(f"{path}:{n}: not a JSON object (a {type(rec).__name__})")
    for key in NUMBERS:
        v = rec.get(key)
        if v is not None and not is_number(v):
            raise LogError(f"{path}:{n}: \"{key}\" is {json.dumps(v)}, not a number")
    for key in GLUE_SCORES:
        v = rec.get(key)
        if rec.get("type") == "glue_eval" and v is not None and not is_number(v):
            raise LogError(f"{path}:{n}: \"{key}\" is {json.dumps(v)}, not a number")
    for key in ("skipped", "eval_only"):
        if key in rec and not isinstance(rec[key], bool):
            raise LogError(f"{path}:{n}: \"{key}\" is {json.dumps(rec[key])}, not true or false")
    if "type" not in rec and "step" not in rec:
        # another tool's JSON (prac_analyze --json's spectrum, a config): said as such, not as a damaged step record
        keys = ", ".join(sorted(rec)[:6]) + (", ..." if len(rec) > 6 else "")
        raise LogError(f"{path}:{n}: not a run log (the --log JSONL of train_gpt2, train_llama or finetune_roberta): "
                       f"a JSON object without \"type\" or \"step\"" + (f" (its keys: {keys})" if rec else " ({})"))
    if rec.get("type", "step") in RULED and rec.get("step") is None:
        raise LogError(f"{path}:{n}: a {rec.get('type', 'step')} record without \"step\"")


def read_records(path, warn=True):
    """[(line number, record)] of a log, in order. A last line without its newline that does not parse was cut by a
    kill mid-write (a resume drops it too): skipped, with a line on stderr when warn. Any other line that is not a
    record as the trainers write them raises LogError naming it (check_record): a table or plot of a damaged log would
    read as a result. OSError when the file cannot be read."""
    with open(path, errors="replace") as f:  # a binary file: its lines fail to parse below, one line of error
        lines = f.read().split("\n")
    out = []
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            if n == len(lines):
                if warn:
                    print(f"{path}:{n}: a record cut short (a run killed while writing it): skipped", file=sys.stderr)
                continue
            raise LogError(f"{path}:{n}: not a JSON object ({e})")
        check_record(rec, path, n)
        out.append((n, rec))
    return out


def step_of(rec):
    """A record's step, or None where it has none that is a number (a log written by another tool)."""
    at = rec.get("step")
    return at if is_number(at) else None


def drop_replayed(recs):
    """(the records of the run the log ends with, how many an earlier process's were dropped), from recs in the
    log's order. A step record whose step is not after the previous step record's starts a replay: the step, eval
    and glue_eval records kept so far at that step or after are dropped. An evaluation that repeats one kept at the
    same step (same type and split) replaces it: a checkpoint written at a step whose evaluation then ran (the last
    step of a fine-tuning epoch) is resumed with that evaluation run again and no step replayed before it. Other
    records (finetune_roberta's memory, final; --eval-only evaluations, which the callers keep apart) are left where
    they are."""
    kept, dropped, last = [], 0, None
    for rec in recs:
        at = step_of(rec)
        kind = rec.get("type", "step")
        if kind in ("eval", "glue_eval") and at is not None:
            def same_evaluation(r):
                return r.get("type", "step") == kind and step_of(r) == at and r.get("split") == rec.get("split")
            before = len(kept)
            kept = [r for r in kept if not same_evaluation(r)]
            dropped += before - len(kept)
        if kind == "step" and at is not None:
            if last is not None and last >= at:
                def superseded(r):
                    return r.get("type", "step") in RULED and step_of(r) is not None and step_of(r) >= at
                before = len(kept)
                kept = [r for r in kept if not superseded(r)]
                dropped += before - len(kept)
            last = at
        kept.append(rec)
    return kept, dropped


def finite(x):
    return x is not None and math.isfinite(x)


def skipped(s):
    """A step whose update the trainer did not apply: "skipped":true (--on-nonfinite skip), or a null (non-finite)
    gradient norm, which it never applies (it skips the step, or logs it and stops)."""
    return s.get("skipped") is True or ("grad_norm" in s and s["grad_norm"] is None)


def train_loss(steps):
    """(mean loss of the last 10 step records, how many step records of the run have a non-finite loss), None for
    the mean where no step has a loss. The trainer writes a NaN or infinite loss as null (train/metrics_log.h): a null
    counts as NaN here, so a run that diverged shows nan, not the mean of the finite steps before its divergence. A
    skipped step's null is left out: its update was not applied, so the weights after it are those before (nan when
    nothing of the last 10 is left); the count says it was there. A step of padding alone ("padding":true, its loss
    null: no batch, no update) is no loss at all: left out, and not counted as non-finite."""
    losses = [(s["loss"], skipped(s)) for s in steps if "loss" in s and s.get("padding") is not True]
    bad = sum(not finite(x) for x, _ in losses)
    tail = [x if finite(x) else math.nan for x, skip in losses[-10:] if finite(x) or not skip]
    return (sum(tail) / len(tail) if tail else math.nan if losses else None), bad
