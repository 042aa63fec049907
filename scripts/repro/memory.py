#!/usr/bin/env python3
"""Memory beyond the paper (issue 16): what each saving buys in the planner, and what it costs in validation loss.

1. The planner table (no GPU needed: `--plan --json`): the paper's Table 2 sizes (LLaMA 130M / 350M / 1B at 128 x 256,
   GPT-2 124M at 64 x 1024, 355M at 32 x 1024), CUDA bf16 plans, rows
     Baseline                 --prac none, O stored
     Baseline + exact         --prac none --recompute-attention 1   (exact savings: the same gradients, bit for bit)
     PRAC (paper)             --prac prac --prac-storage act --recompute-attention 0   (the paper's storage)
     PRAC + all               --prac prac --prac-storage fp8 --recompute-attention 1
     PRAC + all + 8-bit Adam  ... --optimizer-states 8bit              (an optimizer approximation)
   with each total's ratio to both baselines. (LLaMA's gate and up sites are always separate and PRAC's transient
   buffers always live in backward scratch: those two savings are in every PRAC row.)
2. The loss evidence (unless --plan-only): llama-mini and gpt2-mini trained on the built-in corpus with the
   Baseline, PRAC (paper) and PRAC + all, over --seeds seeds each; final validation loss mean +- sample std.

Writes (under --out, default runs/memory, --quick runs/memory-quick):
  --plan-only  memory_plan.md: the planner's commands and table (its own name, so that it never replaces a full run's
               memory.md, which has the same table);
  otherwise    memory.md: the machine, the planner's commands, the loss runs' commands, both tables; memory.png: the
               loss runs' curves (scripts/plot_runs.py; skipped, with the reason in memory.md, without matplotlib);
               per run RUN.jsonl (--log) and RUN.out (its output).
--dry-run writes nothing: it prints the planner's table and the loss runs' commands, and exits 1 when a planner call
for the loss runs' flags failed (a flag or value the trainer refuses).

    python3 scripts/repro/memory.py --plan-only
    python3 scripts/repro/memory.py --out runs/memory          # 3 seeds x 3 methods x 2 models: 18 CPU runs
    python3 scripts/repro/memory.py --quick                                        # pipeline check: tiny, 1 seed
"""
import argparse
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

SIZES = [("train_llama", "llama-130m", 128, 256), ("train_llama", "llama-350m", 128, 256),
         ("train_llama", "llama-1b", 128, 256), ("train_gpt2", "gpt2-124m", 64, 1024),
         ("train_gpt2", "gpt2-355m", 32, 1024)]
BASELINE = ["--prac", "none", "--recompute-attention", "0"]
PRAC_PAPER = ["--prac", "prac", "--prac-storage", "act", "--recompute-attention", "0"]
PRAC_ALL = ["--prac", "prac", "--prac-storage", "fp8", "--recompute-attention", "1"]
PLAN_ROWS = [("Baseline", BASELINE), ("Baseline + exact", ["--prac", "none", "--recompute-attention", "1"]),
             ("PRAC (paper)", PRAC_PAPER), ("PRAC + all", PRAC_ALL),
             ("PRAC + all + 8-bit Adam", PRAC_ALL + ["--optimizer-states", "8bit"])]
LOSS_ROWS = [("Baseline", BASELINE), ("PRAC (paper)", PRAC_PAPER), ("PRAC + all", PRAC_ALL)]


def gib(b):
    return f"{b / 2**30:.2f}"


def plan_table():
    """(the planner table's markdown, the commands it ran)."""
    first = len(C.PLANNER_CALLS)
    rows = []
    for binary, model, B, T in SIZES:
        totals = {}
        for label, flags in PLAN_ROWS:
            p = C.planner(binary, ["--model", model, "--batch-size", B, "--seq-len", T, "--precision", "bf16"] + flags)
            if p is None:
                sys.exit(f"the planner failed for {model} {label}: is ./{binary} built?")
            totals[label] = p["total"]
        base, exact = totals["Baseline"], totals["Baseline + exact"]
        for label, _ in PLAN_ROWS:
            t = totals[label]
            rows.append([model, f"{B} x {T}", label, gib(t), f"{t / base:.3f}", f"{t / exact:.3f}"])
    return (C.md_table(["model", "B x T", "method", "planned GiB", "/ Baseline", "/ Baseline + exact"], rows),
            C.PLANNER_CALLS[first:])


def loss_runs(args):
    runs = []
    for model in args.models.split(","):
        binary = "train_llama" if model.startswith("llama") else "train_gpt2"
        if args.quick:
            train = C.quick_flags(args)
        else:
            train = ["--steps", args.steps, "--batch-size", 4, "--seq-len", 128, "--eval-tokens", 16384,
                     "--eval-interval", 0, "--log-interval", 50, "--prac-t1", 50, "--prac-t2", 50]
        for label, flags in LOSS_ROWS:
            for seed in range(1, args.seeds + 1):
                name = f"{model}_{label.split()[0].lower()}{'_all' if 'all' in label else ''}_s{seed}"
                runs.append(C.Run(name, label, binary, ["--model", model, "--seed", seed] + flags + train +
                                  C.common_tail(args), meta=dict(model=model, method=label, seed=seed),
                                  plot_label=f"{model} {label} s{seed}"))
    return runs


def loss_table(runs, models):
    rows = []
    for model in models:
        for label, _ in LOSS_ROWS:
            vals = [r.result["val_loss"] for r in runs if r.meta["model"] == model and r.meta["method"] == label
                    and r.result and r.result.get("val_loss") is not None and math.isfinite(r.result["val_loss"])]
            n = sum(1 for r in runs if r.meta["model"] == model and r.meta["method"] == label)
            if not vals:
                rows.append([model, label, "failed", "-", f"0/{n}"])
                continue
            sd = statistics.stdev(vals) if len(vals) > 1 else None  # one seed: no spread ("-", not nan: a divergence)
            rows.append([model, label, f"{statistics.mean(vals):.4f}", C.fmt_num(sd, "{:.4f}"), f"{len(vals)}/{n}"])
    return C.md_table(["model", "method", "val loss mean", "std over seeds", "runs"], rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan-only", action="store_true", help="only the planner table (seconds)")
    ap.add_argument("--quick", action="store_true", help="pipeline check: tiny models, 20 steps, one seed")
    ap.add_argument("--models", default=None, help="loss runs' models [llama-mini,gpt2-mini; --quick: the tiny ones]")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per method [3; --quick: 1]")
    ap.add_argument("--steps", type=int, default=None, help="training steps per loss run (B 4, T 128; --quick: "
                    f"B {C.QUICK['batch']}, T {C.QUICK['seq']}) [200; --quick: {C.QUICK['steps']}]")
    ap.add_argument("--out", help="output directory [runs/memory; --quick: runs/memory-quick]")
    ap.add_argument("--device", default="cpu", help="trainer --device for the loss runs [cpu]")
    ap.add_argument("--extra", default="", help="extra trainer flags for the loss runs, one quoted string; write it "
                    "with '=' (--extra=--no-shuffle): argparse takes a separate value that starts with '-' for a flag")
    ap.add_argument("--run-timeout", type=float, default=None, help="seconds before a run is killed (0: never) [0]")
    C.add_restart(ap)
    ap.add_argument("--dry-run", action="store_true", help="print the planner table and the loss runs' commands, "
                    "write nothing; exit 1 when the planner refuses a loss run's flags")
    args = ap.parse_args()
    args.paper = False
    C.out_dir(args, "memory")
    C.check_run_timeout(args)
    args.models = ",".join(C.model_list(args.models, ["llama-tiny", "gpt2-tiny"] if args.quick else
                                        ["llama-mini", "gpt2-mini"]))
    if args.seeds is not None and args.seeds <= 0:  # (0 read as "not given": 3 seeds ran)
        sys.exit(f"--seeds {args.seeds}: must be at least 1")
    if args.steps is not None and args.steps <= 0:
        sys.exit(f"--steps {args.steps}: must be at least 1")
    args.seeds = args.seeds or (1 if args.quick else 3)
    if not args.quick:
        args.steps = args.steps or 200  # (--quick: quick_flags' own count unless --steps is given)

    plans, plan_cmds = plan_table()
    print("Planned peak memory (CUDA bf16, AdamW unless stated):\n\n" + plans + "\n", flush=True)
    plan_block = ["Planner commands (`--plan --json`; the table's totals are their `total`):", "", "```sh"] + \
        [C.shell_line(c) for c in plan_cmds] + ["```", ""]
    if args.plan_only:
        if args.dry_run:
            return 0
        C.make_out(args.out)
        md = os.path.join(args.out, "memory_plan.md")
        with open(md, "w") as f:
            f.write("\n".join(["# Memory beyond the paper: the planner's table", ""] + plan_block +
                              ["## Planned peak memory (CUDA bf16, AdamW unless stated)", "", plans]) + "\n")
        print(f"wrote {md}")
        return 0
    runs = loss_runs(args)
    extra_notes = C.check_extra(runs, args)
    devices, failures = C.run_all(runs, args, outputs=("memory.md", "memory.png"))
    if args.dry_run:  # the planner is the dry run's check of the loss runs' flags
        C.attach_plans(runs, args)
        if C.PLANNER_FAILURES:
            print(f"dry run: {len(C.PLANNER_FAILURES)} planner call(s) failed (the messages above)", file=sys.stderr)
        return 1 if C.PLANNER_FAILURES else 0
    extra_notes += C.state_notes(runs, args)
    losses = loss_table(runs, args.models.split(","))
    print("\nFinal validation loss:\n\n" + losses)
    png, plot_note = C.plot(runs, args, "memory", "Memory beyond the paper: the loss runs")
    lines = ["# Memory beyond the paper", ""]
    if args.quick:
        lines += [f"**--quick:** {C.QUICK_CAVEAT}.", ""]
    lines += [f"Machine: {'; '.join(devices) or 'unknown (no device: line)'}.", ""] + plan_block
    lines += ["Commands run:", "", "```sh"] + [C.shell_line(r.cmd(args.out)) for r in runs] + ["```", ""]
    lines += ["## Planned peak memory (CUDA bf16, AdamW unless stated)", "", plans, "",
              f"## Final validation loss ({args.seeds} seed{'s' if args.seeds != 1 else ''})", "", losses]
    lines += ([""] if extra_notes else []) + [f"- {n}" for n in extra_notes]
    if failures:
        lines += ["", f"**{failures} run(s) failed**: see the .out files in {args.out}."]
    lines += [""] + C.plot_lines(png, plot_note)
    md = os.path.join(args.out, "memory.md")
    with open(md, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {md}" + (f" and {png}" if png else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
