"""Shared logic of the PRAC reproduction scripts (scripts/repro/*.py).

Each script builds a list of Run objects (one trainer invocation each), then calls main_flow(), which
  * prints every command and, unless --dry-run, runs it (stdout to DIR/<run>.out, metrics to DIR/<run>.jsonl,
    checkpoints to DIR/ckpt/<run>); a rerun of the same command keeps finished runs and resumes the others (run_all),
  * asks the planner (./train_* --plan --json with the run's flags) for the planned peak memory,
  * hands the collected results to the script's table builder and writes DIR/<table>.md and DIR/<table>.png
    (loss curves through scripts/plot_runs.py; skipped with a printed reason when matplotlib is missing).
"""
import argparse
import fcntl
import glob
import json
import math
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from run_log import LogError, drop_replayed, read_records, skipped, train_loss  # noqa: E402  plot_runs.py's rules
QUICK_CAVEAT = ("tiny models, a few dozen steps on the built-in corpus: checks the pipeline, not the paper's claims")

# --quick budget: tiny models on the built-in corpus, CPU; a run takes about a second on 2 idle cores.
QUICK = dict(steps=20, batch=2, seq=32, eval_tokens=512, eval_interval=10, lr=3e-3, prac_t=10)

# --paper: the paper's models (appendix D, Table 8), micro-batch B / sequence S from Table 2, global batch 512.
# rso_rank: the PRAC paper's 256 / 512 for GPT-2 124M / 355M; for LLaMA GaLore's ranks (train/optim_rso.h).
PAPER = {
    "llama-60m": dict(binary="train_llama", B=128, S=256, steps=10000, lr=1e-3, galore_rank=128, rso_rank=128),
    "llama-130m": dict(binary="train_llama", B=128, S=256, steps=20000, lr=1e-3, galore_rank=256, rso_rank=256),
    "llama-350m": dict(binary="train_llama", B=128, S=256, steps=60000, lr=1e-3, galore_rank=256, rso_rank=256),
    "llama-1b": dict(binary="train_llama", B=128, S=256, steps=150000, lr=1e-3, galore_rank=512, rso_rank=512),
    "gpt2-124m": dict(binary="train_gpt2", B=64, S=1024, steps=50000, lr=6e-4, galore_rank=256, rso_rank=256, warmup=2000),
    "gpt2-355m": dict(binary="train_gpt2", B=32, S=1024, steps=50000, lr=3e-4, galore_rank=512, rso_rank=512, warmup=2000),
}
GLOBAL_BATCH = 512
# --paper's storage, as the paper's: PRAC's projections in the activation dtype (bf16) and the attention output saved
# (the trainer's defaults, fp8 projections and a recomputed attention output, save more: memory.py's rows). One
# difference: the paper's Table 6 lists W_o's input A_h as compressed; here it stays exact, because attention's
# backward needs O (PyTorch's flash attention saves it too)
PAPER_STORAGE = ["--prac-storage", "act", "--recompute-attention", 0]
GALORE_LR = 1e-2  # GaLore's LLaMA learning rate (scale 0.25); the paper uses the baselines' published settings
# ... and GaLore's optimizer settings for those runs, as its published LLaMA scripts run it (scripts/benchmark_c4/
# llama_*.sh: --weight_decay 0; torchrun_main.py: no gradient clipping by default; galore_torch's AdamW: betas (0.9,
# 0.999), eps 1e-6). The trainer's defaults are nanoGPT's (decay 0.1, beta2 0.95, eps 1e-8, clip 1): at GaLore's lr
# 1e-2 a decay of 0.1 shrinks the weights ten times as hard as the baseline's at 1e-3.
GALORE_LLAMA_OPTIM = ["--weight-decay", 0, "--beta2", 0.999, "--adam-eps", 1e-6, "--grad-clip", 0]


class Run:
    """One trainer invocation. name: file stem in --out; label: row label (and the plot's legend label unless
    plot_label is given: runs that share a row label, as table5's tasks and memory.py's seeds, need their own there);
    flags: trainer flags."""

    def __init__(self, name, label, binary, flags, meta=None, plot_label=None):
        self.name, self.label, self.binary, self.flags = name, label, binary, [str(f) for f in flags]
        self.plot_label = plot_label or label
        self.meta = dict(meta or {})
        self.log = self.out = None
        self.result = None  # filled by main_flow: dict (see summarize)
        self.plan = None  # planner JSON or None
        self.rc = None
        self.ckpt_every = 0  # set by run_all (ckpt_every()): --paper's periodic checkpoints
        self.state = None  # set by run_all: "keep", "resume" or "start" (run_state())

    def cmd(self, out_dir):
        """The run's command as the table lists it: its flags, its log and its own checkpoint directory (run_all adds
        --resume or --overwrite, which say how this invocation continued it, not what the run is)."""
        f = ["--log", os.path.join(out_dir, self.name + ".jsonl"), "--ckpt-dir", ckpt_dir(out_dir, self),
             "--ckpt-keep", 1] + (["--ckpt-every", self.ckpt_every] if self.ckpt_every else [])
        return [os.path.join(ROOT, self.binary)] + self.flags + [str(x) for x in f]


def ckpt_dir(out_dir, run):
    """DIR/ckpt/<run>: the run's own checkpoints (the trainer writes step_NNNNNNNN folders there), what a rerun
    resumes from."""
    return os.path.join(out_dir, "ckpt", run.name)


def base_parser(description, pretrain=True, gpt2=False, launch=True):
    """The flags every script shares. pretrain: the pretraining scripts' --train-data, --val-data and --gpu-mem (not
    table5's fine-tuning); gpt2: also --gpt2-train-data and --gpt2-val-data (table2, the only one with GPT-2 runs);
    launch: --launch (a pretraining script that refuses it, table4, passes False: its help says so)."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--quick", action="store_true", help="tiny CPU budget (pipeline check, minutes on 2 cores)")
    mode.add_argument("--paper", action="store_true", help="the paper's configurations (GPUs, days)")
    ap.add_argument("--out", help="output directory (default runs/<table>, --quick: runs/<table>-quick)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands only (writes nothing)")
    add_restart(ap)
    if pretrain:
        ap.add_argument("--train-data", help="--paper: training shards (C4 for LLaMA" +
                        (", OpenWebText for GPT-2)" if gpt2 else ")"))
        ap.add_argument("--val-data", help="--paper: validation shards")
    if gpt2:
        ap.add_argument("--gpt2-train-data", help="--paper: GPT-2 training shards when they differ from --train-data")
        ap.add_argument("--gpt2-val-data", help="--paper: GPT-2 validation shards")
    ap.add_argument("--device", help="trainer --device (default: cpu with --quick, the trainer's auto with --paper)")
    ap.add_argument("--steps", type=int, help="override every run's step count (e.g. a short --paper smoke test)"
                    if pretrain else "override every run's epoch count (e.g. a short --paper smoke test)")
    if pretrain:
        ap.add_argument("--gpu-mem", type=float, default=None,
                        help="--paper: GPU memory in GiB (nvidia-smi's MiB / 1024) for the planner's OOM and "
                             "batch checks: 80 for the paper's A800 80GB (and an A100 80GB), 79.65 for an H100 80GB, "
                             "140.4 for an H200 [80]")
    if pretrain:
        ap.add_argument("--launch", default="", help=(
            "a launcher before every trainer command, one quoted string: --launch='mpirun -np 4' trains each run on "
            "4 GPUs (--paper's global batch of 512 stays: the trainer's --global-batch sets the accumulation per rank "
            "count). It is not part of a run's command as a rerun compares it, so a rerun on another number of GPUs "
            "continues the runs from their checkpoints" if launch
            else "refused here: this table's numbers are of one device"))
    ap.add_argument("--run-timeout", type=float, default=None,
                    help="seconds before a run is killed (0: never) [0" + ("" if pretrain else "; --quick: 300") + "]")
    ap.add_argument("--extra", default="", help="extra trainer flags appended to every run, one quoted string; "
                    "write it with '=' (--extra=--no-shuffle, --extra='--seed 2 --no-shuffle'): argparse takes a "
                    "separate value that starts with '-' for a flag of this script")
    return ap


def add_restart(ap):
    ap.add_argument("--restart", action="store_true", help="start every run over (its checkpoints and log removed); "
                    "without it a rerun keeps the runs that finished and resumes the others from their checkpoints")


def check_out(path):
    """Stops with one line when --out names something that is not a directory (before any run, dry or not)."""
    if os.path.exists(path) and not os.path.isdir(path):
        sys.exit(f"--out {path}: exists and is not a directory")


_OUT_LOCKS = {}  # --out directory -> the open DIR/.lock this process holds (flock: released when it exits)


def make_out(path):
    """Creates --out (and its parents) and takes it for this invocation: a second one on the same --out stops with
    one line (two at once ran the same runs, one reporting a FAILED run the other finished). One line instead of a
    traceback when it cannot be created."""
    check_out(path)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        sys.exit(f"--out {path}: cannot create the directory: {e.strerror}")
    if path in _OUT_LOCKS:
        return
    try:
        lock = open(os.path.join(path, ".lock"), "a+")
    except OSError as e:  # (a read-only --out: one line, not a traceback)
        sys.exit(f"--out {path}: cannot write {os.path.join(path, '.lock')}: {e.strerror}")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.seek(0)
        holder = lock.read().strip()
        sys.exit(f"--out {path}: another invocation is writing there{f' (pid {holder})' if holder else ''}\n"
                 f"---> HINT: wait for it to finish (then rerun: its finished runs are kept), or use another --out")
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    _OUT_LOCKS[path] = lock


def default_out(args, table):
    """runs/<table>, runs/<table>-quick for --quick: the README's --quick first, then --paper, met the quick runs'
    logs under the same run names and was refused (its hint, --restart, threw them away)."""
    return os.path.join("runs", table + ("-quick" if getattr(args, "quick", False) else ""))


def out_dir(args, table):
    """--out (default_out) as an absolute path: the trainer runs with cwd=ROOT, so a relative --log would name a
    directory under ROOT, not under the caller's directory."""
    args.out = os.path.abspath(args.out if args.out is not None else default_out(args, table))
    check_out(args.out)
    return args.out


def check_run_timeout(args, default=0):
    """--run-timeout: 0 (never) or more seconds, one line otherwise (a negative one killed every run at once). Not
    given: default (table5 --quick passes 300); a given 0 stays 0, never."""
    t = args.run_timeout
    if t is None:
        args.run_timeout = default
    elif not (math.isfinite(t) and t >= 0):
        sys.exit(f"--run-timeout {t:g}: must be 0 (never) or more seconds")
    return args.run_timeout


def check_quick_inputs(args):
    """--quick trains on the built-in corpus and makes no fit check: a data pattern or --gpu-mem it would ignore
    silently is refused instead."""
    for flag in ("--train-data", "--val-data", "--gpt2-train-data", "--gpt2-val-data", "--gpu-mem"):
        if getattr(args, flag[2:].replace("-", "_"), None) is not None:
            sys.exit(f"{flag}: --quick " + ("makes no fit check (its tiny runs fit any machine)" if flag == "--gpu-mem"
                                             else "trains on the built-in corpus") +
                     f" and would ignore it\n---> HINT: drop {flag}, or use --paper")


def finish_args(args, table):
    out_dir(args, table)
    check_run_timeout(args)
    launcher(args)  # (an unbalanced quote: one line before any planner call)
    if args.quick:
        check_quick_inputs(args)
    elif hasattr(args, "gpu_mem") and args.gpu_mem is None:
        args.gpu_mem = 80.0
    # the planner's --gpu-mem takes GiB > 0 (0 would mean "no fit check", and a negative one fails every call)
    if getattr(args, "gpu_mem", None) is not None and args.gpu_mem <= 0:
        sys.exit(f"--gpu-mem {args.gpu_mem:g}: must be more than 0 (GiB)")
    if args.steps is not None and args.steps <= 0:  # (0 read as "not given": the default step count ran)
        sys.exit(f"--steps {args.steps}: must be at least 1")
    if args.device is None:
        args.device = "cpu" if args.quick else None
    # --paper fits its runs to a GPU's memory (the micro-batch that fits --gpu-mem, OOM marks), which the CPU backend's
    # plans do not answer (the trainer refuses --plan --gpu-mem with --device cpu)
    if args.paper and args.device == "cpu" and hasattr(args, "gpu_mem"):
        sys.exit("--paper --device cpu: the paper's runs are planned for a GPU (what fits --gpu-mem), and the CPU "
                 "backend has no such memory\n---> HINT: drop --device cpu to run them on a GPU, or use --quick for "
                 "a run on the CPU")
    return args


def check_data(runs, args):
    """--paper's runs need their data: C4's patterns for LLaMA's, OpenWebText's (or C4's) for GPT-2's. Said before
    any run, for the runs of this table only (a GPT-2-only table asked for C4's). Each pattern given must match a file,
    and each file's header must be a shard of the tokenizer its trainer reads (check_shards), dry runs too: GPT-2 runs
    given LLaMA's shards failed only when their turn came, after days of LLaMA runs."""
    if args.quick:
        return
    for r in runs:
        if r.binary not in SHARD_KIND:
            continue  # (finetune_roberta reads GLUE files, not shards)
        for flag in ("--train-data", "--val-data"):
            if flag not in r.flags:
                continue
            pattern = flag_value(r.flags, flag)
            if pattern in ("TRAIN_SHARDS", "VAL_SHARDS"):
                if args.dry_run:
                    continue  # a dry run shows where the patterns go
                which = ("--gpt2-train-data and --gpt2-val-data (OpenWebText), or --train-data and --val-data"
                         if r.binary == "train_gpt2" and hasattr(args, "gpt2_train_data") else
                         "--train-data and --val-data")
                sys.exit(f"--paper: run {r.name} needs {which} (C4 shards for LLaMA), or --dry-run")
            check_shards(r, flag, pattern)


# the trainers' shard header (data/README.md): 256 little-endian int32; [0] magic, [6] the tokenizer kind
SHARD_MAGIC, LLAMA3_MAGIC, SHARD_HEADER = 20240520, 20240801, 1024
TOKENIZER_KIND = {1: "GPT-2 r50k BPE", 2: "SentencePiece"}  # 0: unknown (llm.c's shards), which either trainer reads
SHARD_KIND = {"train_gpt2": 1, "train_llama": 2}  # the kind each trainer reads (it refuses the other family's)
_SHARDS = {}  # pattern -> [(file, kind or why it is no shard)]: a pattern read once, however many runs read it


def shard_kinds(pattern):
    """The files the pattern matches (the trainer's glob: sorted, no hidden files), each with its header's tokenizer
    kind, or a string saying why it is not a shard."""
    if pattern not in _SHARDS:
        out = []
        for path in sorted(glob.glob(pattern)):
            try:
                with open(path, "rb") as f:
                    head = f.read(SHARD_HEADER)
            except OSError as e:
                out.append((path, f"cannot be read: {e.strerror}"))
                continue
            if len(head) < SHARD_HEADER:
                out.append((path, f"is shorter than a shard's {SHARD_HEADER}-byte header"))
                continue
            words = struct.unpack("<256i", head)
            out.append((path, "is llm.c's LLaMA-3 shard (uint32 tokens), which the trainers refuse"
                        if words[0] == LLAMA3_MAGIC else f"has no shard header (magic {words[0]}, not {SHARD_MAGIC})"
                        if words[0] != SHARD_MAGIC else words[6]))
        _SHARDS[pattern] = out
    return _SHARDS[pattern]


def check_shards(run, flag, pattern):
    """One line, before any run, when the pattern matches no file or a file its run's trainer would refuse."""
    files = shard_kinds(pattern)
    if not files:
        sys.exit(f"{flag} {pattern} (run {run.name}): no file matches it\n---> HINT: check the path and quote the "
                 f"pattern ('c4_llama_train_*.bin') so that the trainer, not the shell, expands it")
    want = SHARD_KIND[run.binary]
    for path, kind in files:
        if isinstance(kind, str):
            sys.exit(f"{flag} {pattern} (run {run.name}): {path} {kind}")
        if kind and kind != want:
            fix = ("give the GPT-2 runs GPT-2 shards: --gpt2-train-data and --gpt2-val-data (./prep_data owt), or "
                   "leave the GPT-2 models out of --models" if run.binary == "train_gpt2" else
                   "give the LLaMA runs SentencePiece shards (./prep_data c4)")
            sys.exit(f"{flag} {pattern}: {path} holds {TOKENIZER_KIND.get(kind, f'tokenizer kind {kind}')} tokens, "
                     f"and run {run.name} (./{run.binary}) reads {TOKENIZER_KIND[want]} shards only (it would fail "
                     f"when its turn came)\n---> HINT: {fix}")


def data_flags(args, binary):
    if args.quick:
        return []
    tr, va = args.train_data, args.val_data
    if binary == "train_gpt2":  # each of OpenWebText's patterns, when given, replaces C4's
        tr = getattr(args, "gpt2_train_data", None) or tr
        va = getattr(args, "gpt2_val_data", None) or va
    # the trainer runs with cwd=ROOT: a relative pattern is the caller's, made absolute (glob characters are kept)
    def mine(p):
        return os.path.abspath(p) if p else p
    return ["--train-data", mine(tr) or "TRAIN_SHARDS", "--val-data", mine(va) or "VAL_SHARDS"]


def quick_flags(args, steps=None, batch=None):
    q = QUICK
    steps = args.steps or steps or q["steps"]
    # (0: the final evaluation alone, where the interval is not below --steps: the trainer notices such an interval)
    f = ["--steps", steps, "--batch-size", batch or q["batch"], "--seq-len", q["seq"],
         "--eval-tokens", q["eval_tokens"], "--eval-interval", q["eval_interval"] if q["eval_interval"] < steps else 0,
         "--lr", q["lr"],
         "--prac-t1", q["prac_t"], "--prac-t2", q["prac_t"], "--log-interval", 10]
    return f


def paper_config(model):
    """PAPER's configuration of a model; one line naming the paper's models for another (a --quick model, a typo)."""
    if model not in PAPER:
        sys.exit(f"--paper has no configuration of {model}: the paper's models are {', '.join(PAPER)} "
                 f"(--quick runs the tiny ones)")
    return PAPER[model]


def paper_flags(args, model, B=None, lr=None, steps=None):
    """The paper's flags of a model; its global batch as --global-batch, which the trainer splits over the ranks that
    --launch starts (--grad-accum 512 / (ranks x B))."""
    c = paper_config(model)
    B = B or c["B"]
    steps = args.steps or steps or c["steps"]
    f = ["--batch-size", B, "--seq-len", c["S"], "--global-batch", GLOBAL_BATCH, "--steps", steps, "--lr", lr or c["lr"],
         "--eval-interval", 1000 if steps > 1000 else 0, "--log-interval", 100] + PAPER_STORAGE
    if "warmup" in c:
        f += ["--warmup", min(c["warmup"], max(1, steps // 10)) if args.steps else c["warmup"]]
    if c["binary"] == "train_llama":
        f += ["--eval-protocol", "galore", "--eval-tokens", 10000000]  # GaLore's C4 protocol
    else:
        f += ["--eval-tokens", 10485760]
    return f + data_flags(args, c["binary"])


def common_tail(args):
    f = []
    if args.device:
        f += ["--device", args.device]
    if args.extra:
        try:
            f += shlex.split(args.extra)
        except ValueError as e:  # an unbalanced quote
            sys.exit(f"--extra {args.extra!r}: {e}")
    return f


def _flag_values(words):
    """{--flag: its value (None for a switch)} of a trainer command line's words ("--flag=value" too)."""
    out, i = {}, 0
    while i < len(words):
        w = str(words[i])
        i += 1
        if not w.startswith("--"):
            continue
        if "=" in w:
            name, value = w.split("=", 1)
        elif i < len(words) and not str(words[i]).startswith("--"):
            name, value = w, str(words[i])
            i += 1
        else:
            name, value = w, None
        out[name] = value
    return out


_OWN_OUTPUT = ("each run has its own, which the script sets; one for every run would make the runs write over each "
               "other (run the trainer yourself for that: --dry-run prints the commands)")
_CONTINUE = ("the script chooses it per run: a rerun resumes an unfinished run from its checkpoint (DIR/ckpt/<run>), "
             "keeps a finished one and starts the others over; --restart starts every run over")
_LABEL = ("the table is labelled with the {what} its runs set; one for every run would put another {what}'s numbers "
          "under those labels: use {use}, or run the trainer yourself (--dry-run prints the commands)")
# flags --extra may never give: each run's own outputs and how a rerun continues it (the script owns them), what the
# table's labels name (--extra would mislabel the table, even where every run sets it alike), and what the script's
# own flags set and check (the data patterns, checked before any run; the device)
NOT_EXTRA = {
    "--log": _OWN_OUTPUT, "--ckpt-dir": _OWN_OUTPUT, "--save": _OWN_OUTPUT, "--dump-path": _OWN_OUTPUT,
    "--predict": _OWN_OUTPUT,
    "--ckpt-every": "the script sets it (--paper: about every tenth of a run, at most 1000 steps apart; a Ctrl-C or "
                    "SIGTERM checkpoints too); change ckpt_every() in scripts/repro/common.py for another interval",
    "--ckpt-keep": "the script keeps each run's newest checkpoint (--ckpt-keep 1), what a rerun resumes from",
    "--resume": _CONTINUE, "--overwrite": _CONTINUE,
    "--model": _LABEL.format(what="model", use="--models (table2, table9, ablation_modes, memory.py)"),
    "--task": _LABEL.format(what="task", use="--tasks (table5)"),
    "--init-from": _LABEL.format(what="model", use="--model-dir (table5)"),
    "--data-dir": _LABEL.format(what="task data", use="--glue-dir (table5)"),
    "--train-data": "use the script's --train-data (and table2's --gpt2-train-data): it checks the shards before "
                    "any run",
    "--val-data": "use the script's --val-data (and table2's --gpt2-val-data): it checks the shards before any run",
    "--device": "use the script's --device (the table's machine line and memory units follow it)",
    # (the trainers refuse --eval-only beside --ckpt-dir; a table of the initial weights would not be a result)
    "--eval-only": "the runs would train nothing, and the table's rows are training runs; evaluate a run's checkpoint "
                   "yourself: ./train_llama ... --init-from DIR/ckpt/<run>/step_NNNNNNNN --eval-only",
    "--plan": "the runs would train nothing; --dry-run prints the commands, and the tables' MEM planned is the plan",
}


def check_extra(runs, args):
    """--extra against the flags the table sets itself (the trainer takes the last of a flag given twice, so --extra
    replaces them in every run). NOT_EXTRA's flags are refused always (the runs' own outputs, what the labels name:
    --model, even in a table of one model). A flag the runs set to different values, or that some set and others leave
    at the default (--prac, --optimizer; --paper's per-model --lr and --eval-tokens), would become one value for all:
    the rows would no longer be what their labels and the table say, so that stops the script with one line. A flag
    every run sets alike (--quick's --lr, --steps) is replaced: the returned notes say so, for the table's markdown."""
    if not args.extra:
        return []
    extra = shlex.split(args.extra)  # (common_tail has refused an unbalanced quote)
    wanted = _flag_values(extra)
    for name in wanted:
        if name in NOT_EXTRA:
            sys.exit(f"--extra {name}: {NOT_EXTRA[name]}")
    own = {r.name: _flag_values(r.flags[:len(r.flags) - len(extra)]) for r in runs}
    if "--grad-accum" in wanted and any("--global-batch" in f for f in own.values()):
        sys.exit("--extra --grad-accum: the runs set the paper's global batch (--global-batch, which sets the "
                 "accumulation for the launched ranks)\n---> HINT: pass --extra='--global-batch N' to change it")
    default = object()  # a run that does not set the flag
    notes = []
    for name, value in wanted.items():
        setting = [(r.label, own[r.name].get(name, default)) for r in runs]
        if all(v is default for _, v in setting):
            continue  # the table never sets it: added to every run
        first = {}  # one run of each value
        for label, v in setting:
            first.setdefault(v, label)
        if len(first) > 1:
            shown = ", ".join(f"{'not set' if v is default else '(set)' if v is None else v} in {label}"
                              for v, label in first.items())
            sys.exit(f"--extra {name}: the table's runs differ in {name} ({shown}); --extra would give every run the "
                     f"same and the rows would no longer be what the table says; change it in scripts/repro/"
                     f"{os.path.basename(sys.argv[0])} or run the trainer yourself (--dry-run prints the commands)")
        before = next(iter(first))
        notes.append(f"--extra replaces the table's {name}{'' if before is None else ' ' + before} with "
                     f"{name}{'' if value is None else ' ' + value} in every run")
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    return notes


# ---------------------------------------------------------------- planner

# what a plan does not read and would check or touch on disk (the log, the data files); the other flags stay, so the
# parser checks them (a dry run exited 0 for --steps -3, which every run then refused)
_STRIP = {"--log", "--train-data", "--val-data"}


def plan_flags(flags):
    out, i = [], 0
    while i < len(flags):
        if flags[i] in _STRIP:
            i += 2
            continue
        out.append(flags[i])
        i += 1
    return out


def shell_line(cmd):
    """cmd as it runs when pasted into a shell at ROOT: the binary as ./NAME, every word quoted as needed."""
    return " ".join(shlex.quote("./" + os.path.relpath(c, ROOT) if i == 0 else str(c)) for i, c in enumerate(cmd))


def command_key(cmd, out_dir):
    """The command as DIR/<run>.cmd records it for a rerun to compare: shell_line with DIR written as OUT, so that
    the same command through another path to DIR (a symlink, a moved checkout) is the same run."""
    paths = sorted({os.path.abspath(out_dir), os.path.realpath(out_dir)}, key=len, reverse=True)

    def word(w):
        for p in paths:
            if w == p or w.startswith(p + os.sep):
                return "OUT" + w[len(p):]
        return w
    return shell_line([cmd[0]] + [word(str(w)) for w in cmd[1:]])


def need_binary(binary):
    """The path of ROOT/binary; one line saying how to build it when it is not there."""
    path = os.path.join(ROOT, binary)
    if not os.access(path, os.X_OK):
        sys.exit(f"{path} is not built: run `make build` in {ROOT} first")
    return path


# the planner calls that failed (their commands): main_flow exits non-zero on any, a --dry-run too (whose only
# check of the runs' flags the planner is)
PLANNER_FAILURES = []
# every planner call's command (memory.py's markdown lists them)
PLANNER_CALLS = []


def planner(binary, flags, gpu_mem=None):
    """Planner JSON for these trainer flags (training-only flags stripped), or None on failure (recorded in
    PLANNER_FAILURES). gpu_mem (GiB): the JSON also has max_batch_size, the largest micro-batch whose plan fits
    with the trainer's reserve_bytes for the CUDA context (0: not even 1), the fit test the scripts use."""
    cmd = [need_binary(binary)] + plan_flags([str(f) for f in flags]) + ["--plan", "--json"]
    if gpu_mem:
        cmd += ["--gpu-mem", str(gpu_mem)]
    PLANNER_CALLS.append(cmd)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"planner failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr.strip()}", file=sys.stderr)
        PLANNER_FAILURES.append(cmd)
        return None
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError:
        print(f"planner printed no JSON: {' '.join(cmd)}", file=sys.stderr)
        PLANNER_FAILURES.append(cmd)
        return None


class Stopped(Exception):
    """SIGTERM or SIGHUP (a `timeout`, a closed terminal, a job scheduler): raised in the main thread so that
    subprocess.run ends the trainer in flight (it kills its child on any exception), as Ctrl-C's SIGINT ends it."""


def _raise_stopped(signum, frame):
    raise Stopped(signal.Signals(signum).name)


def interruption(e):
    """(the signal, how to name it) of a KeyboardInterrupt or a Stopped."""
    sig = signal.SIGINT if isinstance(e, KeyboardInterrupt) else signal.Signals[str(e)]
    return sig, "Ctrl-C" if sig == signal.SIGINT else sig.name


def _quiet_interrupt(kind, value, tb):
    """Ctrl-C or a stop signal outside a training run (the planner, the plot): one line and 128 + the signal's number
    (what a shell reports for it), not a traceback."""
    if issubclass(kind, (KeyboardInterrupt, Stopped)):
        sig, name = interruption(value)
        print(f"interrupted ({name}): no table written", file=sys.stderr)
        sys.stderr.flush()
        os._exit(128 + sig.value)
    sys.__excepthook__(kind, value, tb)


sys.excepthook = _quiet_interrupt
for _sig in (signal.SIGTERM, signal.SIGHUP):
    if signal.getsignal(_sig) == signal.SIG_DFL:  # (nohup's ignored SIGHUP stays ignored)
        signal.signal(_sig, _raise_stopped)


def model_list(models, default):
    """--models a,b (or the default list): each model once (a second run of one would replace the first's logs and
    read as another seed or column)."""
    names = models.split(",") if models else list(default)
    if any(not m for m in names):
        sys.exit(f"--models {models}: an empty name")
    if len(set(names)) != len(names):
        sys.exit(f"--models {models}: a model is named twice (its second runs would replace the first's logs)")
    return names


def flag_value(flags, name, *default):
    """The value of a flag as the trainer reads it: its last occurrence (--extra's replaces the table's own), as
    "--flag value" or "--flag=value" (the form --help shows for --extra: it was read as the table's own value, so a
    run of --extra=--steps=4 never counted as finished and a table's labels said another --seq-len); default, where
    given, for a flag the command does not set (KeyError without one)."""
    values = _flag_values(flags)
    return values[name] if name in values or not default else default[0]


def int_flag(flags, name, *default):
    """flag_value as a whole number: one line for another word (--extra='--steps 1e2' was a traceback where the
    trainer would refuse it in one line)."""
    v = str(flag_value(flags, name, *default))
    if not re.fullmatch(r"[+-]?[0-9]+", v):  # (int() took "1_0" and " 10", which the trainers refuse)
        sys.exit(f"{name} {v}: not a whole number (the trainers read {name} as one)\n---> HINT: check --extra")
    return int(v)


# ---------------------------------------------------------------- logs

def read_jsonl(path):
    """(step records, eval records) of a training log's run: a resumed run's replayed steps once, its own
    (scripts/run_log.py, the rule plot_runs.py draws by)."""
    # an --eval-only evaluation is of loaded weights, not of a training run
    ruled, _ = drop_replayed([rec for rec in records(path) if not rec.get("eval_only")])
    steps = [r for r in ruled if r.get("type", "step") == "step"]
    return steps, [r for r in ruled if r.get("type") == "eval"]


def summarize(path):
    steps, evals = read_jsonl(path)
    if not steps and not evals:
        return None
    final = evals[-1] if evals else {}
    # the trainer writes a non-finite number as null (train/metrics_log.h): a null loss is NaN here, so a diverged
    # run reads nan, not the mean of its finite steps before the divergence
    vl = math.nan if "val_loss" in final and final["val_loss"] is None else final.get("val_loss")
    # the first step, and each resumed process's first ("startup":true), carry one-time setup: a run of one step has
    # no timing (its set-up step's 8 tokens/s read as PRAC's cost, -94%)
    timed = [s for s in steps[1:] if not s.get("startup")]
    # one aggregation for every timing number: the timed steps' tokens over their time (what a long run's duration
    # follows; a mean of per-step rates is higher whenever some steps are slower, and contradicted the projection)
    both = [(s["tokens_per_s"], s["ms_per_step"]) for s in timed if s.get("tokens_per_s") and s.get("ms_per_step")]
    ms = sum(m for _, m in both)
    peaks = [s.get("mem_peak_bytes") or 0 for s in steps]
    # plot_runs.py's final train loss (scripts/run_log.py's rule, so the two tables agree): a padding step's null is
    # no loss, a skipped step's is left out (its update was not applied; the notes name the run's skipped steps):
    # counted as NaN, either read nan for a run that had not diverged; a null on a step not skipped still reads nan
    return dict(steps=len(steps), val_loss=vl, ppl=ppl_from_loss(vl), skipped=sum(skipped(s) for s in steps),
                train_loss=train_loss(steps)[0],
                tokens_per_s=sum(t * m for t, m in both) / ms if both else None,
                ms_per_step=ms / len(both) if both else None, timed_steps=len(both),
                mem_peak=max(peaks) if peaks and max(peaks) > 0 else None)


def ppl_from_loss(vl):
    """exp(loss); inf where exp overflows (a loss past ~709.78: a diverged run), nan for nan, None for no loss."""
    if vl is None:
        return None
    try:
        return math.exp(vl)
    except OverflowError:
        return math.inf


# ---------------------------------------------------------------- formatting

def mem_unit(args):
    return ("GB", 1e9) if args.paper else ("MiB", 2**20)


def fmt_mem(b, args):
    if b is None:
        return "-"
    unit, div = mem_unit(args)
    return f"{b / div:.2f}"


# from here on a number is printed in scientific notation: a diverged run's PPL of exp(600) printed 261 digits
SCIENTIFIC = 1e7


def fmt_num(x, fmt="{:.2f}"):
    """x formatted; "-" for no value; nan / inf for a non-finite one (a diverged run), not "-"; in scientific notation
    from SCIENTIFIC up (1.234e+260, not 261 digits)."""
    if x is None:
        return "-"
    if not math.isfinite(x):
        return str(x)
    return f"{x:.3e}" if abs(x) >= SCIENTIFIC else fmt.format(x)


def fmt_delta(x, base):
    """x relative to base in percent: whole percents from 1% up, one decimal below (-0.4%, not -0%), 0% when it
    rounds to 0.0."""
    if x is None or not base:
        return "-"
    return fmt_percent(100.0 * (x - base) / base)


def fmt_percent(d):
    if abs(d) < 0.05:
        return "0%"
    return f"{d:+.1f}%" if abs(d) < 0.95 else f"{d:+.0f}%"


def md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        lines.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(lines)


def ppl_of(run):
    if run.result is None:
        return f"failed (exit {run.rc})" if run.rc not in (None, 0) else "-"
    return fmt_num(run.result["ppl"])


def measured_peak(run):
    return run.result["mem_peak"] if run.result else None


def planned_total(run):
    return run.plan["total"] if run.plan else None


# ---------------------------------------------------------------- running

def ckpt_every(run, args):
    """--ckpt-every of a run: --paper's long pretraining runs checkpoint every tenth of the run, at most 1000 steps
    apart (on one GPU 1000 of llama-1b's steps are about an hour to redo after a crash); runs under 1000 steps (--quick,
    table4's timing runs, smoke tests) only at the end and on a stop signal (Ctrl-C, SIGTERM: the trainer checkpoints
    then too), so that no checkpoint lands among the timed steps; finetune_roberta checkpoints after every epoch."""
    if not args.paper or run.binary not in SHARD_KIND:
        return 0
    steps = int_flag(run.flags, "--steps")
    return 0 if steps < 1000 else min(1000, steps // 10)


def newest_checkpoint(path):
    """The step of the newest checkpoint in a run's checkpoint directory (the trainer's step_NNNNNNNN folders, renamed
    into place only when complete), or None."""
    steps = [int(d[5:]) for d in (os.listdir(path) if os.path.isdir(path) else [])
             if re.fullmatch(r"step_[0-9]{8}", d)]
    return max(steps) if steps else None


def finished(run, log):
    """Whether the log is a finished run's: a pretraining run's reached its last step (--steps) and that step's
    evaluation (the trainer's final one); a fine-tuning run's has its `final` record (written after the last epoch's
    dev evaluation)."""
    recs = [rec for rec in records(log) if not rec.get("eval_only")]
    if run.binary == "finetune_roberta":
        return any(rec.get("type") == "final" for rec in recs)
    last = int_flag(run.flags, "--steps")
    return any(rec.get("type", "step") == "step" and rec.get("step") == last for rec in recs) and \
        any(rec.get("type") == "eval" and rec.get("step") == last for rec in recs)


def run_state(run, args):
    """What this invocation does with a run, from what an earlier one left in DIR: ("keep", why) for a finished run
    (not trained again), ("resume", why) for one with a checkpoint, ("start", why) otherwise or with --restart, and
    ("other", why) when the log or checkpoints there were made by another command (DIR/<run>.cmd differs: other
    flags, --steps, --extra): resuming or keeping them would put another configuration's numbers in the table."""
    log = os.path.join(args.out, run.name + ".jsonl")
    step = newest_checkpoint(ckpt_dir(args.out, run))
    if args.restart:
        return "start", "--restart"
    if not records(log) and step is None:
        return "start", "no log or checkpoint of it"
    try:
        with open(os.path.join(args.out, run.name + ".cmd")) as f:
            made_by = f.read().strip()
    except OSError:
        made_by = None
    if made_by != command_key(run.cmd(args.out), args.out):
        return "other", ("no record of its command" if made_by is None else "made by another command")
    if finished(run, log):
        return "keep", "finished in an earlier invocation (its log reached its last step and final evaluation)"
    if step is not None:
        return "resume", f"resumed from its checkpoint at step {step}"
    return "start", "an unfinished log without a checkpoint: started over"


def plan_states(runs, args):
    """Each run's state (run_state); stops before any run, dry runs too, when DIR holds another command's runs."""
    other = []
    for r in runs:
        r.ckpt_every = ckpt_every(r, args)
        r.state, r.state_why = run_state(r, args)
        if r.state == "other":
            other.append(f"{r.name} ({r.state_why})")
    if other:
        sys.exit(f"--out {args.out} holds logs or checkpoints of runs made by another command than this one "
                 f"(<run>.cmd there): {', '.join(other)}; resuming or keeping them would mix configurations\n"
                 f"---> HINT: rerun the command that made them (its .cmd files) to continue them, add --restart to "
                 f"start every run over with this one, or use another --out")


def run_trainer(cmd, out, timeout, launched=False):
    """Runs a trainer at ROOT (stdout and stderr to the open file out); its exit status, 124 when it ran past timeout
    seconds. A stop signal reaches the trainer as its own (it finishes the step in flight, checkpoints and exits),
    and the script waits for that: subprocess.run killed it 0.25 s after a Ctrl-C, before its checkpoint. launched:
    cmd starts with --launch's launcher, which is sent SIGUSR1 instead (mpirun forwards it to every rank, a stop to
    the trainer; SIGTERM or SIGINT to mpirun kills the ranks about a second later, before their checkpoint)."""
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        return p.wait(timeout=timeout or None)
    except subprocess.TimeoutExpired:
        sig = signal.SIGUSR1 if launched else signal.SIGTERM
        print(f"    timed out after {timeout:g} s: stopping it ({sig.name}: it checkpoints)", file=sys.stderr)
        interrupted = stop_trainer(p, sig, grace=120)
        if interrupted:  # (during the grace: the script stops, as at any other time; it went on to the next run)
            raise interrupted
        return 124
    except (KeyboardInterrupt, Stopped) as e:
        sig, name = interruption(e)
        print(f"    {name}: waiting for the trainer to finish its step and write its checkpoint ({name} again, 2 s "
              f"or more later, ends it at once)", file=sys.stderr, flush=True)
        # (SIGHUP, which the trainer does not handle, reaches it as SIGTERM; a launcher gets SIGUSR1, though a
        # terminal's Ctrl-C has reached mpirun already)
        stop_trainer(p, signal.SIGUSR1 if launched else signal.SIGINT if sig == signal.SIGINT else signal.SIGTERM)
        raise


def stop_trainer(p, sig, grace=None):
    """Sends sig to the trainer (a terminal's Ctrl-C has reached it already: the same signal again within 2 s is one
    stop to it) and waits for it to exit; kills it after grace seconds, or at an interruption 2 s or more after the
    first (one within 2 s is the same stop, as the trainer reads it: a quick double Ctrl-C killed it before its
    checkpoint). Returns the interruption (KeyboardInterrupt or Stopped) that came meanwhile, or None."""
    t0, interrupted = time.monotonic(), None
    if p.poll() is None:
        p.send_signal(sig)
    while True:
        try:
            left = None if grace is None else max(0.0, grace - (time.monotonic() - t0))
            p.wait(timeout=left)
            return interrupted
        except (KeyboardInterrupt, Stopped) as e:
            interrupted = interrupted or e
            if time.monotonic() - t0 >= 2.0:
                p.kill()
                p.wait()
                return interrupted
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            return interrupted


def remove_outputs(runs, args, outputs):
    """Removes the table and plot of an earlier invocation when this one trains a run: their logs change, and a rerun
    stopped midway would leave the old table beside them. When every run is kept the table is rewritten at the end."""
    train = [r for r in runs if r.state != "keep"]
    if not train:
        return
    for name in outputs:
        path = os.path.join(args.out, name)
        if os.path.exists(path):
            os.remove(path)
            print(f"removed {path} of an earlier invocation: {len(train)} of this invocation's {len(runs)} runs "
                  f"train, and it is written again from their logs when they have finished", flush=True)


def state_notes(runs, args):
    """The markdown's notes on how this invocation continued an earlier one, and on the runs DIR holds that are not
    in this table (a --models subset's: the full command tabulates them without training them again)."""
    notes = []
    for state, what in (("keep", "kept from an earlier invocation (finished; not trained again)"),
                        ("resume", "resumed from their checkpoints")):
        names = [r.name for r in runs if r.state == state]
        if names:
            notes.append(f"{what}: {', '.join(names)}")
    mine = {r.name for r in runs}
    others = sorted(f[:-len(".cmd")] for f in (os.listdir(args.out) if os.path.isdir(args.out) else [])
                    if f.endswith(".cmd") and f[:-len(".cmd")] not in mine)
    if others:
        notes.append(f"{args.out} also holds {len(others)} run(s) not in this table ({', '.join(others)}): the "
                     f"command that ran them tabulates them (its finished runs are kept, not trained again)")
    return notes


def run_all(runs, args, outputs=()):
    """Runs each run (unless --dry-run) into DIR/<run>.out and .jsonl, checkpointing into DIR/ckpt/<run>. A rerun of
    the same command continues an earlier one: a finished run is kept (not trained again), an unfinished one resumes
    from its checkpoint (--resume), any other starts over (--overwrite); --restart starts every run over. outputs: the
    files the script writes from the logs at the end (its table, its plot), removed first when a run trains (see
    remove_outputs). Returns (the devices the runs printed, failed runs)."""
    devices, failures = [], 0
    check_data(runs, args)
    check_launch(runs, args)
    for binary in sorted({r.binary for r in runs}):
        need_binary(binary)
    plan_states(runs, args)
    if not args.dry_run:
        make_out(args.out)
        remove_outputs(runs, args, outputs)
    launch = launcher(args)
    for i, r in enumerate(runs, 1):
        cmd = r.cmd(args.out)
        log, out = os.path.join(args.out, r.name + ".jsonl"), os.path.join(args.out, r.name + ".out")
        if r.state == "keep":
            print(f"[{i}/{len(runs)}] {r.name}: kept, {r.state_why}", flush=True)
            if args.dry_run:
                continue
            r.rc, r.result = 0, summarize(log)
        else:
            how = ["--resume"] if r.state == "resume" else ["--overwrite"]
            print(f"[{i}/{len(runs)}] {' '.join(shlex.quote(c) for c in launch + cmd + how)}" +
                  (f"  # {r.state_why}" if r.state == "resume" else ""), flush=True)
            if args.dry_run:
                continue
            if r.state == "start":  # (this run's own files, nobody else's)
                if os.path.isdir(ckpt_dir(args.out, r)):
                    shutil.rmtree(ckpt_dir(args.out, r))
                # the trainer's --overwrite empties the log at its first record: one stopped before that (a set-up
                # error, Ctrl-C) left another command's finished log beside this command's .cmd, kept by a rerun
                if os.path.exists(log):
                    os.remove(log)
            with open(os.path.join(args.out, r.name + ".cmd"), "w") as f:
                f.write(command_key(cmd, args.out) + "\n")  # what a rerun compares (run_state)
            with open(os.path.join(args.out, r.name + ".launch"), "w") as f:  # (not compared: the markdown's)
                f.write(" ".join(shlex.quote(w) for w in launch) + "\n")
            rc = train_one(r, launch + cmd + how, i, len(runs), args)
            if rc != 0:
                failures += 1
                print(f"    FAILED (exit {rc}); see {out}", file=sys.stderr)
            else:
                print(f"    done in {r.meta['wall_s']:.1f}s{outcome(r.result, log)}", flush=True)
        d = device_line(out)
        if d and d not in devices:
            devices.append(d)
    return devices, failures


def launched_ranks(args):
    """The rank count --launch names (mpirun's -np/-n/--np, srun's -n/--ntasks), or None."""
    words = launcher(args)
    for i, w in enumerate(words):
        for flag in ("-np", "-n", "--np", "--ntasks", "-c"):
            if flag == "-c" and not words[0].endswith(("mpirun", "mpiexec")):
                continue  # (Open MPI's -c is -np; srun's -c is CPUs per task)
            value = w[len(flag) + 1:] if w.startswith(flag + "=") else (words[i + 1] if w == flag and i + 1 < len(words)
                                                                         else None)
            if value is not None and value.isdigit() and int(value) > 0:
                return int(value)
    return None


def check_launch(runs, args):
    """Each run's --global-batch must split over --launch's ranks into whole micro-batches: said before any run (the
    planner plans one rank, so a dry run passed what every run then refused at its start)."""
    ranks = launched_ranks(args)
    if not ranks:
        return
    for r in runs:
        if "--global-batch" not in r.flags:
            continue
        n, B = int_flag(r.flags, "--global-batch"), int_flag(r.flags, "--batch-size")
        if n % (ranks * B):
            fits = next((b for b in range(min(B, n // ranks), 0, -1) if n % (ranks * b) == 0), None)
            sys.exit(f"--launch {args.launch!r}: run {r.name}'s global batch of {n} does not split over {ranks} ranks "
                     f"into micro-batches of {B}\n---> HINT: launch a number of ranks that divides {n // B} (the "
                     f"runs' micro-batch: {B})" + (f"; or --extra='--batch-size {fits}'" if fits else ""))


def run_launcher(r, args):
    """The launcher a run last trained under, as its command's prefix ("mpirun -np 4 "; "" for none): a kept run's is
    the earlier invocation's (DIR/<run>.launch)."""
    path = os.path.join(args.out, r.name + ".launch")
    try:
        with open(path) as f:
            words = f.read().strip()
    except OSError:
        words = " ".join(shlex.quote(w) for w in launcher(args))
    return words + " " if words else ""


def launcher(args):
    """--launch's words (none without it); one line for an unbalanced quote."""
    try:
        return shlex.split(getattr(args, "launch", ""))
    except ValueError as e:
        sys.exit(f"--launch {args.launch!r}: {e}")


def train_one(r, cmd, i, n, args):
    """Runs one trainer (its output appended to DIR/<run>.out when it resumes); sets r.rc, r.result and
    r.meta["wall_s"]; returns r.rc. A stop signal ends the script after the trainer's checkpoint, saying how a
    rerun continues."""
    log, out = os.path.join(args.out, r.name + ".jsonl"), os.path.join(args.out, r.name + ".out")
    t0 = time.time()
    with open(out, "a" if r.state == "resume" else "w") as f:
        try:
            rc = run_trainer(cmd, f, args.run_timeout, launched=bool(launcher(args)))
        except (KeyboardInterrupt, Stopped) as e:
            sig, name = interruption(e)
            step = newest_checkpoint(ckpt_dir(args.out, r))
            print(f"interrupted ({name}) during run {i}/{n} {r.name} after {time.time() - t0:.1f} s: no table "
                  f"written; its output so far: {out}", file=sys.stderr)
            again = ("rerun the same command without --restart (which would start every run over)"
                     if getattr(args, "restart", False) else "rerun the same command")
            print(again + " to continue: finished runs are kept, and " +
                  (f"{r.name} resumes from its checkpoint at step {step}" if step is not None else
                   f"{r.name} starts over (no checkpoint was written)"), file=sys.stderr)
            sys.exit(128 + sig.value)
    if rc != 0 and finished(r, log):  # (as a rerun reads it: kept, finished)
        print(f"    exit {rc} after its final evaluation (a stop signal or the timeout during its --sample or "
              f"--save): its log is complete, its numbers count", flush=True)
        rc = 0
    r.rc = rc
    r.meta["wall_s"] = time.time() - t0
    # a failed run (diverged: the trainer logs the bad step, nulls, and stops; timed out; killed) gets no numbers:
    # its log's last ones are from before the failure, and would read as the run's result
    r.result = summarize(log) if rc == 0 else None
    if rc == 0 and not any(rec.get("type") == "step" for rec in records(log)):
        # exit 0 without training (a flag in --extra such as --eval-only or --plan): its numbers, if any, are
        # of the initial weights, not a result
        r.rc = "0 but no training step in its log"
        r.result = None
    return r.rc


def device_line(out):
    """The machine a run's output names (its first `device:` line), or None."""
    if os.path.exists(out):
        with open(out) as f:
            for line in f:
                if line.startswith("device:"):
                    return line[len("device:"):].strip()
    return None


def outcome(result, log):
    """What a finished run's progress line says after its time: the validation loss and perplexity of a pretraining
    run; a fine-tuning run's dev score (its log's `final` record: the trainer's metric of the task, final and best
    epoch); nothing more when the log has neither."""
    if result and result.get("val_loss") is not None:
        return f": val loss {fmt_num(result['val_loss'], '{:.4f}')}, ppl {fmt_num(result.get('ppl'))}"
    final = None
    for rec in records(log):
        if rec.get("type") == "final":
            final = rec
    if final and final.get("metric"):
        best = f", best {fmt_num(final.get('best'), '{:.4f}')}" + \
            (f" (epoch {final['best_epoch']:g})" if isinstance(final.get("best_epoch"), (int, float)) else "")
        return f": dev {final['metric']}: final {fmt_num(final.get('final'), '{:.4f}')}{best}"
    return ""


def records(path):
    """The records of a log (none when it is missing), checked as plot_runs.py checks them (scripts/run_log.py): a
    last line cut by a kill mid-write is skipped; any other damaged line stops the script with a line naming it,
    before a table is written of it."""
    if not os.path.exists(path):
        return []
    try:
        return [rec for _, rec in read_records(path, warn=False)]
    except LogError as e:
        sys.exit(f"{e}\n---> HINT: repair that log, or move it away to run the run again (--restart runs every run "
                 f"of the table again)")


# the records plot_runs.py draws: steps (a record without a type is one), evaluations, fine-tuning's dev evaluations
PLOTTED = ("step", "eval", "glue_eval")


def attach_plans(runs, args):
    for r in runs:
        r.plan = planner(r.binary, r.flags, args.gpu_mem if args.paper else None)


def plot(runs, args, table, title):
    """DIR/<table>.png of the runs' logs through scripts/plot_runs.py (a failed run's curve labelled so). Returns
    (the PNG's path or None, a note for the markdown or None): why there is no PNG, or which runs it leaves out (a log
    missing or without a step or evaluation record, e.g. a run killed before its first step: plot_runs.py would have
    nothing to draw of it). Without a PNG, an earlier invocation's is removed: the markdown says there is none."""
    png = os.path.join(args.out, table + ".png")
    result = plot_png(runs, args, png, title)
    if result[0] is None and os.path.exists(png):
        os.remove(png)
    return result


def plot_png(runs, args, png, title):
    logs, empty = [], []
    for r in runs:
        path = os.path.join(args.out, r.name + ".jsonl")
        if any(rec.get("type", "step") in PLOTTED for rec in records(path)):
            logs.append((r.plot_label + ("" if r.rc in (None, 0) else f" (failed: exit {r.rc})"), path))
        else:
            empty.append(r.plot_label)
    left_out = (f"left out of the plot (no step or evaluation record in the log): {', '.join(empty)}"
                if empty else None)
    if left_out:
        print(left_out, file=sys.stderr)
    if not logs:
        return None, "no log has a step or evaluation record to plot"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        msg = "matplotlib is not installed: PNG skipped (pip install matplotlib)"
        print(msg, file=sys.stderr)
        return None, msg
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "plot_runs.py")] + [p for _, p in logs] + \
          ["--labels", ",".join(l.replace(",", ";") for l, _ in logs), "--out", png, "--title", title]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        msg = f"plot_runs.py failed: {p.stderr.strip()}"
        print(msg, file=sys.stderr)
        return None, msg
    return png, left_out


def plot_lines(png, note, alt="loss curves"):
    """The markdown lines of plot()'s result: the image and what it leaves out, or why there is none."""
    if not png:
        return [f"Plot: {note}."]
    return [f"![{alt}]({os.path.basename(png)})"] + ([f"Plot: {note}."] if note else [])


def column_legend(body, args, cpu=False):
    """One line describing the columns the table has (PPL, MEM planned, MEM measured, Δ), and only those: the tables'
    headers differ (ablation_k has no memory column, ablation_modes no measured one, table4 no PPL). cpu: the runs ran
    on the CPU backend, whose measured peak is its plan."""
    lines = body.splitlines()
    header = " ".join(lines[i - 1] for i in range(1, len(lines)) if lines[i].startswith("|---"))  # header rows
    unit, _ = mem_unit(args)
    parts = []
    if "PPL" in header:
        parts.append("PPL = exp(final validation loss) from each log's last eval record.")
    if "MEM planned" in header:
        parts.append(f"MEM planned = the trainer's `--plan --json` total for the run's flags ({unit}; CPU fp32 plans "
                     f"with --device cpu, otherwise CUDA in the trainer build's precision).")
    if "MEM measured" in header:
        parts.append("MEM measured = max `mem_peak_bytes` of the backend's allocations in the log" +
                     (": on the CPU backend (these runs) that is the arena the trainer allocates from the plan, so it "
                      "equals the CPU fp32 plan by construction (a test checks it), a check of the plan, not an "
                      "independent measurement; only a GPU run measures a peak." if cpu else "."))
    if "Δ" in header.replace("Δ tokens/s", ""):
        parts.append("Δ = relative to the baseline row's planned memory.")
    if "Δ tokens/s" in header:
        parts.append("Δ tokens/s = relative to the baseline row's tokens/s.")
    return " ".join(parts)


def on_cpu(args, devices):
    """Whether the runs ran on the CPU backend (--device cpu, or the trainers' device lines say so)."""
    return args.device == "cpu" or any(d.startswith("CPU") for d in devices)


def paper_notes(runs, args):
    """--paper's departures from the paper that hold for every table, said in its markdown: one seed per row (the paper
    reports the mean over several seeds, section 6.1), and the trainer's PRAC ranks rounded down to multiples of 8."""
    if not args.paper:
        return []
    notes = []
    seeds = {flag_value(r.flags, "--seed", "42") for r in runs}
    if len(seeds) == 1:
        notes.append(f"One run per row, at --seed {seeds.pop()}: the paper reports the mean over several seeds "
                     f"(section 6.1); rerun with --extra='--seed S' and another --out for each further seed.")
    pretrain = [r for r in runs if r.binary in ("train_gpt2", "train_llama")]
    absolute = {"--prac-linear-ranks", "--prac-nonlinear-ranks"}  # (both given: no fraction is rounded)
    if any(flag_value(r.flags, "--prac", "none") != "none" and not absolute <= set(_flag_values(r.flags))
           for r in pretrain):
        notes.append("PRAC's ranks are the trainer's fractions (0.3 n linear, 0.2 n nonlinear) rounded down to a "
                     "multiple of 8, for aligned GEMMs: up to 7 below the paper's, e.g. 224 for 0.3 x 768 = 230 "
                     "(a little less memory, a little more variance; each run's .out lists its sites' ranks at "
                     "the start).")
    return notes


def main_flow(args, table, title, runs, build_tables, notes=()):
    """Runs everything and writes DIR/<table>.md (+ .png). build_tables(runs) -> markdown string."""
    t0 = time.time()
    print(f"# {title}: {len(runs)} runs -> {args.out}" + (" (dry run)" if args.dry_run else ""), flush=True)
    notes = list(notes) + check_extra(runs, args) + paper_notes(runs, args)
    devices, failures = run_all(runs, args, outputs=(table + ".md", table + ".png"))
    if not args.dry_run:
        notes += state_notes(runs, args)
        # (--on-nonfinite skip in --extra: the row's numbers are of a run whose updates were left out; the table
        # read clean, plot_runs.py alone said it)
        skipped = [f"{r.name} ({r.result['skipped']})" for r in runs if r.result and r.result.get("skipped")]
        if skipped:
            notes.append(f"steps skipped (--on-nonfinite skip: a non-finite loss or gradient norm, the update left "
                         f"out): {', '.join(skipped)}; their rows are not of clean runs")
    attach_plans(runs, args)
    # a failed planner call: a run's flags the trainer refuses, or a fit check (table2's OOM, table4's micro-batch)
    # that could not be made; the dry run's only check of the runs, so it fails the script there too
    planner_msg = f"{len(PLANNER_FAILURES)} planner call(s) failed (the messages above)" if PLANNER_FAILURES else ""
    if args.dry_run:
        if planner_msg:
            print(f"dry run: {planner_msg}", file=sys.stderr)
        return 1 if PLANNER_FAILURES else 0
    body = build_tables(runs)
    png, plot_note = plot(runs, args, table, title)
    wall = time.time() - t0
    lines = [f"# {title}", ""]
    if args.quick:
        lines += [f"**--quick:** {QUICK_CAVEAT}.", ""]
    lines += [f"Machine: {'; '.join(devices) if devices else 'unknown (no device: line)'}. "
              f"Wall time {wall:.0f} s for {len(runs)} runs.", ""]
    lines += ["Commands run:", "", "```sh"]
    lines += [run_launcher(r, args) + shell_line(r.cmd(args.out)) for r in runs]
    lines += ["```", "", body, ""]
    legend = column_legend(body, args, cpu=on_cpu(args, devices))
    if legend:
        lines += [legend]
    lines += [f"- {n}" for n in notes]
    if failures:
        resumable = [r.name for r in runs
                     if r.rc not in (0, None) and newest_checkpoint(ckpt_dir(args.out, r)) is not None]
        lines += ["", f"**{failures} run(s) failed**: see the .out files in {args.out}." +
                  (f" A rerun of the same command resumes {', '.join(resumable)} from their checkpoints (a timeout, "
                   f"exit 124, or a stop); a diverged run would diverge again." if resumable else "")]
    if planner_msg:
        lines += ["", f"**{planner_msg}**: their runs' MEM planned shows -."]
        print(planner_msg, file=sys.stderr)
    lines += [""] + plot_lines(png, plot_note)
    md = os.path.join(args.out, table + ".md")
    with open(md, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n" + body + "\n")
    print(f"wrote {md}" + (f" and {png}" if png else "") +
          f" ({wall:.0f} s)")
    return 1 if failures or PLANNER_FAILURES else 0
