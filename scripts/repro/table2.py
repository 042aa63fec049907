#!/usr/bin/env python3
"""Table 2 of the PRAC paper: validation perplexity and peak memory of Baseline / GaLore / RSO / PRAC when
pretraining LLaMA-130M/350M/1B (B/S 128/256, C4) and GPT-2 124M/355M (64/1024, 32/1024, OpenWebText).

    python3 scripts/repro/table2.py --quick [--out runs/table2-quick]
    python3 scripts/repro/table2.py --paper --train-data 'c4_llama_train_*.bin' --val-data 'c4_llama_val_*.bin' \
        --gpt2-train-data 'owt_gpt2_train_*.bin' --gpt2-val-data 'owt_gpt2_val_*.bin' [--models llama-130m,gpt2-124m]

GaLore's LLaMA runs take GaLore's published learning rate and optimizer settings (common.GALORE_LLAMA_OPTIM: no
weight decay, beta2 0.999, eps 1e-6, no clipping); its GPT-2 runs, like the paper's, the baseline's. RSO
(train/optim_rso.h) runs at the baseline's learning rate with the ranks of PAPER (the PRAC paper's for GPT-2,
GaLore's for LLaMA; RSO's own LLaMA settings are not public to us). In --paper mode a method that does not fit
--gpu-mem is marked OOM and trained at half the micro-batch (twice the accumulation), as in the paper. The fit test
is the planner's own (./train_* --plan --gpu-mem: the plan plus its reserve for the CUDA context, its
max_batch_size); when even half the micro-batch does not fit, the script says so and the row reads "OOM even at
half batch" (the run is still listed: on that GPU it is expected to fail).
"""
import os
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

METHODS = [("baseline", "Baseline", ["--optimizer", "adamw", "--prac", "none"]),
           ("galore", "GaLore", ["--optimizer", "galore", "--prac", "none"]),
           ("rso", "RSO", ["--optimizer", "rso", "--prac", "none"]),
           ("prac", "PRAC", ["--optimizer", "adamw", "--prac", "prac"])]
PAPER_MODELS = ["llama-130m", "llama-350m", "llama-1b", "gpt2-124m", "gpt2-355m"]
QUICK_MODELS = ["llama-tiny", "gpt2-tiny"]


def build_runs(args):
    runs = []
    models = C.model_list(args.models, QUICK_MODELS if args.quick else PAPER_MODELS)
    for model in models:
        binary = "train_gpt2" if model.startswith("gpt2") else "train_llama"
        for key, label, mflags in METHODS:
            if args.quick:
                flags = ["--model", model] + mflags + C.quick_flags(args)
                if key == "galore":
                    flags += ["--galore-rank", 16, "--galore-gap", 10]
                if key == "rso":
                    flags += ["--rso-rank", 16, "--rso-gap", 10]
            else:
                c = C.paper_config(model)
                B, lr, oom = c["B"], (C.GALORE_LR if key == "galore" and binary == "train_llama" else None), False
                ranks = (["--galore-rank", c["galore_rank"]] if key == "galore" else
                         ["--rso-rank", c["rso_rank"]] if key == "rso" else [])
                # the run's own model flags (its ranks too), so the fit is the run's
                probe = (["--model", model, "--batch-size", B, "--seq-len", c["S"]] + mflags + ranks +
                         C.PAPER_STORAGE + C.common_tail(args))
                # the planner's fit test, not our own sum: max_batch_size is the largest micro-batch whose plan fits
                # --gpu-mem after the trainer's reserve for the CUDA context (a failed call counts in main_flow)
                p = C.planner(binary, probe, args.gpu_mem)
                if p and B > p["max_batch_size"]:
                    B, oom = B // 2, "half"  # (--global-batch doubles the accumulation)
                    if B > p["max_batch_size"]:
                        oom = "no fit"
                        mb = p["max_batch_size"]
                        print(f"warning: {model} {label}: does not fit in {args.gpu_mem:g} GiB even at half the "
                              f"micro-batch ({B}): the planner's largest is " +
                              (f"{mb}" if mb else "none (not even 1)") +
                              f", keeping {p['reserve_bytes'] / 2**30:g} GiB for the CUDA context; the run is "
                              f"expected to fail", file=sys.stderr)
                flags = ["--model", model] + mflags + C.paper_flags(args, model, B=B, lr=lr) + ranks
                if key == "galore" and binary == "train_llama":
                    flags += C.GALORE_LLAMA_OPTIM
            r = C.Run(f"{model}_{key}", f"{model} {label}", binary, flags + C.common_tail(args),
                      meta=dict(model=model, method=key))
            if not args.quick:
                # the plan at the paper's micro-batch: the memory column of every row, an OOM row's (trained at half
                # the micro-batch) included, so that Δ compares the methods at one batch as the paper's table does
                r.meta.update(oom=oom, B=B, paper_B=c["B"], S=c["S"], paper_plan=p["total"] if p else None)
            runs.append(r)
    return runs, models


def main():
    ap = C.base_parser(__doc__, gpt2=True)
    ap.add_argument("--models", help="comma-separated subset of models")
    args = C.finish_args(ap.parse_args(), "table2")
    runs, models = build_runs(args)
    unit, _ = C.mem_unit(args)

    def tables(runs):
        by = {(r.meta["model"], r.meta["method"]): r for r in runs}
        header = ["Method"]
        for m in models:
            header += [f"{m} PPL", f"{m} MEM planned ({unit})", f"{m} MEM measured ({unit})", f"{m} Δ"]
        rows = []
        def planned(r):  # --paper: at the paper's micro-batch (an OOM row's plan there); --quick: the run's
            return r.meta["paper_plan"] if "paper_plan" in r.meta else C.planned_total(r)

        for key, label, _ in METHODS:
            row = [label]
            for m in models:
                r, base = by[(m, key)], by[(m, "baseline")]
                oom = r.meta.get("oom")
                ppl = C.ppl_of(r) + (f" (OOM: trained at B={r.meta['B']})" if oom == "half" else
                                     " (OOM even at half batch)" if oom == "no fit" else "")
                mem = C.fmt_mem(planned(r), args)
                row += [ppl, f"OOM ({mem})" if oom else mem, C.fmt_mem(C.measured_peak(r), args),
                        "-" if key == "baseline" else C.fmt_delta(planned(r), planned(base))]
            rows.append(row)
        bs = ["B / S"]
        extra = shlex.split(args.extra) if args.extra else []
        for m in models:
            r = by[(m, "baseline")]
            fl = r.flags
            # --paper: the paper's micro-batch (a run that did not fit trained at half of it); what --extra gave
            # every run instead, when it replaced the flag
            b = r.meta["paper_B"] if "paper_B" in r.meta and "--batch-size" not in extra else \
                C.flag_value(fl, "--batch-size")
            bs += [f"{b}/{C.flag_value(fl, '--seq-len')}", "", "", ""]
        rows.append(bs)
        return C.md_table(header, rows)

    notes = ["RSO: our implementation (train/optim_rso.h); its choices where the RSO paper is silent are listed there."]
    if args.paper:  # (--quick makes no fit check: no row of its can read OOM)
        notes += [f"OOM: the planner's plan at the paper's micro-batch does not fit {args.gpu_mem:g} GiB with its "
                  f"reserve for the CUDA context (--plan --gpu-mem); trained at half the micro-batch, twice the "
                  f"accumulation. \"OOM even at half batch\": that does not fit either. --paper's MEM planned and Δ "
                  f"are at the paper's micro-batch (B / S) for every row, OOM (planned) rows too; MEM measured is the "
                  f"run's own."]
    notes += ["--paper stores PRAC's projections in bf16 and saves the attention output, as the paper (the trainer's "
              "defaults, fp8 projections and a recomputed attention output, save more: memory.py).",
              "Paper (Table 2, eager PyTorch) PRAC Δ: LLaMA-130M -27%, 350M -30%, 1B -36%, GPT-2 124M -20%, "
              "355M -21%."]
    return C.main_flow(args, "table2", "Table 2: pretraining PPL and peak memory", runs, tables, notes)


if __name__ == "__main__":
    sys.exit(main())
