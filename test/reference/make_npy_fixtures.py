#!/usr/bin/env python3
"""Tiny .npy fixtures written by numpy itself, for test/test_npy_analyze.cpp (common/npy.cpp's reader and writer).

Good files (the C++ test mirrors EXPECTED below and compares every value bit for bit):
    f4_2x3.npy, f4_1d.npy, f4_2x3x4.npy, f4_scalar.npy, f4_empty.npy   np.save, format version 1.0, float32
    f4_v2.npy, f4_v3.npy          the 2x3 array with np.lib.format.write_array(version=(2, 0) / (3, 0))
    f2_2x3.npy                    float16 ('<f2')
    bf16_u2.npy                   '<u2' holding bfloat16 bit patterns (read with --bf16)
Files the reader must refuse:
    fortran_2x3.npy (fortran_order True), be_f4.npy ('>f4'), f8.npy ('<f8'),
    truncated.npy (f4_2x3.npy without its last 4 bytes)
(bad magic, unknown versions and malformed headers are built byte by byte in the C++ test.)

The float32 fixtures are also what our writer must reproduce byte for byte: the C++ test writes the same
arrays with write_npy_f32 and compares, so numpy loads what we write. To check that by hand too:
    PRAC_NPY_KEEP=/tmp/npy build/tools/test_npy_analyze --gtest_filter='*Numpy*'
    python test/reference/make_npy_fixtures.py --check /tmp/npy

Regenerate (from the repository root; needs numpy):
    python test/reference/make_npy_fixtures.py
"""

import argparse
import io
import os
import sys

import numpy as np

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(REPO_ROOT, "test", "fixtures", "npy")


def f32_from_bits(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def expected_f32():
    """float32 arrays; every value exact. Mirrored in test/test_npy_analyze.cpp."""
    return {
        "f4_2x3": np.array([(i - 2.5) * 0.25 for i in range(6)], dtype=np.float32).reshape(2, 3),
        # 0, -0, smallest subnormal, FLT_MAX, inf (NaN is checked by the round-trip test, not here)
        "f4_1d": f32_from_bits([0x00000000, 0x80000000, 0x00000001, 0x7F7FFFFF, 0x7F800000]),
        "f4_2x3x4": (np.arange(24, dtype=np.float32) * 0.5 - 3.0).reshape(2, 3, 4),
        "f4_scalar": np.array(3.5, dtype=np.float32),
        "f4_empty": np.zeros((0, 4), dtype=np.float32),
    }


# bfloat16 values as bit patterns: 1, -2.5, 0.15625, inf, -0, 2^-133 (subnormal), 3.3895e38 (max)
BF16_BITS = [0x3F80, 0xC020, 0x3E20, 0x7F80, 0x8000, 0x0001, 0x7F7F]
# float16: 1, -2.5, 65504 (max), 2^-24 (smallest subnormal), -inf, 0.333251953125
F16_VALUES = [1.0, -2.5, 65504.0, 2.0**-24, float("-inf"), 0.333251953125]


def write_all():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".npy"):
            os.remove(os.path.join(OUT, f))
    exp = expected_f32()
    for name, a in exp.items():
        np.save(os.path.join(OUT, name + ".npy"), a)
    for ver in (2, 3):
        with open(os.path.join(OUT, f"f4_v{ver}.npy"), "wb") as fp:
            np.lib.format.write_array(fp, exp["f4_2x3"], version=(ver, 0))
    np.save(os.path.join(OUT, "f2_2x3.npy"), np.array(F16_VALUES, dtype=np.float16).reshape(2, 3))
    np.save(os.path.join(OUT, "bf16_u2.npy"), np.array(BF16_BITS, dtype=np.uint16))
    np.save(os.path.join(OUT, "fortran_2x3.npy"), np.asfortranarray(exp["f4_2x3"]))
    np.save(os.path.join(OUT, "be_f4.npy"), exp["f4_2x3"].astype(">f4"))
    np.save(os.path.join(OUT, "f8.npy"), exp["f4_2x3"].astype(np.float64))
    buf = io.BytesIO()
    np.save(buf, exp["f4_2x3"])
    with open(os.path.join(OUT, "truncated.npy"), "wb") as fp:
        fp.write(buf.getvalue()[:-4])


def verify():
    exp = expected_f32()
    for name, a in exp.items():
        b = np.load(os.path.join(OUT, name + ".npy"))
        assert b.dtype == np.float32 and b.shape == a.shape and b.tobytes() == a.tobytes(), name
    for ver in (2, 3):
        path = os.path.join(OUT, f"f4_v{ver}.npy")
        with open(path, "rb") as fp:
            assert np.lib.format.read_magic(fp) == (ver, 0), path
        assert np.load(path).tobytes() == exp["f4_2x3"].tobytes(), path
    bits = np.load(os.path.join(OUT, "bf16_u2.npy"))
    assert bits.dtype == np.dtype("<u2") and list(bits) == BF16_BITS
    with open(os.path.join(OUT, "fortran_2x3.npy"), "rb") as fp:
        assert b"'fortran_order': True" in fp.read(128)
    for name, descr in (("be_f4", ">f4"), ("f8", "<f8"), ("f2_2x3", "<f2")):
        with open(os.path.join(OUT, name + ".npy"), "rb") as fp:
            assert f"'descr': '{descr}'".encode() in fp.read(128), name
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"wrote and verified {len(os.listdir(OUT))} files in {os.path.relpath(OUT, REPO_ROOT)} ({total} bytes)")


def check(dirname):
    """np.load the files our C++ writer wrote (PRAC_NPY_KEEP) and compare with EXPECTED."""
    exp = expected_f32()
    for name, a in exp.items():
        path = os.path.join(dirname, name + ".npy")
        b = np.load(path)
        ok = b.dtype == np.float32 and b.shape == a.shape and b.tobytes() == a.tobytes()
        print(f"{path}: dtype {b.dtype} shape {b.shape} {'OK' if ok else 'MISMATCH'}")
        if not ok:
            sys.exit(1)
    print("numpy loads every file the C++ writer wrote, with the expected values")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", metavar="DIR", help="np.load the C++-written files in DIR instead of writing")
    args = ap.parse_args()
    if args.check:
        check(args.check)
    else:
        write_all()
        verify()
