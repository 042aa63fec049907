#!/usr/bin/env python3
"""Ablation of the PRAC paper (figure "different k"): the scale k = M * k0, k0 = (n - r1)/r2, for
M in {1.0, 0.5, 0.2, 1.2} (k0, 0.5k0, 0.2k0, 1.2k0), on LLaMA-130M, separately for (a) linear sites and (b) norm /
nonlinear sites (--prac-classes linear | nonlinear, the other class uncompressed).

    python3 scripts/repro/ablation_k.py --quick [--out runs/ablation_k-quick]
    python3 scripts/repro/ablation_k.py --paper --train-data 'c4_llama_train_*.bin' --val-data 'c4_llama_val_*.bin'
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

KS = [(1.0, "k0"), (0.5, "0.5k0"), (0.2, "0.2k0"), (1.2, "1.2k0")]
CLASSES = [("linear", "(a) linear sites"), ("nonlinear", "(b) norm / nonlinear sites")]


def main():
    ap = C.base_parser(__doc__)
    ap.add_argument("--classes", default="linear,nonlinear", help="which panels to run [linear,nonlinear]")
    args = C.finish_args(ap.parse_args(), "ablation_k")
    model = "llama-tiny" if args.quick else "llama-130m"
    wanted = args.classes.split(",")
    for w in wanted:
        if w not in [c for c, _ in CLASSES]:
            sys.exit(f"--classes: {w!r} is not one of {', '.join(c for c, _ in CLASSES)}")
    classes = [c for c in CLASSES if c[0] in wanted]
    runs = []
    for cls, _ in classes:
        for mult, label in KS:
            flags = ["--model", model, "--prac", "prac", "--prac-classes", cls, "--prac-k-mult", mult]
            flags += C.quick_flags(args) if args.quick else C.paper_flags(args, model)
            runs.append(C.Run(f"{cls}_k{mult:g}", f"{cls} {label}", "train_llama", flags + C.common_tail(args),
                              meta=dict(cls=cls, k=label)))

    def tables(runs):
        by = {(r.meta["cls"], r.meta["k"]): r for r in runs}
        header = ["k"]
        for cls, title in classes:
            header += [f"{title}: final train loss (last 10)", f"{title}: val loss", f"{title}: PPL"]
        rows = []
        for _, label in KS:
            row = [label]
            for cls, _ in classes:
                r = by[(cls, label)]
                s = r.result or {}
                row += [C.fmt_num(s.get("train_loss"), "{:.4f}"), C.fmt_num(s.get("val_loss"), "{:.4f}"), C.ppl_of(r)]
            rows.append(row)
        return C.md_table(header, rows)

    notes = [f"Model {model}; k0 = (n - r1)/r2 per site (the unbiased choice); --prac-k-mult scales it.",
             "Paper: k = k0 converges best in both linear and norm layers; larger or smaller k degrades."]
    return C.main_flow(args, "ablation_k", "Ablation: the scale factor k", runs, tables, notes)


if __name__ == "__main__":
    sys.exit(main())
