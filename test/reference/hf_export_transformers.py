#!/usr/bin/env python3
"""The --save directory in Hugging Face transformers, in two parts (the first argument; both when none is given):

From the repository root: prep_data tokenizes a text (GPT-2; and LLaMA with its own --spm-vocab model), a tiny
model trains a few steps on it and is saved with --save; then
  tokenizer: AutoTokenizer.from_pretrained(dir) must give, for every paragraph, exactly the ids prep_data wrote into
             the shard (GPT-2: EOT + ids; LLaMA/T5: ids + EOS) and decode them back to the text (transformers alone:
             its tokenizers need no torch);
  generate:  AutoModelForCausalLM.from_pretrained(dir).generate() must produce new tokens (needs torch).
Exit 77 (skipped) when a part's imports are missing, except that REQUIRE_TRANSFORMERS=1 (CI, which installs
transformers but not torch) makes a missing transformers a failure of the tokenizer part."""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

PARTS = sys.argv[1:] or ["tokenizer", "generate"]
if not set(PARTS) <= {"tokenizer", "generate"}:
    sys.exit("usage: hf_export_transformers.py [tokenizer] [generate]")
try:
    from transformers import AutoTokenizer
    if "generate" in PARTS:
        import torch
        from transformers import AutoModelForCausalLM
except Exception as e:  # noqa: BLE001
    needed = "transformers and torch" if "generate" in PARTS else "transformers"
    if os.environ.get("REQUIRE_TRANSFORMERS") == "1" and PARTS == ["tokenizer"]:
        sys.exit("FAIL: transformers is not importable (%s), and REQUIRE_TRANSFORMERS=1" % e)
    print("skipped: %s not importable (%s)" % (needed, e))
    sys.exit(77)


def run(cmd):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="2"))
    if r.returncode != 0:
        print(r.stdout + r.stderr)
        sys.exit("FAIL: " + cmd)
    return r.stdout + r.stderr


def shard_tokens(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<i", data[8:12])[0]
    return list(struct.unpack("<%dH" % n, data[1024:1024 + 2 * n]))


def paragraphs(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    out, cur = [], []
    for line in text.split("\n"):
        if line.strip(" \t") == "":
            if cur:
                out.append("\n".join(cur))
            cur = []
        else:
            cur.append(line.rstrip("\r"))
    if cur:
        out.append("\n".join(cur))
    return out


def check(family, d, shard, docs, eos, eos_first):
    tok = AutoTokenizer.from_pretrained(d)
    want = shard_tokens(shard)
    got = []
    for p in docs:
        ids = tok(p)["input_ids"] if not eos_first else [eos] + tok(p)["input_ids"]
        got.extend(ids)
    if got != want:
        i = next(k for k in range(min(len(got), len(want))) if got[k] != want[k]) if got[:len(want)] != want[:len(got)] else min(len(got), len(want))
        sys.exit("FAIL %s: the exported tokenizer's ids differ from the shard at token %d: %s vs %s"
                 % (family, i, got[i:i + 8], want[i:i + 8]))
    for p in docs[:50]:
        back = tok.decode(tok(p, add_special_tokens=False)["input_ids"])
        if family == "gpt2" and back != p:
            sys.exit("FAIL gpt2: decode(encode(%r)) = %r" % (p, back))
    if "tokenizer" in PARTS:
        print("%s: %d paragraphs, %d tokens of AutoTokenizer equal to the shard" % (family, len(docs), len(want)))
    if "generate" not in PARTS:
        return
    model = AutoModelForCausalLM.from_pretrained(d)
    model.eval()
    prompt = tok(docs[0][:40], add_special_tokens=False, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**prompt, max_new_tokens=12, do_sample=True)
    new = out[0, prompt["input_ids"].shape[1]:]
    if len(new) == 0:
        sys.exit("FAIL %s: generate() produced nothing" % family)
    print("%s: generated %r" % (family, tok.decode(new)))


def main():
    tmp = tempfile.mkdtemp(prefix="prac_hf_")
    try:
        with open("data/austen/pride-and-prejudice.txt", encoding="utf-8") as f:
            text = f.read()
        text = text[:text.find("\n\n", 40000) + 1]
        book = os.path.join(tmp, "book.txt")
        with open(book, "w", encoding="utf-8") as f:
            f.write(text)
        docs = paragraphs(book)
        tiny = " --device cpu --seq-len 64 --batch-size 2 --steps 3 --eval-tokens 256 --no-shuffle"
        run("./prep_data --tokenizer gpt2 --no-val --quiet --input %s --out %s/g" % (book, tmp))
        run("./train_gpt2 --model gpt2-tiny --train-data '%s/g_train_*.bin' --val-data '%s/g_train_*.bin' --save %s/gx"
            % (tmp, tmp, tmp) + tiny)
        check("gpt2", tmp + "/gx", tmp + "/g_train_000000.bin", docs, 50256, True)
        run("./prep_data --spm-vocab 600 --threads 2 --no-val --quiet --input %s --out %s/l" % (book, tmp))
        run("./train_llama --model llama-tiny --train-data '%s/l_train_*.bin' --val-data '%s/l_train_*.bin' --save %s/lx"
            % (tmp, tmp, tmp) + tiny)
        check("llama", tmp + "/lx", tmp + "/l_train_000000.bin", docs, 1, False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
