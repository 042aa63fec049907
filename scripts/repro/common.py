"""Shared logic of the PRAC reproduction scripts (scripts/repro/*.py).

Each script builds a list of Run objects (one trainer invocation each), then calls main_flow(), which
  * prints every command and, unless --dry-run, runs it (stdout to DIR/<run>.out, metrics to DIR/<run>.jsonl),
  * asks the planner (./train_* --plan --json with the run's flags) for the planned peak memory,
  * hands the collected results to the script's table builder and writes DIR/<table>.md and DIR/<table>.png
    (loss curves through scripts/plot_runs.py; skipped with a printed reason when matplotlib is missing).
"""
import argparse
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
# (the trainer's defaults, fp8 projections and a recomputed attention output, save more: memory.py's rows)
PAPER_STORAGE = ["--prac-storage", "act", "--recompute-attention", 0]
GALORE_LR = 1e-2  # GaLore's LLaMA learning rate (scale 0.25); the paper uses the baselines' published settings


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

    def cmd(self, out_dir):
        return [os.path.join(ROOT, self.binary)] + self.flags + ["--log", os.path.join(out_dir, self.name + ".jsonl")]


def base_parser(description, pretrain=True, gpt2=False):
    """The flags every script shares. pretrain: the pretraining scripts' --train-data, --val-data and --gpu-mem (not
    table5's fine-tuning); gpt2: also --gpt2-train-data and --gpt2-val-data (table2, the only one with GPT-2 runs)."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--quick", action="store_true", help="tiny CPU budget (pipeline check, minutes on 2 cores)")
    mode.add_argument("--paper", action="store_true", help="the paper's configurations (GPUs, days)")
    ap.add_argument("--out", help="output directory (default runs/<table>)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands only (writes nothing)")
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
        ap.add_argument("--gpu-mem", type=float, default=80.0,
                        help="GPU memory (GiB) for planner OOM / batch checks [80]")
    ap.add_argument("--run-timeout", type=float, default=None,
                    help="seconds before a run is killed (0: never) [0" + ("" if pretrain else "; --quick: 300") + "]")
    ap.add_argument("--extra", default="", help="extra trainer flags appended to every run, one quoted string; "
                    "write it with '=' (--extra=--no-shuffle, --extra='--seed 2 --no-shuffle'): argparse takes a "
                    "separate value that starts with '-' for a flag of this script")
    return ap


def check_out(path):
    """Stops with one line when --out names something that is not a directory (before any run, dry or not)."""
    if os.path.exists(path) and not os.path.isdir(path):
        sys.exit(f"--out {path}: exists and is not a directory")


def make_out(path):
    """Creates --out (and its parents); one line instead of a traceback when it cannot."""
    check_out(path)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        sys.exit(f"--out {path}: cannot create the directory: {e.strerror}")


def out_dir(args, table):
    """--out (default runs/<table>) as an absolute path: the trainer runs with cwd=ROOT, so a relative --log would name
    a directory under ROOT, not under the caller's directory."""
    args.out = os.path.abspath(args.out if args.out is not None else os.path.join("runs", table))
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


def finish_args(args, table):
    out_dir(args, table)
    check_run_timeout(args)
    # the planner's --gpu-mem takes GiB > 0 (0 would mean "no fit check", and a negative one fails every call)
    if getattr(args, "gpu_mem", 1) <= 0:
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
    any run, for the runs of this table only (a GPT-2-only table asked for C4's)."""
    if args.dry_run or args.quick:
        return
    for r in runs:
        if "TRAIN_SHARDS" in r.flags or "VAL_SHARDS" in r.flags:
            which = ("--gpt2-train-data and --gpt2-val-data (OpenWebText), or --train-data and --val-data"
                     if r.binary == "train_gpt2" and hasattr(args, "gpt2_train_data") else "--train-data and --val-data")
            sys.exit(f"--paper: run {r.name} needs {which} (C4 shards for LLaMA), or --dry-run")


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
    f = ["--steps", args.steps or steps or q["steps"], "--batch-size", batch or q["batch"], "--seq-len", q["seq"],
         "--eval-tokens", q["eval_tokens"], "--eval-interval", q["eval_interval"], "--lr", q["lr"],
         "--prac-t1", q["prac_t"], "--prac-t2", q["prac_t"], "--log-interval", 10]
    return f


def paper_config(model):
    """PAPER's configuration of a model; one line naming the paper's models for another (a --quick model, a typo)."""
    if model not in PAPER:
        sys.exit(f"--paper has no configuration of {model}: the paper's models are {', '.join(PAPER)} "
                 f"(--quick runs the tiny ones)")
    return PAPER[model]


def paper_flags(args, model, B=None, accum=None, lr=None, steps=None):
    c = paper_config(model)
    B = B or c["B"]
    accum = accum or max(1, GLOBAL_BATCH // B)
    steps = args.steps or steps or c["steps"]
    f = ["--batch-size", B, "--seq-len", c["S"], "--grad-accum", accum, "--steps", steps, "--lr", lr or c["lr"],
         "--eval-interval", max(1, min(1000, steps)), "--log-interval", 100] + PAPER_STORAGE
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


def check_extra(runs, args):
    """--extra against the flags the table sets itself (the trainer takes the last of a flag given twice, so --extra
    replaces them in every run). A flag the runs set to different values, or that some set and others leave at the
    default (--prac, --optimizer, --model; --paper's per-model --lr and --eval-tokens), would become one value for all:
    the rows would no longer be what their labels and the table say, so that stops the script with one line. A flag
    every run sets alike (--quick's --lr, --steps) is replaced: the returned notes say so, for the table's markdown."""
    if not args.extra:
        return []
    extra = shlex.split(args.extra)  # (common_tail has refused an unbalanced quote)
    wanted = _flag_values(extra)
    own = {r.name: _flag_values(r.flags[:len(r.flags) - len(extra)]) for r in runs}
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


def flag_value(flags, name):
    """The value of a flag as the trainer reads it: its last occurrence (--extra's replaces the table's own)."""
    at = max(i for i, f in enumerate(flags) if f == name)
    return flags[at + 1]


# ---------------------------------------------------------------- logs

def read_jsonl(path):
    steps, evals = [], []
    if not os.path.exists(path):
        return steps, evals
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(rec, dict) or rec.get("eval_only"):
                continue  # an --eval-only evaluation is of loaded weights, not of a training run
            (evals if rec.get("type") == "eval" else steps).append(rec)
    return steps, evals


def summarize(path):
    steps, evals = read_jsonl(path)
    if not steps and not evals:
        return None
    final = evals[-1] if evals else {}
    # the trainer writes a non-finite number as null (train/metrics_log.h): a null loss is NaN here, so a diverged
    # run reads nan, not the mean of its finite steps before the divergence
    vl = math.nan if "val_loss" in final and final["val_loss"] is None else final.get("val_loss")
    timed = steps[1:] if len(steps) > 1 else steps  # the first step carries one-time setup
    tps = [s["tokens_per_s"] for s in timed if s.get("tokens_per_s")]
    ms = [s["ms_per_step"] for s in timed if s.get("ms_per_step")]
    # the steps' tokens over their time: what a long run's duration follows (the mean of per-step rates is higher
    # whenever some steps are slower)
    both = [(s["tokens_per_s"], s["ms_per_step"]) for s in timed if s.get("tokens_per_s") and s.get("ms_per_step")]
    overall = sum(t * m for t, m in both) / sum(m for _, m in both) if both else None
    peaks = [s.get("mem_peak_bytes") or 0 for s in steps]
    losses = [s["loss"] if s["loss"] is not None else math.nan for s in steps if "loss" in s]
    # exp overflows past ~709: inf (a NaN loss compares false and stays nan)
    ppl = None if vl is None else math.inf if vl >= 700 else math.exp(vl)
    return dict(steps=len(steps), val_loss=vl, ppl=ppl,
                train_loss=sum(losses[-10:]) / len(losses[-10:]) if losses else None,
                tokens_per_s=sum(tps) / len(tps) if tps else None, ms_per_step=sum(ms) / len(ms) if ms else None,
                tokens_per_s_overall=overall,
                mem_peak=max(peaks) if peaks and max(peaks) > 0 else None)


# ---------------------------------------------------------------- formatting

def mem_unit(args):
    return ("GB", 1e9) if args.paper else ("MiB", 2**20)


def fmt_mem(b, args):
    if b is None:
        return "-"
    unit, div = mem_unit(args)
    return f"{b / div:.2f}"


def fmt_num(x, fmt="{:.2f}"):
    """x formatted; "-" for no value; nan / inf for a non-finite one (a diverged run), not "-"."""
    if x is None:
        return "-"
    return fmt.format(x) if math.isfinite(x) else str(x)


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

def run_all(runs, args, outputs=()):
    """Runs each run (unless --dry-run) into DIR/<run>.out and .jsonl. outputs: the files the script writes from
    them at the end (its table, its plot), removed first when an earlier invocation left them: a rerun stopped midway
    would leave the old table beside the new runs' logs. Returns (the devices the runs printed, failed runs)."""
    devices, failures = [], 0
    check_data(runs, args)
    for binary in sorted({r.binary for r in runs}):
        need_binary(binary)
    if not args.dry_run:
        make_out(args.out)
        for name in outputs:
            path = os.path.join(args.out, name)
            if os.path.exists(path):
                os.remove(path)
                print(f"removed {path} of an earlier invocation (its runs are being replaced)", flush=True)
    for i, r in enumerate(runs, 1):
        cmd = r.cmd(args.out)
        print(f"[{i}/{len(runs)}] {' '.join(shlex.quote(c) for c in cmd)}", flush=True)
        if args.dry_run:
            continue
        log = os.path.join(args.out, r.name + ".jsonl")
        if os.path.exists(log):
            os.remove(log)  # a fresh run refuses a log with records (and a resumed one appends)
        t0 = time.time()
        with open(os.path.join(args.out, r.name + ".out"), "w") as f:
            try:
                rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT,
                                    timeout=args.run_timeout or None).returncode
            except subprocess.TimeoutExpired:
                rc = 124
                print(f"    timed out after {args.run_timeout:g} s", file=sys.stderr)
            except (KeyboardInterrupt, Stopped) as e:  # (subprocess.run has ended the run: SIGINT reached it, or
                sig, name = interruption(e)                # it was killed)
                print(f"interrupted ({name}) during run {i}/{len(runs)} {r.name} after {time.time() - t0:.1f} s: "
                      f"no table written; its output so far: {os.path.join(args.out, r.name + '.out')}",
                      file=sys.stderr)
                sys.exit(128 + sig.value)
        r.rc = rc
        r.meta["wall_s"] = time.time() - t0
        with open(os.path.join(args.out, r.name + ".out")) as f:
            for line in f:
                if line.startswith("device:"):
                    d = line[len("device:"):].strip()
                    if d not in devices:
                        devices.append(d)
                    break
        # a failed run (diverged: the trainer stops before logging the bad step; timed out; killed) gets no numbers:
        # its log's last ones are from before the failure, and would read as the run's result
        r.result = summarize(log) if rc == 0 else None
        if rc == 0 and not any(rec.get("type") == "step" for rec in records(log)):
            # exit 0 without training (a flag in --extra such as --eval-only or --plan): its numbers, if any, are
            # of the initial weights, not a result
            rc = r.rc = "0 but no training step in its log"
            r.result = None
        if rc != 0:
            failures += 1
            print(f"    FAILED (exit {rc}); see {os.path.join(args.out, r.name + '.out')}", file=sys.stderr)
        else:
            print(f"    done in {r.meta['wall_s']:.1f}s{outcome(r.result, log)}", flush=True)
    return devices, failures


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
    """The JSON objects of a log, one a line (none when it is missing); a line that does not parse (a run killed
    mid-write) is skipped."""
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(rec, dict):
                    out.append(rec)
    return out


# the records plot_runs.py draws: steps (a record without a type is one), evaluations, fine-tuning's dev evaluations
PLOTTED = ("step", "eval", "glue_eval")


def attach_plans(runs, args):
    for r in runs:
        r.plan = planner(r.binary, r.flags, args.gpu_mem if args.paper else None)


def plot(runs, args, table, title):
    """DIR/<table>.png of the runs' logs through scripts/plot_runs.py (a failed run's curve labelled so). Returns
    (the PNG's path or None, a note for the markdown or None): why there is no PNG, or which runs it leaves out (a log
    missing or without a step or evaluation record, e.g. a run killed before its first step: plot_runs.py would have
    nothing to draw of it)."""
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
    png = os.path.join(args.out, table + ".png")
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


def column_legend(body, args):
    """One line describing the columns the table has (PPL, MEM planned, MEM measured, Δ), and only those: the tables'
    headers differ (ablation_k has no memory column, ablation_modes no measured one, table4 no PPL)."""
    lines = body.splitlines()
    header = " ".join(lines[i - 1] for i in range(1, len(lines)) if lines[i].startswith("|---"))  # header rows
    unit, _ = mem_unit(args)
    parts = []
    if "PPL" in header:
        parts.append("PPL = exp(final validation loss) from each log's last eval record.")
    if "MEM planned" in header:
        parts.append(f"MEM planned = the trainer's `--plan --json` total for the run's flags ({unit}; CPU fp32 plans "
                     f"with --device cpu, CUDA bf16 otherwise).")
    if "MEM measured" in header:
        parts.append("MEM measured = max `mem_peak_bytes` of the backend's allocations in the log.")
    if "Δ" in header.replace("Δ tokens/s", ""):
        parts.append("Δ = relative to the baseline row's planned memory.")
    if "Δ tokens/s" in header:
        parts.append("Δ tokens/s = relative to the baseline row's tokens/s.")
    return " ".join(parts)


def main_flow(args, table, title, runs, build_tables, notes=()):
    """Runs everything and writes DIR/<table>.md (+ .png). build_tables(runs) -> markdown string."""
    t0 = time.time()
    print(f"# {title}: {len(runs)} runs -> {args.out}" + (" (dry run)" if args.dry_run else ""), flush=True)
    notes = list(notes) + check_extra(runs, args)
    devices, failures = run_all(runs, args, outputs=(table + ".md", table + ".png"))
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
    lines += [shell_line(r.cmd(args.out)) for r in runs]
    lines += ["```", "", body, ""]
    legend = column_legend(body, args)
    if legend:
        lines += [legend]
    lines += [f"- {n}" for n in notes]
    if failures:
        lines += ["", f"**{failures} run(s) failed**: see the .out files in {args.out}."]
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
