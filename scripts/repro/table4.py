#!/usr/bin/env python3
"""Table 4 of the PRAC paper: training time and memory of LLaMA-1B, Baseline at micro-batch B vs PRAC at the same B
and at the larger micro-batch that PRAC's memory saving allows.

    python3 scripts/repro/table4.py --quick [--out runs/table4-quick]
    python3 scripts/repro/table4.py --paper --train-data 'c4_llama_train_*.bin' --val-data 'c4_llama_val_*.bin' [--gpu-mem 80]

--paper: B = 64 (the paper's); PRAC also runs at the paper's larger micro-batch, 96, where it fits, and at the
planner's largest PRAC micro-batch that fits --gpu-mem (./train_llama --plan --gpu-mem, which keeps a reserve for the
CUDA context); the script stops with an error, before any run, when the planner fails or its largest is not above B
(nothing larger to time: raise --gpu-mem). Each run is
a short timing run (--steps, default 200, grad-accum 1). --quick: a tiny model at B and 2B. Reported: tokens/s (the
tokens of the steps after the first over their time), ms/step (their mean), planned and measured peak memory, and the
projected time of the paper's 150K steps x 512 x 256 tokens at that tokens/s, on one device (the paper's hours are
of 4 GPUs).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

PAPER_MODEL, PAPER_B, PAPER_B2, PAPER_TIMING_STEPS = "llama-1b", 64, 96, 200


def build_runs(args):
    if args.quick:
        model, B = "llama-tiny", C.QUICK["batch"]
        B2 = 2 * B
        larger = [B2]
        mk = lambda b: ["--model", model] + C.quick_flags(args, batch=b)
    else:
        model, B = PAPER_MODEL, PAPER_B
        c = C.paper_config(model)
        probe = (["--model", model, "--batch-size", B, "--seq-len", c["S"], "--prac", "prac"] + C.PAPER_STORAGE +
                 C.common_tail(args))
        p = C.planner("train_llama", probe, args.gpu_mem)
        # the last row is the planner's answer or nothing: a made-up micro-batch would read as the planner's
        if p is None:
            sys.exit("table4: cannot find PRAC's largest micro-batch: the planner failed (its message is above)")
        B2, reserve = p["max_batch_size"], p["reserve_bytes"] / 2**30
        if B2 <= B:
            sys.exit(f"table4: PRAC {model} at T={c['S']} " +
                     (f"fits at most micro-batch {B2}" if B2 else "does not fit even at micro-batch 1") +
                     f" in {args.gpu_mem:g} GiB (./train_llama --plan --gpu-mem, keeping {reserve:g} GiB for the "
                     f"CUDA context): no micro-batch above B={B} to time; raise --gpu-mem")
        larger = sorted({b for b in (PAPER_B2, B2) if B < b <= B2})  # the paper's 96 where it fits, the largest
        steps = args.steps or PAPER_TIMING_STEPS
        mk = lambda b: (["--model", model, "--batch-size", b, "--seq-len", c["S"], "--grad-accum", 1, "--steps", steps,
                         "--lr", c["lr"], "--eval-tokens", 65536, "--log-interval", 10] + C.PAPER_STORAGE +
                        C.data_flags(args, "train_llama"))
    tail = C.common_tail(args)
    return [C.Run(f"baseline_b{B}", f"Baseline B={B}", "train_llama", mk(B) + ["--prac", "none"] + tail,
                  meta=dict(method="Baseline", B=B)),
            C.Run(f"prac_b{B}", f"PRAC B={B}", "train_llama", mk(B) + ["--prac", "prac"] + tail,
                  meta=dict(method="PRAC", B=B))] + \
        [C.Run(f"prac_b{b}", f"PRAC B={b}", "train_llama", mk(b) + ["--prac", "prac"] + tail,
               meta=dict(method="PRAC", B=b)) for b in larger], B, B2


def main():
    ap = C.base_parser(__doc__, launch=False)
    args = C.finish_args(ap.parse_args(), "table4")
    if args.launch:  # (its projection divides by one device's tokens/s; the trainer logs all ranks' together)
        sys.exit("--launch: table4 projects the paper's hours from one device's tokens/s and memory (its notes say "
                 "so); run it without a launcher")
    runs, B, B2 = build_runs(args)
    unit, _ = C.mem_unit(args)
    seq = C.int_flag(runs[0].flags, "--seq-len")
    paper_tokens = 150000 * 512 * 256

    def tables(runs):
        base = runs[0]
        header = ["Method", "Batch Size", f"MEM planned ({unit})", f"MEM measured ({unit})", "Δ MEM (planned)",
                  "tokens/s", "ms/step", "Δ tokens/s", "projected time on one device, 150K x 512 x 256 tokens (h)"]
        rows = []
        for r in runs:
            s = r.result or {}
            tps = s.get("tokens_per_s")
            up = f" (+{100 * (r.meta['B'] - B) / B:.0f}%)" if r.meta["B"] != B else ""
            rows.append([r.meta["method"], f"{r.meta['B']}{up}", C.fmt_mem(C.planned_total(r), args),
                         C.fmt_mem(C.measured_peak(r), args),
                         "-" if r is base else C.fmt_delta(C.planned_total(r), C.planned_total(base)),
                         C.fmt_num(tps, "{:.0f}") if r.result else C.ppl_of(r),  # "failed (exit N)" or -
                         C.fmt_num(s.get("ms_per_step"), "{:.1f}"),
                         "-" if r is base else C.fmt_delta(tps, (base.result or {}).get("tokens_per_s")),
                         C.fmt_num(paper_tokens / tps / 3600 if tps else None, "{:.1f}")])
        return C.md_table(header, rows)

    if args.quick:
        how = "the larger micro-batch is 2x the batch (--quick)"
    else:
        how = (f"the larger micro-batches are the paper's {PAPER_B2} and the planner's largest PRAC micro-batch "
               f"within {args.gpu_mem:g} GiB (--plan --gpu-mem)" if PAPER_B2 < B2 else
               f"the larger micro-batch is the planner's largest PRAC micro-batch within {args.gpu_mem:g} GiB "
               f"(--plan --gpu-mem)" + ("" if PAPER_B2 == B2 else f"; the paper's {PAPER_B2} does not fit it"))
    steps = C.int_flag(runs[0].flags, "--steps")
    # PRAC's refresh interval: what its flags set, or the trainer's default (the paper's 500); a word that is no
    # number ends here in one line (int_flag), a number the trainer refuses (0) is its to say, with the commands
    every = min(C.int_flag(runs[1].flags, f, 500) for f in ("--prac-t1", "--prac-t2"))
    notes = [f"Sequence length {seq}; grad-accum 1; {how}.",
             "Paper (Table 4, 4xA800, LLaMA-1B): Baseline B=64 50.35 GB 156 h; PRAC B=64 36.90 GB 179 h; "
             "PRAC B=96 48.70 GB 117 h. Those hours are of 4 GPUs; the projected time here is of the one device "
             "the runs ran on (divide by the devices of a data-parallel run for a comparison, which ignores "
             "their communication).",
             "tokens/s, Δ tokens/s and the projected time use one aggregation: the tokens of the steps after the "
             "first (a resumed process's first left out too: they carry one-time setup) over their time, slow "
             "steps (PRAC's refreshes) included; ms/step is the mean time of those steps (one optimizer step of one micro-batch). On a shared or loaded machine "
             "(and in --quick) the timings are noise.",
             f"PRAC's {steps} steps hold each site's first basis computation (a cold start, spread over the "
             f"warmup: --prac-initial-spread)" + (f" and each site-layer's periodic refreshes, every {every} steps "
                                                  f"(--prac-t1/--prac-t2) on its own phase (staggered): "
                                                  f"{steps / every:.2g} per site-layer on average, spread over the "
                                                  f"steps" if every > 0 else "") +
             "; a run of 150K steps at the paper's T1 = T2 = 500 refreshes each site once every 500 steps, "
             "warm-started, so PRAC's time here is an upper bound of its cost in a long run."]
    return C.main_flow(args, "table4", "Table 4: training time and memory", runs, tables, notes)


if __name__ == "__main__":
    sys.exit(main())
