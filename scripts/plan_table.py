#!/usr/bin/env python3
"""Markdown table of planned peak memory, baseline vs PRAC, next to the PRAC paper's Table 2 (peak GB measured
in eager PyTorch on A800s). Runs ./train_gpt2 and ./train_llama --plan --json (no GPU needed).

    python3 scripts/plan_table.py [--precision bf16|fp32]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (binary, model, B, T, paper baseline GB, paper PRAC GB) from the paper's Table 2
ROWS = [
    ("train_llama", "llama-130m", 128, 256, 21.26, 15.65),
    ("train_llama", "llama-350m", 128, 256, 46.10, 32.21),
    ("train_llama", "llama-1b", 128, 256, None, 60.48),  # baseline OOM on 80 GB in the paper
    ("train_gpt2", "gpt2-124m", 64, 1024, 62.27, 49.68),
    ("train_gpt2", "gpt2-355m", 32, 1024, 55.94, 44.21),
]


def plan(binary, model, B, T, prac, precision):
    out = subprocess.run([os.path.join(ROOT, binary), "--model", model, "--batch-size", str(B), "--seq-len", str(T),
                          "--prac", prac, "--plan", "--json", "--precision", precision],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def gb(x):
    return f"{x / 1e9:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    args = ap.parse_args()
    print(f"| model | B / T | ours baseline (GB) | ours PRAC (GB) | ours Δ | paper baseline (GB) | paper PRAC (GB) | paper Δ "
          f"| activations ours baseline → PRAC (GB) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for binary, model, B, T, pb, pp in ROWS:
        base = plan(binary, model, B, T, "none", args.precision)
        prac = plan(binary, model, B, T, "prac", args.precision)
        acts = lambda p: sum(v for k, v in p["bytes"].items() if k.startswith("saved_"))
        d = 100.0 * (prac["total"] - base["total"]) / base["total"]
        paper_d = f"{100.0 * (pp - pb) / pb:+.0f}%" if pb else "OOM → 60.48"
        print(f"| {model} | {B} / {T} | {gb(base['total'])} | {gb(prac['total'])} | {d:+.0f}% | "
              f"{pb if pb else 'OOM'} | {pp} | {paper_d} | {gb(acts(base))} → {gb(acts(prac))} |")


if __name__ == "__main__":
    sys.exit(main())
