#!/usr/bin/env python3
"""transformers' RoBERTa ids for test/test_roberta_tokenizer.cpp (the live comparison).

  python3 roberta_tokenizer_check.py MODEL_DIR IN OUT [MODEL_DIR IN OUT ...]

MODEL_DIR: vocab.json + merges.txt, or tokenizer.json, loaded with RobertaTokenizerFast.from_pretrained (the Rust
tokenizers; transformers 5 has no other RoBERTa tokenizer). Where transformers still has the Python RobertaTokenizer
(version 4) and the directory has vocab.json, that one must give the same ids for every case without truncation
(their truncation rules differ on ties; their <mask> handling agrees), else this exits 1.
IN: cases, each: int64 max_length (little-endian; 0 = no truncation), one byte kind (0: the text alone without
special tokens, 1: <s> A </s>, 2: the pair, batched as GLUE scripts call it), then text A and text B, each an int64
length and UTF-8 bytes. OUT: one line per case, the input_ids separated by spaces.
Exits 3 when transformers is not installed. No network: the files are local.
"""
import struct
import sys


def read_cases(path):
    with open(path, "rb") as f:
        data = f.read()
    cases, pos = [], 0
    while pos < len(data):
        max_length, kind = struct.unpack_from("<qB", data, pos)
        pos += 9
        texts = []
        for _ in range(2):
            (n,) = struct.unpack_from("<q", data, pos)
            pos += 8
            texts.append(data[pos:pos + n].decode("utf-8"))  # strict: the C++ side sends valid UTF-8 only
            pos += n
        cases.append((max_length, kind, texts[0], texts[1]))
    return cases


def encode(tok, case):
    max_length, kind, a, b = case
    trunc = dict(truncation="longest_first", max_length=max_length) if max_length > 0 else {}
    if kind == 0:
        return tok(a, add_special_tokens=False)["input_ids"]
    if kind == 1:
        return tok(a, **trunc)["input_ids"]
    return tok([a], [b], **trunc)["input_ids"][0]


def main():
    if len(sys.argv) < 4 or (len(sys.argv) - 1) % 3:
        sys.exit(__doc__)
    try:
        import transformers
        from transformers import RobertaTokenizerFast
    except ImportError:
        print("transformers is not installed (pip install transformers)", file=sys.stderr)
        sys.exit(3)
    import os
    for model_dir, cases_path, out_path in zip(sys.argv[1::3], sys.argv[2::3], sys.argv[3::3]):
        cases = read_cases(cases_path)
        fast = RobertaTokenizerFast.from_pretrained(model_dir)
        ids = [encode(fast, c) for c in cases]
        slow_cls = getattr(transformers, "RobertaTokenizer", None)
        if slow_cls is not None and slow_cls is not RobertaTokenizerFast and \
                os.path.exists(os.path.join(model_dir, "vocab.json")):
            slow = slow_cls.from_pretrained(model_dir)
            checked = 0
            for c, want in zip(cases, ids):
                if c[0] == 0:
                    got = encode(slow, c)
                    if got != want:
                        sys.exit(f"transformers' Python RobertaTokenizer and RobertaTokenizerFast disagree on {c!r}: "
                                 f"{got} vs {want}")
                    checked += 1
            print(f"(transformers {transformers.__version__}: the Python and Rust tokenizers agree on {checked} "
                  f"cases of {model_dir})", file=sys.stderr)
        with open(out_path, "w") as f:
            for row in ids:
                f.write(" ".join(str(t) for t in row) + "\n")


if __name__ == "__main__":
    main()
