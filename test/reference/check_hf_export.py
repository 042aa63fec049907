#!/usr/bin/env python3
"""Checks a --save directory without transformers: every file parses, the special-token ids agree between
config.json, generation_config.json and the tokenizer files, and (GPT-2) vocab.json + merges.txt, applied by the
byte-level BPE written out below from their documented meaning (openai/gpt-2 encoder.py's algorithm: GPT-2's
pre-tokenization regex, bytes_to_unicode, merge the lowest-ranked adjacent pair until none is in merges.txt),
reproduce tiktoken's r50k ids on the golden cases of data/gpt2/TestPlans.txt.

usage: check_hf_export.py gpt2 DIR TESTPLANS  |  check_hf_export.py llama DIR       (stdlib only)"""
import json
import os
import re
import sys
import unicodedata


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def load(d, name):
    path = os.path.join(d, name)
    if not os.path.exists(path):
        fail("missing " + name)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def bytes_to_unicode():
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    out, n = {}, 0
    for b in range(256):
        if b in printable:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


def char_class(pred):
    """A regex class of every code point whose Unicode category satisfies pred (re has no \\p{...})."""
    ranges, start = [], None
    for cp in range(0x110000):
        ok = pred(unicodedata.category(chr(cp)))
        if ok and start is None:
            start = cp
        if not ok and start is not None:
            ranges.append((start, cp - 1))
            start = None
    if start is not None:
        ranges.append((start, 0x10FFFF))
    esc = lambda c: "\\U%08x" % c
    return "".join(esc(a) if a == b else esc(a) + "-" + esc(b) for a, b in ranges)


def gpt2_pattern():
    L = char_class(lambda c: c.startswith("L"))
    N = char_class(lambda c: c.startswith("N"))
    pat = (r"'s|'t|'re|'ve|'m|'ll|'d| ?[%s]+| ?[%s]+| ?[^\s%s%s]+|\s+(?!\S)|\s+" % (L, N, L, N))
    return re.compile(pat)


def bpe(word, ranks):
    parts = list(word)
    while len(parts) > 1:
        best, best_rank = None, None
        for i in range(len(parts) - 1):
            r = ranks.get((parts[i], parts[i + 1]))
            if r is not None and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best is None:
            break
        parts[best:best + 2] = [parts[best] + parts[best + 1]]
    return parts


def check_common(d, eos, pad):
    cfg, gen = load(d, "config.json"), load(d, "generation_config.json")
    load(d, "special_tokens_map.json")
    for name, j in (("config.json", cfg), ("generation_config.json", gen)):
        if j.get("eos_token_id") != eos:
            fail("%s eos_token_id %s, the tokenizer's is %s" % (name, j.get("eos_token_id"), eos))
    if pad is not None and cfg.get("pad_token_id") != pad:
        fail("config.json pad_token_id %s, the tokenizer's is %s" % (cfg.get("pad_token_id"), pad))
    if not os.path.exists(os.path.join(d, "model.safetensors")):
        fail("missing model.safetensors")
    return cfg


def check_gpt2(d, plans):
    vocab = load(d, "vocab.json")
    tcfg = load(d, "tokenizer_config.json")
    with open(os.path.join(d, "merges.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    if not lines[0].startswith("#version"):
        fail("merges.txt lacks its #version line")
    merges = [tuple(l.split(" ")) for l in lines[1:] if l]
    if len(vocab) != 50257 or len(merges) != 50000:
        fail("%d vocab entries and %d merges; GPT-2 has 50257 and 50000" % (len(vocab), len(merges)))
    for i, (a, b) in enumerate(merges):
        if vocab.get(a + b) != 256 + i:
            fail("merge %d (%r %r) does not make token %d" % (i, a, b, 256 + i))
    eos = vocab.get(tcfg.get("eos_token"))
    cfg = check_common(d, eos, None)
    if cfg.get("vocab_size", 0) < len(vocab):
        fail("config.json vocab_size %s is below the tokenizer's %d" % (cfg.get("vocab_size"), len(vocab)))
    ranks = {m: i for i, m in enumerate(merges)}
    b2u = bytes_to_unicode()
    pat = gpt2_pattern()
    with open(plans, encoding="utf-8") as f:
        blocks = f.read().split("\n\n")
    compared = 0
    for blk in blocks:
        m = re.match(r"EncodingName: r50k_base\nSample: (.*)\nEncoded: \[(.*)\]\s*$", blk, re.S)
        if not m:
            continue
        text, want = m.group(1), [int(x) for x in m.group(2).split(",") if x.strip()]
        if any(c in text for c in "\x1c\x1d\x1e\x1f\x85"):  # where re's \s and PCRE2's differ
            continue
        ids = []
        for piece in pat.findall(text):
            word = "".join(b2u[b] for b in piece.encode("utf-8"))
            ids.extend(vocab[t] for t in bpe(word, ranks))
        if ids != want:
            fail("%r: the exported files give %s, tiktoken %s" % (text, ids[:20], want[:20]))
        compared += 1
    if compared < 40:
        fail("only %d golden cases compared" % compared)
    print("%d golden cases agree with tiktoken's ids; ids consistent (eos %d)" % (compared, eos))


def check_llama(d):
    tcfg = load(d, "tokenizer_config.json")
    if not os.path.exists(os.path.join(d, "spiece.model")):
        fail("missing spiece.model")
    if tcfg.get("tokenizer_class") != "T5Tokenizer" or tcfg.get("extra_ids") != 0:
        fail("tokenizer_config.json: %s" % tcfg)
    cfg = load(d, "config.json")
    check_common(d, cfg.get("eos_token_id"), cfg.get("pad_token_id"))
    print("llama export consistent")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "gpt2":
        check_gpt2(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "llama":
        check_llama(sys.argv[2])
    else:
        fail(__doc__)
