#!/usr/bin/env python3
"""Builds the fixtures of test/test_prep.cpp (prep_data and SpmTokenizer) in test/fixtures/prep/.

Inputs in every format prep_data reads, all tiny: C4-like JSON lines (.json.gz, two gzip members), a
.jsonl.zst with the text in "content", a .json.xz, an OpenWebText-like nested archive (owt.tar.xz holding
openwebtext/urlsf_subset00-N_data.xz, each an xz-compressed tar of .txt files), a directory of .txt files
(one with invalid UTF-8, one empty), a blank-line-separated text; damaged copies (truncated, flipped bytes)
and bad JSON lines; a SentencePiece model without EOS.

expected.json holds what prep_data must write for each case of the C++ test, computed here independently:
GPT-2 ids from tiktoken (the vendored data/gpt2/r50k_base.tiktoken, as data/make_builtin_corpus.py) and
SentencePiece ids from python sentencepiece with data/builtin/austen_spm8k.model, checked equal to Debian's
spm_encode (the C++ library's version) on every document when that tool is installed. For each split:
documents, tokens, the first 16 tokens and the FNV-1a 64 hash of the tokens as little-endian uint16 bytes.
The C++ test passes the options listed under "args" (plus --out).

Needs `pip install tiktoken sentencepiece zstandard` (without zstandard the zstd CLI is used). No network.
Run from anywhere:  python3 test/reference/make_prep_fixtures.py
"""
import gzip
import hashlib
import io
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tarfile

import sentencepiece as spm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "data"))
import make_builtin_corpus as corpus  # noqa: E402  (its GPT-2 encoding and paragraph splitting)

OUT = os.path.join(ROOT, "test", "fixtures", "prep")
MODEL = os.path.join(ROOT, "data", "builtin", "austen_spm8k.model")
EOT, SPM_EOS, SPM_PAD = 50256, 1, 0

enc = corpus.gpt2_encoding()
sp = spm.SentencePieceProcessor(model_file=MODEL)
SPM_ENCODE = shutil.which("spm_encode")


# ---- the documents -----------------------------------------------------------------------------------------
def make_docs():
    # Pride and Prejudice (not Persuasion, which holds the paragraph whose score tie Debian's 0.1.97 breaks
    # differently from python's 0.2.x, see data/README.md).
    paras = corpus.paragraphs(corpus.read_novel("pride-and-prejudice"))[20:]
    docs = []
    for i in range(30):
        docs.append("\n\n".join(paras[3 * i: 3 * i + 1 + i % 3]))
    docs.insert(3, "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e \u2014 na\u00efve r\u00e9sum\u00e9, \u00bfqu\u00e9 tal?")
    docs.insert(7, "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 and emoji \U0001F600\U0001F680 too!")
    docs.insert(11, "A literal <|endoftext|> inside a document is ordinary text, and so is </s>.")
    docs.insert(15, " ".join(paras[200:240]))  # long: > 255 SentencePiece ids, > 1000 GPT-2 tokens
    docs.insert(19, "Tabs\tand  double  spaces,\nand a line break.")
    return docs


OWT_DOCS_RAW = [
    "\n\nLeading newlines, then text.\n\n\n\nAfter four newlines.\n\n\n\n\n\nAfter six.  \n\n",
    "Windows\r\nline endings\r\n\r\n\r\nand old Mac\rones.",
    "\u00a0\u2003Unicode spaces around\u3000 the text.\u2028",
    "Plain document without anything special.",
]


# ---- tokenization and layout (independent of the C++ code) -----------------------------------------------------
def spm_ids(text):
    return sp.encode(text, out_type=int)


def gpt2_ids(text):
    return enc.encode_ordinary(text)


def layout(ids, kind, rows=0):
    if rows:
        keep = ids[: rows - 1]
        return keep + [SPM_EOS] + [SPM_PAD] * (rows - 1 - len(keep))
    if kind == "gpt2":
        return [EOT] + ids
    return ids + [SPM_EOS]


def fnv64(tokens):
    h = 0xCBF29CE484222325
    for t in tokens:
        for byte in (t & 0xFF, t >> 8):
            h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def split_stats(docs_tokens, truncated=0):
    toks = [t for d in docs_tokens for t in d]
    return {"docs": len(docs_tokens), "tokens": len(toks), "first": toks[:16], "fnv": fnv64(toks),
            "truncated": truncated}


def splitmix_val(index, seed, fraction):
    """prep_data's --val-fraction rule: the index-th output of SplitMix64(seed) / 2^64 < fraction."""
    m = 0xFFFFFFFFFFFFFFFF
    z = (seed + (index + 1) * 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    z ^= z >> 31
    return (z >> 11) / 2.0 ** 53 < fraction


def owt_clean(text):
    """Hugging Face's openwebtext loader: text-mode newlines, re.sub("\\n\\n\\n+", "\\n\\n", t).strip()."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return re.sub("\n\n\n+", "\n\n", text).strip()


def check_spm_encode(texts):
    """Debian's spm_encode (the library the C++ code links) must agree with python on every text."""
    if not SPM_ENCODE:
        print("warning: spm_encode not found (apt-get install sentencepiece): not cross-checked")
        return
    lines = [t.replace("\n", " ").replace("\r", " ") for t in texts]
    assert all(spm_ids(a) == spm_ids(b) for a, b in zip(texts, lines)), "newlines are not spaces to this model?"
    res = subprocess.run([SPM_ENCODE, "--model=" + MODEL, "--output_format=id"], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, check=True)
    got = [[int(x) for x in line.split()] for line in res.stdout.split("\n")[: len(lines)]]
    for t, g in zip(lines, got):
        assert g == spm_ids(t), "spm_encode and python sentencepiece differ on %r" % t[:80]


# ---- writers -----------------------------------------------------------------------------------------------
def wfile(name, data):
    path = os.path.join(OUT, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def jsonl(objs):
    return "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs).encode("utf-8")


def gz(data):
    return gzip.compress(data, mtime=0)


def xz(data):
    return lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64)


def zst(data):
    try:
        import zstandard
        return zstandard.ZstdCompressor(level=3).compress(data)
    except ImportError:
        return subprocess.run(["zstd", "-q", "-c", "-3"], input=data, capture_output=True, check=True).stdout


def tar(entries):
    """entries: [(name, bytes)], in order, with fixed metadata so the bytes are reproducible."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
            else:
                info.size = len(data)
                info.mode = 0o644
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def flip(data, at):
    b = bytearray(data)
    for i in range(at, min(at + 16, len(b))):
        b[i] ^= 0x5A
    return bytes(b)


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    docs = make_docs()
    check_spm_encode(docs + [owt_clean(t) for t in OWT_DOCS_RAW])
    cases, meta = {}, {}

    # C4-like train and validation JSON lines (.json.gz; the train file is two gzip members).
    c4 = [{"text": t, "timestamp": "2019-04-25T12:57:54Z", "url": "https://example.com/%d" % i}
          for i, t in enumerate(docs)]
    c4_val = [{"text": t, "timestamp": "2019-04-25T12:57:54Z", "url": "https://example.org/%d" % i}
              for i, t in enumerate(docs[-6:][::-1])]
    train_gz = gz(jsonl(c4[:20])) + gz(jsonl(c4[20:]))
    wfile("c4_train.json.gz", train_gz)
    wfile("c4_val.json.gz", gz(jsonl(c4_val)))
    # Other formats and field names.
    wfile("docs.jsonl.zst", zst(jsonl([{"id": i, "content": t} for i, t in enumerate(docs[:12])])))
    wfile("docs.json.xz", xz(jsonl([{"text": t} for t in docs[12:24]]) + b"\n  \n"))  # blank lines: no records
    # OpenWebText's layout: openwebtext.tar.xz > openwebtext/urlsf_subsetNN-M_data.xz (xz tars of .txt files).
    owt_docs = OWT_DOCS_RAW + docs[:16]
    inner = []
    for part, chunk in ((1, owt_docs[:12]), (2, owt_docs[12:])):
        files = [("%07d-%s.txt" % (part * 100 + i, hashlib.md5(t.encode()).hexdigest()), t.encode("utf-8"))
                 for i, t in enumerate(chunk)]
        inner.append(("openwebtext/urlsf_subset00-%d_data.xz" % part, xz(tar(files))))
    owt = xz(tar([("openwebtext", None), ("openwebtext/README", b"not a document\n")] + inner))
    wfile("owt.tar.xz", owt)
    # A directory of .txt files: one with invalid UTF-8 (replaced by U+FFFD), one empty (skipped), one ignored.
    dir_raw = [("texts/a.txt", docs[0].encode()), ("texts/b.txt", b"Bad \xff\xfe bytes and a cut \xe2\x82 end"),
               ("texts/empty.txt", b""), ("texts/sub/c.txt", docs[1].encode())]
    for name, data in dir_raw:
        wfile(name, data)
    wfile("texts/notes.md", b"not a .txt file: ignored\n")
    # Blank-line separated paragraphs, partly CRLF, blank lines with spaces.
    paras_text = "First paragraph,\nwrapped over\nthree lines.\n\n   \n\nSecond one.\r\n\r\nThird,\r\nCRLF.\n\n\n"
    wfile("paras.txt", paras_text.encode())
    paras = ["First paragraph,\nwrapped over\nthree lines.", "Second one.", "Third,\nCRLF."]

    # Damaged and bad inputs.
    wfile("bad/truncated.json.gz", train_gz[: len(train_gz) // 3])
    wfile("bad/corrupt.json.gz", flip(train_gz, len(train_gz) // 4))
    xz_data = xz(jsonl(c4))
    wfile("bad/truncated.json.xz", xz_data[: len(xz_data) // 2])
    wfile("bad/corrupt.json.xz", flip(xz_data, len(xz_data) // 2))
    zst_data = zst(jsonl(c4))
    wfile("bad/truncated.jsonl.zst", zst_data[: len(zst_data) // 2])
    wfile("bad/corrupt.jsonl.zst", flip(zst_data, len(zst_data) // 2))
    wfile("bad/truncated.tar.xz", owt[: len(owt) * 2 // 3])
    wfile("bad/notext.jsonl", jsonl([{"text": "one"}, {"text": "two"}, {"body": "three", "url": "u"}]))
    wfile("bad/badjson.jsonl", b'{"text": "one"}\n{"text": "two"\n{"text": "three"}\n')
    wfile("bad/empty.jsonl", b"")
    wfile("bad/blank.json.gz", gz(b"\n\n"))
    wfile("bad/emptytext.jsonl", jsonl([{"text": ""}, {"text": ""}]))
    wfile("bad/array.json", b'[{"text": "one"},\n {"text": "two"}]\n')
    wfile("bad/empty.json.gz", b"")
    wfile("bad/data.parquet", b"PAR1")
    wfile("bad/not_a_model.model", b"this is not a sentencepiece model\n" * 4)

    # A SentencePiece model without EOS (trained here from the documents; tiny).
    model = io.BytesIO()
    spm.set_random_generator_seed(1234)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(docs * 4), model_writer=model, model_type="unigram",
                                   vocab_size=200, character_coverage=1.0, unk_id=0, bos_id=-1, eos_id=-1,
                                   pad_id=-1, num_threads=1, minloglevel=2,
                                   normalization_rule_name="identity")  # no 240 KB NFKC table
    wfile("noeos.model", model.getvalue())
    assert spm.SentencePieceProcessor(model_file=os.path.join(OUT, "noeos.model")).eos_id() == -1

    # ---- expected outputs ----
    def case(name, args, train, val=None):
        cases[name] = {"args": args, "train": train}
        if val is not None:
            cases[name]["val"] = val

    fx = "test/fixtures/prep/"
    mdl = "data/builtin/austen_spm8k.model"
    case("gpt2_json_gz", ["--tokenizer", "gpt2", "--input", fx + "c4_train.json.gz"],
         split_stats([layout(gpt2_ids(t), "gpt2") for t in docs]))
    rows256 = [layout(spm_ids(t), "spm", 256) for t in docs]
    case("c4_preset", ["c4", "--input", fx + "c4_train.json.gz", "--val-input", fx + "c4_val.json.gz",
                       "--spm-model", mdl],
         split_stats(rows256, sum(len(spm_ids(t)) > 255 for t in docs)),
         split_stats([layout(spm_ids(o["text"]), "spm", 256) for o in c4_val],
                     sum(len(spm_ids(o["text"])) > 255 for o in c4_val)))
    case("spm_rows32", ["--tokenizer", "spm", "--spm-model", mdl, "--layout", "rows", "--row-len", "32",
                        "--input", fx + "c4_train.json.gz"],
         split_stats([layout(spm_ids(t), "spm", 32) for t in docs], sum(len(spm_ids(t)) > 31 for t in docs)))
    case("gpt2_zst_content", ["--tokenizer", "gpt2", "--input", fx + "docs.jsonl.zst", "--text-field", "content"],
         split_stats([layout(gpt2_ids(t), "gpt2") for t in docs[:12]]))
    case("spm_flat_xz", ["--tokenizer", "spm", "--spm-model", mdl, "--input", fx + "docs.json.xz"],
         split_stats([layout(spm_ids(t), "spm") for t in docs[12:24]]))
    owt_split = [splitmix_val(i, 2357, 0.3) for i in range(len(owt_docs))]
    cleaned = [owt_clean(t) for t in owt_docs]
    case("owt_preset", ["owt", "--input", fx + "owt.tar.xz", "--val-fraction", "0.3"],
         split_stats([layout(gpt2_ids(t), "gpt2") for t, v in zip(cleaned, owt_split) if not v]),
         split_stats([layout(gpt2_ids(t), "gpt2") for t, v in zip(cleaned, owt_split) if v]))
    dir_texts = [d.decode("utf-8", errors="replace") for n, d in sorted(dir_raw) if d]
    case("gpt2_dir", ["--tokenizer", "gpt2", "--input", fx + "texts"],
         split_stats([layout(gpt2_ids(t), "gpt2") for t in dir_texts]))
    case("spm_paras", ["--tokenizer", "spm", "--spm-model", mdl, "--doc-sep", "blank", "--input", fx + "paras.txt"],
         split_stats([layout(spm_ids(t), "spm") for t in paras]))
    case("gpt2_paras", ["--tokenizer", "gpt2", "--doc-sep", "blank", "--input", fx + "paras.txt"],
         split_stats([layout(gpt2_ids(t), "gpt2") for t in paras]))
    case("val_docs", ["--tokenizer", "gpt2", "--input", fx + "c4_train.json.gz", "--val-docs", "5"],
         split_stats([layout(gpt2_ids(t), "gpt2") for t in docs[5:]]),
         split_stats([layout(gpt2_ids(t), "gpt2") for t in docs[:5]]))
    meta["owt_val_docs"] = sum(owt_split)
    meta["owt_docs"] = len(owt_docs)

    # SpmTokenizer: the first paragraphs of Pride and Prejudice, ids as spm_encode / python give them.
    first = corpus.paragraphs(corpus.read_novel("pride-and-prejudice"))[:12]
    check_spm_encode(first)
    spm_cases = [{"text": t, "ids": spm_ids(t)} for t in first]

    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump({"generated_by": "test/reference/make_prep_fixtures.py",
                   "versions": {"tiktoken": corpus.tiktoken.__version__, "sentencepiece": spm.__version__,
                                "spm_encode": "checked" if SPM_ENCODE else "not available"},
                   "cases": cases, "meta": meta, "spm_paragraphs": spm_cases}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    total = 0
    for dirpath, _, names in os.walk(OUT):
        for n in names:
            total += os.path.getsize(os.path.join(dirpath, n))
    for name, c in cases.items():
        print("%-18s train %3d docs %6d tokens" % (name, c["train"]["docs"], c["train"]["tokens"]) +
              ("   val %2d docs %5d tokens" % (c["val"]["docs"], c["val"]["tokens"]) if "val" in c else ""))
    print("wrote %s: %d bytes in all" % (OUT, total))


if __name__ == "__main__":
    main()
