#!/usr/bin/env python3
"""Fails when a lower layer of the source tree includes a higher one.

The layers, lowest first (a file may include its own layer and the ones below it):
  0  common/                     errors, tensors, device, safetensors, npy
  1  kernels/ prac/ data/        the ops and their CUDA twins, PRAC's site ops, tokenizers and shards
  2  model/                      GPT-2 and LLaMA over a backend, the activation sites
  3  train/                      the training loop's parts, optimizers, planner, checkpoints, communicators
  4  tools/ and the mains        train_gpt2.cu, train_llama.cu, prep_data, prac_analyze, the benchmarks
  5  test/                       may include anything
Only quoted includes of project paths ("layer/...") are checked; system headers are not.

  python3 scripts/check_layers.py [--root DIR]   check the tree (exit 1 and one line per violation; exit 1 too when
                                                 DIR holds no source file, e.g. a wrong --root)
  python3 scripts/check_layers.py --self-test    show that a violation is caught, a clean tree passes and an empty
                                                 or missing root fails
"""
import argparse
import os
import re
import shutil
import sys
import tempfile

LAYERS = {"common": 0, "kernels": 1, "prac": 1, "data": 1, "model": 2, "train": 3, "tools": 4, "test": 5}
MAIN_LAYER = 4  # files at the top level (the two mains)
SOURCE_EXT = (".h", ".hpp", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]*/[^"]*)"', re.M)  # a quoted path with a folder in it


def layer_of(rel):
    top = rel.split(os.sep)[0] if os.sep in rel else None
    if top is None:
        return MAIN_LAYER
    return LAYERS.get(top)


def check(root):
    """(violations, number of source files checked)."""
    problems, checked = [], 0
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d in LAYERS]  # build/, .git/, docs/ ... are not sources
        for f in filenames:
            if not f.endswith(SOURCE_EXT):
                continue
            rel = os.path.normpath(os.path.join(rel_dir, f))
            mine = layer_of(rel)
            if mine is None:
                continue
            checked += 1
            with open(os.path.join(dirpath, f), encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            for m in INCLUDE.finditer(text):
                path = m.group(1)
                if path.startswith("."):  # "../train/t.h": the folder it reaches from the including file's
                    path = os.path.normpath(os.path.join(rel_dir, path))
                    if path.startswith(".."):
                        continue  # outside the tree: not a project folder
                target = path.split("/")[0]
                theirs = LAYERS.get(target)
                if theirs is None:
                    if os.path.isdir(os.path.join(root, target)) and target not in ("build", "scripts"):
                        line = text.count("\n", 0, m.start()) + 1
                        problems.append(f"{rel}:{line}: includes {target}/, a folder that is in no layer "
                                        f"(add it to LAYERS in scripts/check_layers.py, or move the file)")
                    continue  # not a project folder (e.g. "nlohmann/json.hpp")
                if theirs > mine:
                    line = text.count("\n", 0, m.start()) + 1
                    problems.append(f"{rel}:{line}: includes {target}/ (layer {theirs}) from layer {mine}: "
                                    f"a lower layer must not depend on a higher one")
    return problems, checked


def verdict(root):
    """(lines to print, exit code) for the tree at root: a tree without a source file fails (a wrong --root would
    otherwise pass)."""
    if not os.path.isdir(root):
        return [f"layers: {root} is not a directory"], 1
    problems, checked = check(root)
    if not checked:
        return [f"layers: no source file ({', '.join(SOURCE_EXT)}) under {root} in "
                f"{', '.join(d + '/' for d in LAYERS)} or the top level: is --root the repository?"], 1
    if problems:
        return problems + [f"layers: {len(problems)} violation(s)"], 1
    return [f"layers: every include points down ({checked} files)"], 0


def self_test():
    made = []

    def tree(files):
        d = tempfile.mkdtemp(prefix="check_layers_")
        made.append(d)
        for rel, text in files.items():
            p = os.path.join(d, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as fh:
                fh.write(text)
        return d
    clean = tree({"common/a.h": '#include <vector>\n', "kernels/k.h": '#include "common/a.h"\n',
                  "model/m.h": '#include "kernels/k.h"\n#include "prac/p.h"\n', "train_x.cu": '#include "train/t.h"\n',
                  "test/t.cpp": '#include "train/t.h"\n', "build/x.h": '#include "train/t.h"\n'})
    bad = tree({"kernels/k.h": '#include "common/a.h"\n\n#include "model/tensors.h"\n', "model/tensors.h": "",
                "kernels/sub/s.h": '#include "../../common/a.h"\n#include "../../train/t.h"\n'})
    empty = tree({"docs/x.h": '#include "train/t.h"\n', "build/y.cpp": "", "README.md": ""})  # no layer's sources
    ok = True
    if check(clean)[0] or verdict(clean)[1] != 0:
        print("self-test FAILED: a clean tree was reported:", verdict(clean))
        ok = False
    found = sorted(check(bad)[0])
    if (len(found) != 2 or not found[0].startswith("kernels/k.h:3: includes model/") or
            not found[1].startswith("kernels/sub/s.h:2: includes train/") or verdict(bad)[1] != 1):
        print("self-test FAILED: kernels/ including model/ and, through ../, train/ was not reported exactly once "
              "each:", found)
        ok = False
    for what, root, want in [("a tree without sources", empty, "no source file"),
                             ("a missing root", os.path.join(empty, "missing"), "is not a directory")]:
        lines, rc = verdict(root)
        if rc != 1 or not any(want in l for l in lines):
            print(f"self-test FAILED: {what} passed:", lines, rc)
            ok = False
    for d in made:
        shutil.rmtree(d, ignore_errors=True)
    print("self-test:", "ok" if ok else "FAILED")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    lines, rc = verdict(os.path.abspath(a.root))
    for line in lines:
        print(line)
    return rc


if __name__ == "__main__":
    sys.exit(main())
