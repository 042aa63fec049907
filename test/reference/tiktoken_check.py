#!/usr/bin/env python3
"""tiktoken's GPT-2 ids for texts, for test/test_gpt2_tokenizer.cpp (the live comparison) and tools/bench_tokenizer.cpp.

  python3 tiktoken_check.py RANKS IN OUT

RANKS: r50k_base.tiktoken (the vendored data/gpt2 copy: no download). IN: texts, each an 8-byte
little-endian length then that many UTF-8 bytes. OUT: one line per text, its encode_ordinary ids
separated by spaces (an empty line for an empty text). Exits 3 when tiktoken is not installed.
"""
import struct
import sys

GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def gpt2_encoding(ranks_path):
    import tiktoken
    import tiktoken.load
    ranks = tiktoken.load.load_tiktoken_bpe(ranks_path)  # a local path: no download
    return tiktoken.Encoding(name="r50k_base_local", pat_str=GPT2_PAT, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256}, explicit_n_vocab=50257)


def read_texts(path):
    with open(path, "rb") as f:
        data = f.read()
    texts, pos = [], 0
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        texts.append(data[pos:pos + n].decode("utf-8"))  # strict: the C++ side sends valid UTF-8 only
        pos += n
    return texts


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        print("tiktoken is not installed (pip install tiktoken)", file=sys.stderr)
        sys.exit(3)
    enc = gpt2_encoding(sys.argv[1])
    with open(sys.argv[3], "w") as f:
        for text in read_texts(sys.argv[2]):
            f.write(" ".join(str(t) for t in enc.encode_ordinary(text)) + "\n")


if __name__ == "__main__":
    main()
