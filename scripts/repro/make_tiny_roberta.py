#!/usr/bin/env python3
"""A tiny random RoBERTa and small synthetic GLUE-layout tasks for table5.py --quick and the fine-tuning CLI tests.

Writes, with the standard library only (no torch, no numpy):
  MODEL/config.json, model.safetensors (a RobertaModel's names under "roberta.", as roberta-base's checkpoint: no
      classifier, so fine-tuning starts with a new head), vocab.json + merges.txt (byte-level BPE: the 256 byte
      symbols, the special tokens and whole-word tokens for the synthetic words)
  DATA/mrpc/{train,dev}.tsv  MRPC's TSV layout. Label 1 when the second sentence is made of "animal" words, 0 when of
      "colour" words (the first sentence is random): learnable from one sentence, so a few epochs of a tiny model
      reach well above chance; a pipeline check, not a paraphrase task.
  DATA/stsb/{train,dev}.tsv  STS-B's TSV layout. The score is 5 x the fraction of animal words in both sentences.
  DATA/sst2/{train,dev}.tsv  SST-2's layout. Label 1 when the sentence has more animal than colour words.
Everything is a function of --seed.
"""
import argparse
import json
import math
import os
import random
import struct

ANIMALS = ["cat", "dog", "cow", "hen", "fox", "owl", "pig", "rat", "bee", "elk"]
COLOURS = ["red", "blue", "green", "pink", "gray", "gold", "tan", "teal", "plum", "jade"]
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]  # ids 0..3 as roberta-base; <mask> is the last id


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map (the symbols vocab.json is written in)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, n = keep[:], 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(keep, chars)}


def write_tokenizer(out):
    b2u = bytes_to_unicode()
    vocab = {s: i for i, s in enumerate(SPECIALS)}
    for b in range(256):
        vocab[b2u[b]] = len(vocab)
    merges = []
    for w in ANIMALS + COLOURS:  # " word" merges left to right into one token: "Ġ c", "Ġc a", "Ġca t"
        sym = [b2u[ord(" ")]] + list(w)
        cur = sym[0]
        for s in sym[1:]:
            if f"{cur} {s}" not in merges:
                merges.append(f"{cur} {s}")
            cur += s
            if cur not in vocab:
                vocab[cur] = len(vocab)
    vocab["<mask>"] = len(vocab)
    with open(os.path.join(out, "vocab.json"), "w") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n" + "\n".join(merges) + "\n")
    return len(vocab)


def write_model(out, vocab_size, args, rng):
    C, L, F, P = args.hidden, args.layers, 4 * args.hidden, args.max_len + 2
    config = {
        "architectures": ["RobertaForMaskedLM"], "model_type": "roberta", "vocab_size": vocab_size, "hidden_size": C,
        "num_hidden_layers": L, "num_attention_heads": args.heads, "intermediate_size": F,
        "max_position_embeddings": P, "type_vocab_size": 1, "pad_token_id": 1, "bos_token_id": 0,
        "eos_token_id": 2, "layer_norm_eps": 1e-5, "hidden_act": "gelu", "initializer_range": args.init_std,
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    tensors = []  # (name, shape, values)

    def normal(name, shape, pad_row=False):
        n = math.prod(shape)
        v = [rng.gauss(0.0, args.init_std) for _ in range(n)]
        if pad_row:  # nn.Embedding's padding_idx row (1) is zero
            v[shape[1]:2 * shape[1]] = [0.0] * shape[1]
        tensors.append((name, shape, v))

    def const(name, shape, x):
        tensors.append((name, shape, [x] * math.prod(shape)))

    e = "roberta.embeddings."
    normal(e + "word_embeddings.weight", [vocab_size, C], True)
    normal(e + "position_embeddings.weight", [P, C], True)
    normal(e + "token_type_embeddings.weight", [1, C])
    const(e + "LayerNorm.weight", [C], 1.0)
    const(e + "LayerNorm.bias", [C], 0.0)
    for l in range(L):
        h = f"roberta.encoder.layer.{l}."
        for part, (o, i) in [("attention.self.query", (C, C)), ("attention.self.key", (C, C)),
                             ("attention.self.value", (C, C)), ("attention.output.dense", (C, C)),
                             ("intermediate.dense", (F, C)), ("output.dense", (C, F))]:
            normal(h + part + ".weight", [o, i])
            const(h + part + ".bias", [o], 0.0)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            const(h + ln + ".weight", [C], 1.0)
            const(h + ln + ".bias", [C], 0.0)
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, v in tensors:
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + 4 * len(v)]}
        offset += 4 * len(v)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, _, v in tensors:
            f.write(struct.pack(f"<{len(v)}f", *v))


def sentence(rng, pool, n_min=3, n_max=7):
    return " ".join(rng.choice(pool) for _ in range(rng.randint(n_min, n_max)))


def write_tasks(out, rng, n_train, n_dev):
    def tsv(task, split, header, rows):
        os.makedirs(os.path.join(out, task), exist_ok=True)
        with open(os.path.join(out, task, split + ".tsv"), "w") as f:
            f.write("\t".join(header) + "\n")
            for r in rows:
                f.write("\t".join(str(x) for x in r) + "\n")

    for split, n in (("train", n_train), ("dev", n_dev)):
        rows = []
        for i in range(n):
            label = rng.randint(0, 1)
            s1 = sentence(rng, ANIMALS + COLOURS)
            s2 = sentence(rng, ANIMALS if label else COLOURS)
            rows.append((label, 2 * i, 2 * i + 1, s1, s2))
        tsv("mrpc", split, ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"], rows)
        rows = []
        for i in range(n):
            p = rng.random()  # each word is an animal with probability p
            w1 = [rng.choice(ANIMALS) if rng.random() < p else rng.choice(COLOURS) for _ in range(rng.randint(3, 7))]
            w2 = [rng.choice(ANIMALS) if rng.random() < p else rng.choice(COLOURS) for _ in range(rng.randint(3, 7))]
            score = 5.0 * sum(w in ANIMALS for w in w1 + w2) / len(w1 + w2)
            rows.append((i, "synthetic", "none", 2026, i, "none", "none", " ".join(w1), " ".join(w2), f"{score:.3f}"))
        tsv("stsb", split, ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1",
                            "sentence2", "score"], rows)
        rows = []
        for i in range(n):
            words = [rng.choice(ANIMALS + COLOURS) for _ in range(rng.randint(3, 7) | 1)]  # odd: no ties
            rows.append((" ".join(words), int(sum(w in ANIMALS for w in words) * 2 > len(words))))
        tsv("sst2", split, ["sentence", "label"], rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--data-dir", help="also write the synthetic tasks here")
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--max-len", type=int, default=64, help="positions (max_position_embeddings = this + 2)")
    ap.add_argument("--init-std", type=float, default=0.02)
    ap.add_argument("--train", type=int, default=256, help="training examples per task")
    ap.add_argument("--dev", type=int, default=128, help="dev examples per task")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    os.makedirs(args.model_dir, exist_ok=True)
    write_model(args.model_dir, write_tokenizer(args.model_dir), args, rng)
    if args.data_dir:
        write_tasks(args.data_dir, rng, args.train, args.dev)


if __name__ == "__main__":
    main()
