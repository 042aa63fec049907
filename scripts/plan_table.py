#!/usr/bin/env python3
"""Markdown table of planned peak memory for the PRAC paper's Table 2 methods (baseline, GaLore, RSO, PRAC) next
to the paper's peaks (GB measured in eager PyTorch; the paper names no GPU for Table 2, A800s for Table 4). Runs
./train_gpt2 and ./train_llama --plan --json (no GPU needed). GaLore and RSO use their default ranks for the model
(train/optim_galore.h: the paper's 256 and 512 for GPT-2 124M and 355M, GaLore's for LLaMA).

    python3 scripts/plan_table.py [--precision bf16|fp32] [--paper-storage]

The plans are at the trainers' default flags (the attention output recomputed, PRAC's projections in fp8), which
save more than the paper's runs store: --paper-storage plans every row as the paper stores
(--prac-storage act --recompute-attention 0, as scripts/repro/table2.py --paper runs), the fair column beside its Δ.
The first line of the output says which.
"""
import argparse
import json
import os
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (binary, model, B, T), the paper's Table 2 peaks in GB per method (None: OOM on 80 GB in the paper) and its printed
# Δ (LLaMA-1B's against a baseline it could not run, so not one the GB figures give)
ROWS = [
    ("train_llama", "llama-130m", 128, 256, dict(baseline=21.26, galore=21.08, rso=19.57, prac=15.65),
     dict(galore="-1%", rso="-8%", prac="-27%")),
    ("train_llama", "llama-350m", 128, 256, dict(baseline=46.10, galore=45.37, rso=40.36, prac=32.21),
     dict(galore="-2%", rso="-13%", prac="-30%")),
    ("train_llama", "llama-1b", 128, 256, dict(baseline=None, galore=None, rso=79.32, prac=60.48),
     dict(galore=None, rso="-16%", prac="-36%")),
    ("train_gpt2", "gpt2-124m", 64, 1024, dict(baseline=62.27, galore=62.15, rso=54.79, prac=49.68),
     dict(galore="-0%", rso="-12%", prac="-20%")),
    ("train_gpt2", "gpt2-355m", 32, 1024, dict(baseline=55.94, galore=55.64, rso=46.90, prac=44.21),
     dict(galore="-1%", rso="-16%", prac="-21%")),
]
METHODS = [("baseline", "Baseline", ["--prac", "none"]), ("galore", "GaLore", ["--prac", "none", "--optimizer", "galore"]),
           ("rso", "RSO", ["--prac", "none", "--optimizer", "rso"]), ("prac", "PRAC", ["--prac", "prac"])]


def plan(binary, model, B, T, flags, precision):
    path = os.path.join(ROOT, binary)
    if not os.access(path, os.X_OK):
        sys.exit(f"{path} is not built: run `make build` in {ROOT} first")
    p = subprocess.run([path, "--model", model, "--batch-size", str(B), "--seq-len", str(T), "--plan", "--json",
                        "--precision", precision] + flags, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"the planner failed for {model} {' '.join(flags)} (exit {p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout)


def gb(x):
    return f"{x / 1e9:.2f}"


def delta(x, base):
    """x relative to base in percent, as scripts/repro/common.py's fmt_delta: whole percents from 1% up, one decimal
    below (-0.4%, not -0%), 0% when it rounds to 0.0."""
    d = 100.0 * (x - base) / base
    if abs(d) < 0.05:
        return "0%"
    return f"{d:+.1f}%" if abs(d) < 0.95 else f"{d:+.0f}%"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp32"],
                    help="the CUDA build the plans are for: bf16 (the default: bf16 weights and activations, fp32 "
                         "master weights) or fp32")
    ap.add_argument("--paper-storage", action="store_true",
                    help="plan as the paper stores (--prac-storage act --recompute-attention 0) rather than at the "
                         "trainers' defaults (attention output recomputed, fp8 PRAC storage)")
    args = ap.parse_args()
    storage = ["--prac-storage", "act", "--recompute-attention", "0"] if args.paper_storage else []
    print("Plans as the paper stores (--prac-storage act --recompute-attention 0):" if args.paper_storage else
          "Plans at the trainers' default flags (attention output recomputed, PRAC's projections in fp8; "
          "--paper-storage: as the paper stores):")
    print("| model | B / T | method | ours (GB) | ours Δ | paper (GB) | paper Δ | saved activations ours (GB) |")
    print("|---|---|---|---|---|---|---|---|")
    for binary, model, B, T, paper, paper_delta in ROWS:
        base = None
        for key, label, flags in METHODS:
            p = plan(binary, model, B, T, flags + storage, args.precision)
            base = base or p
            acts = sum(v for k, v in p["bytes"].items() if k.startswith("saved_"))
            d = "-" if key == "baseline" else delta(p["total"], base["total"])
            pg = paper[key]
            pd = "-" if key == "baseline" else paper_delta[key] or ""
            print(f"| {model} | {B} / {T} | {label} | {gb(p['total'])} | {d} | {f'{pg:.2f}' if pg else 'OOM'} | {pd} | "
                  f"{gb(acts)} |")


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # (| head: end quietly, not with a BrokenPipeError traceback)
    sys.exit(main())
