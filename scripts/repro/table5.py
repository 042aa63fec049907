#!/usr/bin/env python3
"""Table 5 of the PRAC paper: fine-tuning RoBERTa-base on GLUE, Full FT vs RSO (rank 4) vs PRAC (r1 = r2 = 2), with
the activation memory of the MRPC runs. Appendix D: batch 16, 30 epochs, max length 512, PRAC interval 200, lr 3e-5
(CoLA, STS-B, MRPC, RTE) or 1e-5 (SST-2, MNLI, QNLI, QQP).

    python3 scripts/repro/table5.py --quick [--out runs/table5-quick]
    python3 scripts/repro/table5.py --paper --model-dir roberta-base --glue-dir glue_data [--tasks mrpc,rte]

--quick writes a tiny random RoBERTa and synthetic MRPC- and STS-B-layout tasks (scripts/repro/make_tiny_roberta.py)
and fine-tunes them on the CPU: a pipeline check; a run is killed after --run-timeout seconds (--quick: 300 unless
given; 0: never). --paper expects --glue-dir/<TASK>/ as the GLUE distribution lays it out (CoLA, SST-2, MRPC, STS-B,
QQP, MNLI, QNLI, RTE; train and dev files, .tsv or .jsonl).

--dry-run prints the commands and asks the planner (finetune_roberta --plan --json, which reads the model's
config.json alone) with each run's flags, exiting 1 when a call fails (a flag or value the trainer refuses): with
--quick against the tiny model, made in a temporary directory and removed (nothing is written under --out); with
--paper against --model-dir, or without it against a stand-in config.json of roberta-base's published shape (in a
temporary directory, removed). The GLUE files are not read in a dry run: a missing --glue-dir or task file shows
only in the real run.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

BINARY = "finetune_roberta"
TASKS = ["cola", "stsb", "mrpc", "rte", "sst2", "mnli", "qnli", "qqp"]  # the paper's column order
GLUE_DIRS = dict(cola="CoLA", stsb="STS-B", mrpc="MRPC", rte="RTE", sst2="SST-2", mnli="MNLI", qnli="QNLI", qqp="QQP")
# The metric of each column (our reading of GaLore's table, which Table 5's Full FT row copies: Matthews for CoLA,
# Pearson for STS-B, F1 for MRPC, accuracy elsewhere; MNLI: matched accuracy)
COLUMN = dict(cola="matthews", stsb="pearson", mrpc="f1", rte="accuracy", sst2="accuracy", mnli="accuracy",
              qnli="accuracy", qqp="accuracy")
METHODS = [  # label, flags
    ("Full FT", []),
    ("RSO", ["--optimizer", "rso", "--rso-rank", "4"]),
    ("PRAC", ["--prac", "prac", "--prac-linear-ranks", "2,2", "--prac-nonlinear-ranks", "2,2"]),
]
PAPER = {  # Table 5: memory (GB), then the eight scores
    "Full FT": (0.42, [62.24, 90.92, 91.30, 79.42, 94.57, 87.18, 92.33, 92.28]),
    "RSO": (0.29, [62.47, 90.62, 92.25, 78.70, 94.84, 86.67, 92.29, 90.94]),
    "PRAC": (0.26, [63.56, 90.83, 93.28, 78.71, 94.72, 86.60, 92.35, 90.95]),
}
QUICK_TASKS = ["stsb", "mrpc"]  # (in the paper's order)
QUICK_FLAGS = ["--epochs", 4, "--lr", 3e-3, "--max-len", 64, "--prac-t1", 10, "--prac-t2", 10, "--log-interval", 100]
PAPER_FLAGS = ["--epochs", 30, "--batch-size", 16, "--max-len", 512, "--prac-t1", 200, "--prac-t2", 200,
               "--log-interval", 100] + C.PAPER_STORAGE
# roberta-base's config.json as Hugging Face publishes it: a --paper dry run without --model-dir plans against it
ROBERTA_BASE_CONFIG = {
    "architectures": ["RobertaForMaskedLM"], "model_type": "roberta", "vocab_size": 50265, "hidden_size": 768,
    "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 514,
    "type_vocab_size": 1, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2, "layer_norm_eps": 1e-05,
    "hidden_act": "gelu", "initializer_range": 0.02, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
}
MAKE_TINY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "make_tiny_roberta.py")
QUICK_CAVEAT = ("a tiny random RoBERTa on synthetic MRPC/STS-B-layout tasks: checks the pipeline, not the paper's "
                "claims")


def scores(log, task):
    """(best, final) of the task's column metric over the log's glue_eval records (MNLI: dev_matched). An epoch whose
    score is undefined (null: a correlation of constant predictions) counts for no best, and as the final score when
    it is the last: None, not an earlier epoch's. A resumed run's replayed epochs count once (scripts/run_log.py), an
    --eval-only evaluation (of other weights) not at all."""
    run, _ = C.drop_replayed([rec for rec in C.records(log) if not rec.get("eval_only")])
    vals = [rec.get(COLUMN[task]) for rec in run
            if rec.get("type") == "glue_eval" and rec.get("split") in ("dev", "dev_matched")]
    defined = [v for v in vals if v is not None]
    return (max(defined) if defined else None, vals[-1]) if vals else (None, None)


def memory(log):
    return next((rec for rec in C.records(log) if rec.get("type") == "memory"), None)


def with_init_from(flags, model_dir):
    """flags with --init-from's value replaced by model_dir."""
    out = list(flags)
    i = out.index("--init-from")
    out[i + 1] = model_dir
    return out


def dry_run_plans(runs, args):
    """A dry run's check of the runs' flags: the planner with each run's flags (--plan reads config.json alone), against
    the model the dry run does not make or may not have (see the module's doc). 1 when a call failed."""
    tmp = tempfile.mkdtemp(prefix="table5_dry.") if args.quick or not args.model_dir else None
    try:
        if args.quick:
            model = os.path.join(tmp, "tiny-roberta")
            subprocess.run([sys.executable, MAKE_TINY, "--model-dir", model], check=True)
            what = "the --quick tiny model (made in a temporary directory, removed)"
        elif args.model_dir:
            model, what = os.path.abspath(args.model_dir), f"--model-dir {args.model_dir}"
        else:
            model = os.path.join(tmp, "roberta-base")
            os.makedirs(model)
            with open(os.path.join(model, "config.json"), "w") as f:
                json.dump(ROBERTA_BASE_CONFIG, f, indent=2)
            what = "a stand-in config.json of roberta-base's shape (no --model-dir given)"
        for r in runs:
            C.planner(BINARY, with_init_from(r.flags, model))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    n = len(C.PLANNER_FAILURES)
    print(f"dry run: {len(runs) - n} of {len(runs)} runs planned against {what}" +
          (f"; {n} planner call(s) failed (the messages above)" if n else "") +
          "; the GLUE files are not read in a dry run", file=sys.stderr if n else sys.stdout)
    return 1 if n else 0


def main():
    ap = C.base_parser(__doc__, pretrain=False)
    ap.add_argument("--model-dir", help="--paper: the roberta-base directory (config.json, model.safetensors, tokenizer)")
    ap.add_argument("--glue-dir", help="--paper: the GLUE data, one directory per task (MRPC/, STS-B/, ...)")
    ap.add_argument("--tasks", help="comma-separated subset of the tasks")
    args = ap.parse_args()
    C.out_dir(args, "table5")
    C.check_run_timeout(args, 300 if args.quick else 0)  # (0, given: never)
    if args.device is None:
        args.device = "cpu" if args.quick else None
    tasks = args.tasks.split(",") if args.tasks else (QUICK_TASKS if args.quick else TASKS)
    known = QUICK_TASKS if args.quick else TASKS
    for t in tasks:
        if t not in known:
            sys.exit(f"--tasks: {t!r} is not one of {', '.join(known)}" +
                     (" (the synthetic tasks of --quick)" if args.quick else
                      " (lower case, as finetune_roberta names them)"))
    if len(set(tasks)) != len(tasks):
        sys.exit(f"--tasks {args.tasks}: a task is named twice (its second run would replace the first's log)")
    tasks = sorted(tasks, key=TASKS.index)  # the paper's column order, however --tasks lists them
    if args.steps is not None and args.steps <= 0:
        sys.exit(f"--steps {args.steps}: must be at least 1")
    if args.quick:
        for flag in ("--model-dir", "--glue-dir"):  # (dropped without a word: the tiny model and tasks ran instead)
            if getattr(args, flag[2:].replace("-", "_")) is not None:
                sys.exit(f"{flag}: --quick fine-tunes a tiny RoBERTa of its own on synthetic tasks and would ignore it"
                         f"\n---> HINT: drop {flag}, or use --paper")
        model_dir, glue_dir = os.path.join(args.out, "tiny-roberta"), os.path.join(args.out, "synthetic-glue")
        if not args.dry_run:
            C.make_out(args.out)  # one line, not make_tiny_roberta's traceback, when --out cannot be a directory
            subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                         "make_tiny_roberta.py"), "--model-dir", model_dir,
                            "--data-dir", glue_dir], check=True)
        task_dir = {t: os.path.join(glue_dir, t) for t in tasks}
    else:
        if not args.dry_run and not (args.model_dir and args.glue_dir):
            sys.exit("--paper needs --model-dir (roberta-base) and --glue-dir (the GLUE tasks' directories), or --dry-run")
        model_dir, glue_dir = args.model_dir or "ROBERTA_BASE", args.glue_dir or "GLUE"
        task_dir = {t: os.path.join(glue_dir, GLUE_DIRS[t]) for t in tasks}
        if not args.dry_run:  # said now, not as a table of failed runs (finetune_roberta's own checks of them)
            def has(d, name):
                return os.path.isfile(os.path.join(d, name))
            lacks = [f for f in ("config.json", "model.safetensors") if not has(model_dir, f)]
            if not has(model_dir, "tokenizer.json") and not (has(model_dir, "vocab.json") and has(model_dir, "merges.txt")):
                lacks.append("tokenizer.json or vocab.json + merges.txt")
            if lacks:
                sys.exit(f"--model-dir {model_dir}: no {', '.join(lacks)} (a Hugging Face roberta-base directory: "
                         f"config.json, model.safetensors, vocab.json, merges.txt)")
            missing = [d for d in task_dir.values() if not os.path.isdir(d)]
            if missing:
                sys.exit(f"--glue-dir {glue_dir}: no task directory {', '.join(missing)} (GLUE's layout: "
                         f"{', '.join(GLUE_DIRS[t] for t in tasks)})")
            # each split as .tsv (GLUE's) or .jsonl; MNLI's dev sets are dev_matched and dev_mismatched
            no_split = [os.path.join(task_dir[t], split + ".tsv") for t in tasks
                        for split in ["train"] + (["dev_matched", "dev_mismatched"] if t == "mnli" else ["dev"])
                        if not has(task_dir[t], split + ".tsv") and not has(task_dir[t], split + ".jsonl")]
            if no_split:
                sys.exit(f"--glue-dir {glue_dir}: no {', '.join(no_split)} (or .jsonl)")
    runs = []
    for label, flags in METHODS:
        for t in tasks:
            f = ["--task", t, "--data-dir", os.path.abspath(task_dir[t]), "--init-from", os.path.abspath(model_dir)]
            f += flags + (QUICK_FLAGS if args.quick else PAPER_FLAGS)
            if args.steps is not None:
                f += ["--epochs", args.steps]  # a short --paper smoke test: epochs instead of steps
            runs.append(C.Run(f"{label.replace(' ', '_').lower()}_{t}", label, BINARY, f + C.common_tail(args),
                              meta=dict(task=t, method=label), plot_label=f"{label} {t.upper()}"))
    if args.quick:
        # a tiny model: one thread is fastest (OpenBLAS threads on a shared, loaded machine slowed a run 10x)
        os.environ["OMP_NUM_THREADS"] = "1"
    extra_notes = C.check_extra(runs, args)
    devices, failures = C.run_all(runs, args, outputs=("table5.md", "table5.png"))
    if args.dry_run:
        return dry_run_plans(runs, args)
    extra_notes += C.state_notes(runs, args)
    cpu = C.on_cpu(args, devices)

    by = {(r.meta["method"], r.meta["task"]): r for r in runs}
    unit, div = ("GB", 1e9) if args.paper else ("MiB", 2**20)
    mem_task = "mrpc" if "mrpc" in tasks else tasks[0]

    # the paper's AVG is of its 8 tasks: a subset's mean is labelled as one, not set beside it as the same number
    avg = "AVG" if tasks == TASKS else \
        f"AVG of {len(tasks)} task{'s' if len(tasks) != 1 else ''} (not the paper's 8)"

    def table(which):
        # activation memory, as the paper's column: the planner's figure, and on the CPU the arena the run allocated
        header = ["Method", f"Act. MEM planned ({unit})"] + (["Act. MEM, CPU arena (MiB)"] if cpu else [])
        header += [t.upper() for t in tasks] + [avg]
        rows = []
        for label, _ in METHODS:
            # a failed run's memory record (written before its first step) is not shown: "-", as its scores fail
            mem_run = by[(label, mem_task)]
            m = memory(os.path.join(args.out, mem_run.name + ".jsonl")) if mem_run.rc == 0 else None
            key = "planned_activation_bytes" if cpu else "planned_activation_bytes_cuda_bf16"
            row = [label, C.fmt_num(m[key] / div if m else None)]
            if cpu:
                row.append(C.fmt_num(m["arena_bytes"] / 2**20 if m and m.get("arena_bytes") else None))
            vals = []
            for t in tasks:
                r = by[(label, t)]
                v = scores(os.path.join(args.out, r.name + ".jsonl"), t)[which]
                if r.rc not in (None, 0):
                    row.append("failed")
                    continue
                row.append(C.fmt_num(100 * v if v is not None else None))
                if v is not None:
                    vals.append(100 * v)
            row.append(C.fmt_num(sum(vals) / len(vals) if vals and len(vals) == len(tasks) else None))
            rows.append(row)
        return C.md_table(header, rows)

    paper_header = ["Paper", "Memory (GB)"] + [t.upper() for t in TASKS] + ["AVG"]
    paper_rows = [[f"{k} (paper)", f"{mem:.2f}"] + [f"{s:.2f}" for s in v] + [f"{sum(v) / len(v):.2f}"]
                  for k, (mem, v) in PAPER.items()]
    body = ["## Best epoch (dev)", "", table(0), "", "## Final epoch (dev)", "", table(1), "",
            "## The paper's Table 5", "", C.md_table(paper_header, paper_rows)]
    png, plot_note = C.plot(runs, args, "table5", "Table 5: RoBERTa fine-tuning on GLUE")
    lines = ["# Table 5: RoBERTa fine-tuning on GLUE", ""]
    if args.quick:
        lines += [f"**--quick:** {QUICK_CAVEAT}.", ""]
    lines += [f"Machine: {'; '.join(devices) if devices else 'unknown (no device: line)'}.", "", "Commands run:", "",
              "```sh"]
    lines += [C.shell_line(r.cmd(args.out)) for r in runs]
    lines += ["```", ""] + body + [""]
    lines += [f"Scores ×100: {', '.join(f'{t.upper()} {COLUMN[t]}' for t in tasks)} (MNLI: dev_matched), the best "
              f"epoch's and the last epoch's. Act. MEM = activation bytes of the {mem_task.upper()} runs at their "
              f"(B, T), the paper's memory column: planned = the planner's figure "
              f"({'CPU fp32' if cpu else 'CUDA bf16 build'}; the run's `memory` log record, "
              f"`planned_activation_bytes{'' if cpu else '_cuda_bf16'}`: inputs, saved tensors, PRAC bases, "
              f"transients)" + ("; CPU arena = the activation arena the run allocated (`arena_bytes`), equal to the "
                                "CPU plan by construction: a check of the plan, not an independent measurement"
                                if cpu else "") +
              ". Not activation figures, so not shown: the memory record's `backend_peak_bytes` (all the backend's "
              "allocations when it is written, before the first step: weights, optimizer state, arena) and the "
              "PNG's memory panel (each step's `mem_peak_bytes`, the backend's whole peak while training). T is the "
              f"longest example of the task's train and dev data (at most --max-len). A failed run reads `failed` in "
              f"its scores, and a failed {mem_task.upper()} run `-` in its row's MEM." +
              ("" if tasks == TASKS else f" {avg}: the mean over this table's tasks only; the paper's AVG below is "
                                         f"over all 8.")]
    lines += [f"- {n}" for n in extra_notes]
    if failures:
        lines += ["", f"**{failures} run(s) failed**: see the .out files in {args.out}."]
    lines += [""] + C.plot_lines(png, plot_note, "loss and dev score curves")
    with open(os.path.join(args.out, "table5.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(body))
    print(f"wrote {os.path.join(args.out, 'table5.md')}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
