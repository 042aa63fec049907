#!/usr/bin/env python3
"""Builds the built-in corpus in data/builtin/ from the vendored Austen novels (data/austen/*.txt).

Outputs (shard format: data/README.md):
  austen_gpt2_train.bin / austen_gpt2_val.bin    GPT-2 r50k BPE, flat stream, each novel = [EOT] + tokens
  austen_spm8k.model                             SentencePiece unigram, 8000 pieces, T5 ids (pad 0, eos 1, unk 2)
  austen_llama_train.bin / austen_llama_val.bin  that model, flat stream, each paragraph = tokens + [EOS]
  expected_ids.txt                               first 16 ids of every shard, straight from the tokenizers,
                                                 so the C++ test checks our shards against them
Persuasion is the validation novel; the other five are training text.

Needs `pip install tiktoken sentencepiece` and nothing from the network: the GPT-2 ranks come from the
vendored data/gpt2/r50k_base.tiktoken. Run from anywhere:  python3 data/make_builtin_corpus.py
"""
import hashlib
import io
import os
import struct
import sys

import numpy as np
import sentencepiece as spm
import tiktoken
import tiktoken.load

HERE = os.path.dirname(os.path.abspath(__file__))
AUSTEN = os.path.join(HERE, "austen")
OUT = os.path.join(HERE, "builtin")
RANKS = os.path.join(HERE, "gpt2", "r50k_base.tiktoken")

# Fixed order so the train stream is reproducible; Persuasion is held out.
TRAIN_NOVELS = ["emma", "mansfield-park", "northanger-abbey", "pride-and-prejudice", "sense-and-sensibility"]
VAL_NOVELS = ["persuasion"]

GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
GPT2_EOT = 50256
GPT2_VOCAB = 50257
SPM_VOCAB = 8000
SPM_PAD, SPM_EOS, SPM_UNK = 0, 1, 2

# Header fields, see data/shard.h.
MAGIC, VERSION = 20240520, 1
LAYOUT_FLAT = 0
KIND_GPT2, KIND_SPM = 1, 2


def tokenizer_fields(tokenizer_file):
    """header[9], [10] and the name bytes of [16..79]: the first 8 bytes of the file's SHA-256 as a big-endian
    uint64, split into its low and high 32 bits (as int32), and the file's base name (data/tokenizer_id.h)."""
    with open(tokenizer_file, "rb") as f:
        h = int.from_bytes(hashlib.sha256(f.read()).digest()[:8], "big")
    lo, hi = h & 0xFFFFFFFF, h >> 32
    as_i32 = lambda v: v - (1 << 32) if v >= 1 << 31 else v
    return as_i32(lo), as_i32(hi), os.path.basename(tokenizer_file).encode()


def write_shard(path, tokens, vocab, kind, eos, tokenizer_file, pad=0):
    toks = np.asarray(tokens, dtype=np.int64)
    assert toks.size > 0 and toks.min() >= 0 and toks.max() < vocab < 65536
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2] = MAGIC, VERSION, toks.size
    header[3], header[4], header[5], header[6], header[7], header[8] = vocab, LAYOUT_FLAT, 0, kind, pad, eos
    header[9], header[10], name = tokenizer_fields(tokenizer_file)
    assert len(name) < 256
    header[16:80] = np.frombuffer(name.ljust(256, b"\0"), dtype="<i4")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header.tobytes())
        f.write(toks.astype("<u2").tobytes())
    os.replace(tmp, path)
    assert os.path.getsize(path) == 1024 + 2 * toks.size


def read_novel(name):
    with open(os.path.join(AUSTEN, name + ".txt"), encoding="utf-8") as f:
        return f.read()


def paragraphs(text):
    """Paragraphs = runs of non-blank lines; the hard line wraps inside one become single spaces."""
    paras, cur = [], []
    for line in text.split("\n"):
        if line.strip():
            cur.append(line.strip())
        elif cur:
            paras.append(" ".join(cur))
            cur = []
    if cur:
        paras.append(" ".join(cur))
    return paras


def gpt2_encoding():
    ranks = tiktoken.load.load_tiktoken_bpe(RANKS)  # a local path: no download
    assert len(ranks) == 50256
    return tiktoken.Encoding(name="r50k_base_local", pat_str=GPT2_PAT, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": GPT2_EOT}, explicit_n_vocab=GPT2_VOCAB)


def gpt2_stream(enc, novels):
    toks = []
    for name in novels:
        toks.append(GPT2_EOT)  # llm.c convention: EOT *before* each document
        toks.extend(enc.encode_ordinary(read_novel(name)))
    return toks


def train_spm(model_path):
    sentences = [p for name in TRAIN_NOVELS for p in paragraphs(read_novel(name))]
    model = io.BytesIO()
    # Single thread, no input sampling, fixed seed, text fed from memory (a file input would store
    # its temporary path in the model): the model is a pure function of the text (checked: two runs
    # give identical bytes). max_sentence_length is raised because a few paragraphs are longer than
    # the 4192-byte default and would be silently skipped.
    spm.set_random_generator_seed(1234)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, model_type="unigram",
        vocab_size=SPM_VOCAB, character_coverage=1.0, pad_id=SPM_PAD, eos_id=SPM_EOS, unk_id=SPM_UNK,
        bos_id=-1, num_threads=1, input_sentence_size=0, shuffle_input_sentence=False,
        max_sentence_length=1 << 16, minloglevel=2)
    with open(model_path, "wb") as f:
        f.write(model.getvalue())


def spm_stream(sp, novels):
    toks = []
    for name in novels:
        for ids in sp.encode(paragraphs(read_novel(name)), out_type=int):
            toks.extend(ids)
            toks.append(SPM_EOS)  # T5/GaLore convention: EOS *after* each document
    return toks


def main():
    os.makedirs(OUT, exist_ok=True)
    expected = []

    enc = gpt2_encoding()
    for split, novels in (("train", TRAIN_NOVELS), ("val", VAL_NOVELS)):
        toks = gpt2_stream(enc, novels)
        name = "austen_gpt2_%s.bin" % split
        write_shard(os.path.join(OUT, name), toks, GPT2_VOCAB, KIND_GPT2, GPT2_EOT, RANKS)
        expected.append((name, len(toks), toks[:16]))

    model_path = os.path.join(OUT, "austen_spm8k.model")
    train_spm(model_path)
    sp = spm.SentencePieceProcessor(model_file=model_path)
    assert sp.get_piece_size() == SPM_VOCAB and sp.pad_id() == SPM_PAD and sp.eos_id() == SPM_EOS
    for split, novels in (("train", TRAIN_NOVELS), ("val", VAL_NOVELS)):
        toks = spm_stream(sp, novels)
        name = "austen_llama_%s.bin" % split
        write_shard(os.path.join(OUT, name), toks, SPM_VOCAB, KIND_SPM, SPM_EOS, model_path, pad=SPM_PAD)
        expected.append((name, len(toks), toks[:16]))

    with open(os.path.join(OUT, "expected_ids.txt"), "w") as f:
        f.write("# Written by data/make_builtin_corpus.py from tiktoken / sentencepiece output (not read back\n")
        f.write("# from the shards). Columns: shard, number of tokens, first 16 token ids.\n")
        for name, n, first in expected:
            f.write("%s %d %s\n" % (name, n, " ".join(str(t) for t in first)))

    for name, n, first in expected:
        print("%-24s %9d tokens  first: %s" % (name, n, first[:8]))
    for name in sorted(os.listdir(OUT)):
        p = os.path.join(OUT, name)
        with open(p, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:16]
        print("%-24s %9d bytes  sha256 %s…" % (name, os.path.getsize(p), digest))
    print("tiktoken %s, sentencepiece %s, python %s" % (tiktoken.__version__, spm.__version__, sys.version.split()[0]))


if __name__ == "__main__":
    main()
