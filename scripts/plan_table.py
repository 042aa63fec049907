#!/usr/bin/env python3
"""Markdown table of planned peak memory for the PRAC paper's Table 2 methods (baseline, GaLore, RSO, PRAC) next
to the paper's peaks (GB measured in eager PyTorch on A800s). Runs ./train_gpt2 and ./train_llama --plan --json
(no GPU needed). GaLore and RSO use their default ranks for the model (train/optim_galore.h, train/optim_rso.h).

    python3 scripts/plan_table.py [--precision bf16|fp32]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (binary, model, B, T) and the paper's Table 2 peaks in GB per method (None: OOM on 80 GB in the paper)
ROWS = [
    ("train_llama", "llama-130m", 128, 256, dict(baseline=21.26, galore=21.08, rso=19.57, prac=15.65)),
    ("train_llama", "llama-350m", 128, 256, dict(baseline=46.10, galore=45.37, rso=40.36, prac=32.21)),
    ("train_llama", "llama-1b", 128, 256, dict(baseline=None, galore=None, rso=79.32, prac=60.48)),
    ("train_gpt2", "gpt2-124m", 64, 1024, dict(baseline=62.27, galore=62.15, rso=54.79, prac=49.68)),
    ("train_gpt2", "gpt2-355m", 32, 1024, dict(baseline=55.94, galore=55.64, rso=46.90, prac=44.21)),
]
METHODS = [("baseline", "Baseline", ["--prac", "none"]), ("galore", "GaLore", ["--prac", "none", "--optimizer", "galore"]),
           ("rso", "RSO", ["--prac", "none", "--optimizer", "rso"]), ("prac", "PRAC", ["--prac", "prac"])]


def plan(binary, model, B, T, flags, precision):
    out = subprocess.run([os.path.join(ROOT, binary), "--model", model, "--batch-size", str(B), "--seq-len", str(T),
                          "--plan", "--json", "--precision", precision] + flags,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def gb(x):
    return f"{x / 1e9:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    args = ap.parse_args()
    print("| model | B / T | method | ours (GB) | ours Δ | paper (GB) | paper Δ | saved activations ours (GB) |")
    print("|---|---|---|---|---|---|---|---|")
    for binary, model, B, T, paper in ROWS:
        base = None
        for key, label, flags in METHODS:
            p = plan(binary, model, B, T, flags, args.precision)
            base = base or p
            acts = sum(v for k, v in p["bytes"].items() if k.startswith("saved_"))
            d = "-" if key == "baseline" else f"{100.0 * (p['total'] - base['total']) / base['total']:+.0f}%"
            pg, pb = paper[key], paper["baseline"]
            pd = "-" if key == "baseline" else (f"{100.0 * (pg - pb) / pb:+.0f}%" if pg and pb else "")
            print(f"| {model} | {B} / {T} | {label} | {gb(p['total'])} | {d} | {pg if pg else 'OOM'} | {pd} | "
                  f"{gb(acts)} |")


if __name__ == "__main__":
    sys.exit(main())
