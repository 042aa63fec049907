#!/usr/bin/env python3
"""A RoBERTa-style vocab.json + merges.txt from the vendored GPT-2 ranks, for test/test_roberta_tokenizer.cpp.

  python3 make_roberta_vocab.py RANKS OUT_DIR

No download (the Hugging Face hub is out of reach) and no dependency beyond Python. RoBERTa's own files are GPT-2's
BPE with fairseq's id order; these mimic that shape from data/gpt2/r50k_base.tiktoken:
  - merges.txt: "#version: 0.2", then for each rank r >= 256 in order the two tokens whose merge made it (the byte-pair
    merge of its bytes restricted to lower ranks ends in exactly two parts), written in GPT-2's byte -> character map;
  - vocab.json: <s>=0 <pad>=1 </s>=2 <unk>=3 (RoBERTa's), then the 50,256 GPT-2 tokens in a seeded random order
    (ids that do not follow the merge order, as fairseq's dictionary order in roberta-base), then
    madeupword0000..0002 (roberta-base has them: vocabulary entries no merge makes) and <mask> last;
  - json/tokenizer.json: the same model as roberta-base's tokenizer.json lays it out (merges as "a b" strings,
    <mask> an added token with lstrip, so the whitespace before it goes with it).
Deterministic: the same files on every run.
"""
import base64
import json
import os
import random
import sys


def bytes_to_unicode():
    # GPT-2's map as its encoder.py documents it: printable Latin-1 bytes stand for themselves, the other 68 bytes
    # take the code points 256, 257, ... in byte order.
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    out, n = {}, 0
    for b in range(256):
        if b in printable:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ranks_path, out_dir = sys.argv[1], sys.argv[2]
    ranks = {}
    with open(ranks_path, "rb") as f:
        for line in f:
            if line.strip():
                tok, r = line.split()
                ranks[base64.b64decode(tok)] = int(r)
    by_rank = sorted(ranks, key=ranks.get)
    assert [ranks[t] for t in by_rank] == list(range(len(by_rank))) and all(len(t) == 1 for t in by_rank[:256])
    enc = bytes_to_unicode()
    text = lambda b: "".join(enc[c] for c in b)  # noqa: E731

    merges = []
    for r in range(256, len(by_rank)):
        parts = [bytes([c]) for c in by_rank[r]]
        while len(parts) > 2:
            best = min(range(len(parts) - 1), key=lambda i: (ranks.get(parts[i] + parts[i + 1], r), i))
            assert ranks.get(parts[best] + parts[best + 1], r) < r, f"rank {r} is no merge of lower ranks"
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        assert len(parts) == 2
        merges.append(text(parts[0]) + " " + text(parts[1]))

    order = list(range(len(by_rank)))
    random.Random(17).shuffle(order)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for r in order:
        vocab[text(by_rank[r])] = len(vocab)
    for k in range(3):
        vocab[f"madeupword{k:04d}"] = len(vocab)
    vocab["<mask>"] = len(vocab)

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(out_dir, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(merges) + "\n")

    added = lambda name, lstrip: {"id": vocab[name], "content": name, "single_word": False,  # noqa: E731
                                  "lstrip": lstrip, "rstrip": False, "normalized": False, "special": True}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(t, t == "<mask>") for t in ("<s>", "<pad>", "</s>", "<unk>", "<mask>")],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0], "trim_offsets": True,
                           "add_prefix_space": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                  "merges": merges},
    }
    os.makedirs(os.path.join(out_dir, "json"), exist_ok=True)
    with open(os.path.join(out_dir, "json", "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
