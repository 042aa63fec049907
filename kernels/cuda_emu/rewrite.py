#!/usr/bin/env python3
"""The emulated build's pre-pass: turns the CUDA syntax that is not C++ into calls of kernels/cuda_emu/cuda_emu.h.

    k<<<grid, block, smem, stream>>>(args)  ->  ::cuda_emu::launcher(::cuda_emu::cfg(grid, block, smem, stream),
                                                    [=](auto&&... a) { k(a...); }, <k's address if it has one>)(args)
    __shared__ T name[A][B];                ->  T (&name)[A][B] = ::cuda_emu::static_smem<T[A][B]>(key);
    extern __shared__ T name[];             ->  T* name = ::cuda_emu::dynamic_smem<T>();
    __global__ ... k(params) {              ->  ... { CUDA_EMU_DEVICE_CONTRACT ::cuda_emu::kernel_entry("k", ..);
    __global__ __launch_bounds__(M, ..) k(..) {  ->  ... { CUDA_EMU_DEVICE_CONTRACT ::cuda_emu::kernel_entry(.., (M));
    __device__ ... f(params) {              ->  ... { CUDA_EMU_DEVICE_CONTRACT
      (device code, not __host__ __device__: nvcc contracts a * b + c into an FMA in device code only; the macro is
      empty unless PRAC_EMU_FMA's build defines CUDA_EMU_FMA, cuda_emu.h)

Every edit stays on its line and the output starts with #line 1 "<original>", so compiler messages, __FILE__ in
barrier reports and AddressSanitizer's stack traces name the original file and line. Comments and string literals
are never edited.

    rewrite.py --src ROOT --out DIR [--touch] FILE...   rewrite each FILE (relative to ROOT) to DIR/FILE
    rewrite.py --list-kernels FILE...          print "file kernel" for every __global__ definition
"""
import argparse
import os
import re
import sys


def blank_comments_and_strings(s):
    """s with comments and string/char literals replaced by spaces (newlines kept): the text the patterns look at."""
    out = list(s)
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if s.startswith("//", i):
            j = s.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif s.startswith("/*", i):
            j = s.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if s[k] != "\n":
                    out[k] = " "
            i = j
        elif c in "\"'":
            # a digit separator (1'000) is not a character literal
            if c == "'" and i > 0 and s[i - 1].isalnum():
                i += 1
                continue
            j = i + 1
            while j < n and s[j] != c:
                j += 2 if s[j] == "\\" else 1
            for k in range(i + 1, min(j, n)):
                out[k] = " "
            i = j + 1
        else:
            i += 1
    return "".join(out)


def matching(code, i, open_ch, close_ch):
    """Index of the bracket closing the one at code[i]."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == open_ch:
            depth += 1
        elif code[j] == close_ch:
            depth -= 1
            if depth == 0:
                return j
    raise ValueError("unbalanced %s at offset %d" % (open_ch, i))


KERNEL = re.compile(r"\b__global__\b")
LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\(")
IDENT_BEFORE_PAREN = re.compile(r"([A-Za-z_]\w*)\s*\($")
DYN_SMEM = re.compile(r"\bextern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?([^;\[\]]*?)\s*\b([A-Za-z_]\w*)\s*\[\s*\]\s*;")
STATIC_SMEM = re.compile(r"\b__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?([^;\[\]=]*?)\s*\b([A-Za-z_]\w*)\s*((?:\[[^\];]+\]\s*)*);")


def callee_start(code, i):
    """Start of the kernel expression that ends before code[i] ('<<<'): an identifier, optionally qualified (a::b)
    and followed by template arguments (k<T, 4>)."""
    j = i - 1
    while True:
        while j >= 0 and code[j].isspace():
            j -= 1
        if j >= 0 and code[j] == ">":
            depth = 0
            while j >= 0:
                depth += {">": 1, "<": -1}.get(code[j], 0)
                if depth == 0:
                    break
                j -= 1
            j -= 1
            while j >= 0 and code[j].isspace():
                j -= 1
        end = j
        while j >= 0 and (code[j].isalnum() or code[j] == "_"):
            j -= 1
        if j == end:
            raise ValueError("no kernel name before <<< at offset %d" % i)
        k = j
        while k >= 0 and code[k].isspace():
            k -= 1
        if k >= 1 and code[k] == ":" and code[k - 1] == ":":
            j = k - 2
            continue
        return j + 1


def find_kernels(code):
    """(name, offset just past the body's '{') of every __global__ definition in the blanked code."""
    found = []
    for m in KERNEL.finditer(code):
        i = m.end()
        # the kernel's name is the identifier before the first '(' that does not open __launch_bounds__(...)
        bound = None  # the span of __launch_bounds__'s first argument, maxThreadsPerBlock
        while True:
            p = code.find("(", i)
            if p < 0:
                raise ValueError("__global__ without a parameter list at offset %d" % m.start())
            head = code[m.end():p + 1]
            lb = LAUNCH_BOUNDS.search(code, i, p + 1)
            if lb and lb.end() - 1 == p:
                i = matching(code, p, "(", ")") + 1
                bound = (p + 1, top_level_comma(code, p + 1, i - 1))
                continue
            name = IDENT_BEFORE_PAREN.search(head)
            break
        close = matching(code, p, "(", ")")
        j = close + 1
        while j < len(code) and code[j] not in "{;":
            j += 1
        if j < len(code) and code[j] == "{":
            found.append((name.group(1), j + 1, bound))
    return found


DEVICE = re.compile(r"\b__device__\b")


def find_device_functions(code):
    """Offsets just past the body's '{' of every __device__ function definition that is not also __host__ (a
    __device__ variable, or a declaration, has no body)."""
    found = []
    for m in DEVICE.finditer(code):
        head_start = max(code.rfind(";", 0, m.start()), code.rfind("}", 0, m.start()), code.rfind("{", 0, m.start()))
        p = code.find("(", m.end())
        semi = code.find(";", m.end())
        if p < 0 or (0 <= semi < p) or "__host__" in code[head_start + 1:p]:
            continue
        j = matching(code, p, "(", ")") + 1
        while j < len(code) and code[j] not in "{;=":
            j += 1
        if j < len(code) and code[j] == "{":
            found.append(j + 1)
    return found


def top_level_comma(code, lo, hi):
    """The offset of the first ',' in code[lo:hi] outside brackets (hi when there is none)."""
    depth = 0
    for j in range(lo, hi):
        depth += {"(": 1, "[": 1, "{": 1, "<": 1, ")": -1, "]": -1, "}": -1, ">": -1}.get(code[j], 0)
        if code[j] == "," and depth == 0:
            return j
    return hi


def rewrite(text):
    code = blank_comments_and_strings(text)
    edits = []  # (start, end, replacement), non-overlapping
    for m in DYN_SMEM.finditer(code):
        t, name = m.group(1).strip(), m.group(2)
        edits.append((m.start(), m.end(), "%s* %s = ::cuda_emu::dynamic_smem<%s>();" % (t, name, t)))
    dyn_spans = [(a, b) for a, b, _ in edits]
    for m in STATIC_SMEM.finditer(code):
        if any(a <= m.start() < b for a, b in dyn_spans):
            continue
        t, name, dims = m.group(1).strip(), m.group(2), re.sub(r"\s+", "", m.group(3))
        ref = "(&%s)%s" % (name, dims) if dims else "&%s" % name
        edits.append((m.start(), m.end(),
                      "%s %s = ::cuda_emu::static_smem<%s%s>(CUDA_EMU_SMEM_KEY());" % (t, ref, t, dims)))
    for name, pos, bound in find_kernels(code):
        limit = ", (%s)" % " ".join(text[bound[0]:bound[1]].split()) if bound else ""
        edits.append((pos, pos, ' CUDA_EMU_DEVICE_CONTRACT ::cuda_emu::kernel_entry("%s", __PRETTY_FUNCTION__%s);'
                      % (name, limit)))
    for pos in find_device_functions(code):
        edits.append((pos, pos, " CUDA_EMU_DEVICE_CONTRACT"))
    for m in re.finditer(r"<<<", code):
        close = code.find(">>>", m.end())
        if close < 0:
            raise ValueError("<<< without >>> at offset %d" % m.start())
        start = callee_start(code, m.start())
        kernel = re.sub(r"\s+", " ", text[start:m.start()].strip())
        config = text[m.end():close]
        addr = "::cuda_emu::kernel_ptr<decltype(cuda_emu_t)>(%s)" % kernel
        call = ("::cuda_emu::launcher(::cuda_emu::cfg(%s), [=](auto&&... cuda_emu_a) { %s(cuda_emu_a...); }, "
                "[&](auto cuda_emu_t) -> decltype(%s) { return %s; })" % (" ".join(config.split()), kernel, addr, addr))
        newlines = text.count("\n", start, close + 3)  # keep the line count: diagnostics map to the original
        edits.append((start, close + 3, call + "\n" * newlines))
    edits.sort()
    out, last = [], 0
    for a, b, r in edits:
        if a < last:
            raise ValueError("overlapping rewrites at offset %d" % a)
        out.append(text[last:a])
        out.append(r)
        last = b
    out.append(text[last:])
    return "".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", help="the source root the FILEs are relative to")
    ap.add_argument("--out", help="where the rewritten files go")
    ap.add_argument("--list-kernels", action="store_true")
    ap.add_argument("--touch", action="store_true", help="update the output's time even when its text is unchanged "
                    "(the build asked for it because the original changed)")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    for f in a.files:
        path = os.path.join(a.src, f) if a.src else f
        with open(path, encoding="utf-8") as fp:
            text = fp.read()
        try:
            if a.list_kernels:
                for name, _, _ in find_kernels(blank_comments_and_strings(text)):
                    print(f, name)
                continue
            new = '#line 1 "%s"\n' % os.path.abspath(path) + rewrite(text)
        except ValueError as e:
            sys.exit("rewrite.py: %s: %s" % (path, e))
        dst = os.path.join(a.out, f)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        old = None
        if os.path.exists(dst):
            with open(dst, encoding="utf-8") as fp:
                old = fp.read()
        if old != new:
            with open(dst, "w", encoding="utf-8") as fp:
                fp.write(new)
        elif a.touch:
            os.utime(dst)


if __name__ == "__main__":
    main()
