#!/usr/bin/env python3
"""Kernel coverage of the emulated test suite: which of the project's __global__ kernels ran at least once.

Every emulated process writes the kernels it executed to <runs>/<pid>.<ns>.txt (kernels/cuda_emu/exec.cpp, when
PRAC_EMU_COVERAGE_DIR is set); this script compares their union with every __global__ definition in the project's
CUDA sources (kernels/, prac/, train/, common/, and the test oracles' headers test/**/*.cuh) and prints

    cuda-emu kernel coverage: K/M kernels executed

followed by each kernel that did not run, with the reason given in kernels/cuda_emu/coverage_exceptions.txt.
Exit status 1 when a kernel did not run and no reason is given for it (or when nothing ran at all). With
--expected (the lists of emulated tests that can run kernels, one per sub-build), a run that left some of them out
(ctest -R: a few tests rerun) is not judged: the report says which ran, and the exit status is 77 (ctest: skipped).
Each emulated test's processes mark it as run in <runs>/tests/ (kernels/cuda_emu/exec.cpp).
"""
import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rewrite import blank_comments_and_strings, find_kernels  # noqa: E402

SOURCE_DIRS = ("kernels", "prac", "train", "common")
# Every .cu/.cuh of SOURCE_DIRS, and the .cuh headers under test/: the oracles the GPU tests run (the naive attention,
# test/attention_naive_cuda.cuh). The .cu files under test/ are not scanned: test/cuda_emu's kernels test the
# execution layer itself.
SOURCE_PATTERNS = tuple(os.path.join(d, "**", "*." + ext) for d in SOURCE_DIRS for ext in ("cu", "cuh")) + (
    os.path.join("test", "**", "*.cuh"),)


def project_kernels(src):
    found = []
    for pattern in SOURCE_PATTERNS:
        for path in sorted(glob.glob(os.path.join(src, pattern), recursive=True)):
            with open(path, encoding="utf-8") as fp:
                code = blank_comments_and_strings(fp.read())
            for name, _, _ in find_kernels(code):
                found.append((os.path.relpath(path, src), name))
    return found


def read_exceptions(path):
    reasons = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fp:
            for line in fp:
                line = line.strip()
                if line and not line.startswith("#") and ":" in line:
                    name, why = line.split(":", 1)
                    reasons[name.strip()] = why.strip()
    return reasons


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", required=True, help="the repository root")
    ap.add_argument("--runs", required=True, help="the directory the emulated runs wrote to")
    ap.add_argument("--out", help="also write the report here")
    ap.add_argument("--expected", nargs="*", default=[],
                    help="files listing the emulated tests (one a line) that a whole run runs")
    a = ap.parse_args()
    kernels = project_kernels(a.src)
    executed = set()
    for path in glob.glob(os.path.join(a.runs, "*.txt")):
        with open(path, encoding="utf-8") as fp:
            executed.update(line.strip() for line in fp if line.strip())
    reasons = read_exceptions(os.path.join(a.src, "kernels", "cuda_emu", "coverage_exceptions.txt"))
    missing = [(f, k) for f, k in kernels if k not in executed]
    lines = ["cuda-emu kernel coverage: %d/%d kernels executed" % (len(kernels) - len(missing), len(kernels))]
    unexplained = 0
    for f, k in missing:
        why = reasons.get(k)
        if not why:
            unexplained += 1
        lines.append("  not executed: %s (%s): %s" % (k, f, why or "NO REASON GIVEN in kernels/cuda_emu/coverage_exceptions.txt"))
    expected = set()
    for path in a.expected:
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fp:
                expected.update(line.strip() for line in fp if line.strip())
    ran = set(os.listdir(os.path.join(a.runs, "tests"))) if os.path.isdir(os.path.join(a.runs, "tests")) else set()
    left_out = sorted(expected - ran)
    if left_out:
        lines.insert(0, "cuda-emu kernel coverage: not judged: %d of the %d emulated kernel tests ran in this ctest "
                     "run (left out: %s%s); it is judged on a run of all of them (ctest -L cuda-emu, or the whole "
                     "suite)" % (len(expected & ran), len(expected), ", ".join(left_out[:5]),
                                 ", ..." if len(left_out) > 5 else ""))
    report = "\n".join(lines)
    print(report)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fp:
            fp.write(report + "\n")
    if left_out:
        return 77
    if not executed:
        print("no emulated run recorded any kernel in %s" % a.runs)
        return 1
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
