"""The replay rule of a training log, one for every reader of it: scripts/plot_runs.py and the repro tables'
summaries (scripts/repro/common.py).

A resumed run (--resume) starts again after its checkpoint's step, and the trainer appends to the log
(train/metrics_log.h): the steps the earlier process ran past that checkpoint, and their evaluations, are written
again. The log's last process is the run: from a replayed step on, the earlier process's records are superseded,
including those past where the resumed run stopped (a resume with fewer --steps, or one stopped again)."""

RULED = ("step", "eval", "glue_eval")  # the records with a place in the run's step order


def step_of(rec):
    """A record's step, or None where it has none that is a number (a log written by another tool)."""
    at = rec.get("step")
    return at if isinstance(at, (int, float)) and not isinstance(at, bool) else None


def drop_replayed(recs):
    """(the records of the run the log ends with, how many an earlier process's were dropped), from recs in the
    log's order. A step record whose step is not after the previous step record's starts a replay: the step, eval
    and glue_eval records kept so far at that step or after are dropped. Other records (finetune_roberta's memory,
    final; --eval-only evaluations, which the callers keep apart) are left where they are."""
    kept, dropped, last = [], 0, None
    for rec in recs:
        at = step_of(rec)
        if rec.get("type", "step") == "step" and at is not None:
            if last is not None and last >= at:
                def superseded(r):
                    return r.get("type", "step") in RULED and step_of(r) is not None and step_of(r) >= at
                before = len(kept)
                kept = [r for r in kept if not superseded(r)]
                dropped += before - len(kept)
            last = at
        kept.append(rec)
    return kept, dropped
