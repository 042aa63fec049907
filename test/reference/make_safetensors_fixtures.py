#!/usr/bin/env python3
"""Tiny safetensors fixtures written by the real Python `safetensors` library.

test/test_safetensors.cpp reads test/fixtures/safetensors/python_written.safetensors and
compares every value bit for bit with the same table (EXPECTED below, mirrored in the C++
test), then writes that table with our C++ writer and checks the bytes equal this file's,
so files we write are exactly what Python writes (and thus load in Python).

Regenerate (from the repository root):
    python test/reference/make_safetensors_fixtures.py

Check a file written by our C++ writer loads in Python with the expected values:
    PRAC_SAFETENSORS_KEEP=/tmp/st build/test/test_safetensors --gtest_filter='*Python*'
    python test/reference/make_safetensors_fixtures.py --check /tmp/st/cpp_written.safetensors
"""

import argparse
import os
import sys

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURE = os.path.join(REPO_ROOT, "test", "fixtures", "safetensors", "python_written.safetensors")

METADATA = {"format": "pt"}


def f32_from_bits(bits):
    return torch.from_numpy(np.array(bits, dtype=np.uint32).view(np.float32).copy())


def expected():
    """Every dtype the trainer uses, special values, a scalar and a zero-size tensor.
    All float values are exactly representable in their dtype."""
    return {
        # 0, -0, smallest subnormal, FLT_MAX, inf, -inf, NaN
        "f32_special": f32_from_bits(
            [0x00000000, 0x80000000, 0x00000001, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000]
        ),
        "weight.f32": torch.tensor([(i - 2.5) * 0.25 for i in range(6)], dtype=torch.float32).reshape(2, 3),
        "a.bf16": torch.tensor([(i - 10) * 0.375 for i in range(20)], dtype=torch.bfloat16).reshape(4, 5),
        # 65504 (max), 2^-14 (smallest normal), 2^-24 (smallest subnormal), -inf, NaN, -0
        "z.f16": torch.tensor(
            [65504.0, 2.0**-14, 2.0**-24, float("-inf"), float("nan"), -0.0], dtype=torch.float16
        ).reshape(3, 2),
        "i32": torch.tensor([-2, -1, 0, 1, 2147483647], dtype=torch.int32),
        "i64": torch.tensor([-(2**40), 1, 2, 2**62], dtype=torch.int64).reshape(2, 2),
        "scalar": torch.tensor(3.5, dtype=torch.float32),
        "empty": torch.zeros((0, 4), dtype=torch.float32),
    }


def same_bits(a, b):
    if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
        return False
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return torch.equal(a.contiguous().view(ints), b.contiguous().view(ints))


def check(path):
    want = expected()
    got = load_file(path)
    if sorted(got) != sorted(want):
        sys.exit(f"{path}: tensor names {sorted(got)} != {sorted(want)}")
    for name in want:
        if not same_bits(got[name], want[name]):
            sys.exit(f"{path}: tensor {name} differs:\n  got  {got[name]}\n  want {want[name]}")
    with safe_open(path, framework="pt") as f:
        if f.metadata() != METADATA:
            sys.exit(f"{path}: metadata {f.metadata()} != {METADATA}")
    print(f"{path}: OK, {len(want)} tensors and metadata match, loaded by safetensors")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", metavar="FILE", help="verify FILE (e.g. written by the C++ writer) instead")
    args = ap.parse_args()
    if args.check:
        check(args.check)
        return
    os.makedirs(os.path.dirname(FIXTURE), exist_ok=True)
    save_file(expected(), FIXTURE, metadata=METADATA)
    check(FIXTURE)
    print(f"wrote {FIXTURE} ({os.path.getsize(FIXTURE)} bytes)")


if __name__ == "__main__":
    main()
