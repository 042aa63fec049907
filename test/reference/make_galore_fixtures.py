#!/usr/bin/env python3
"""Reference trajectory for the GaLore optimizer (train/optim_galore.h), test/test_galore.cpp.

An independent float64 implementation written from the algorithm description (Zhao et al. 2024, "GaLore:
Memory-Efficient LLM Training by Gradient Low-Rank Projection", and the update rule of its AdamW):

  for step t = 0, 1, ... (0-based), for each weight block W (m, n) and its gradient G (times grad_scale):
    if t % T == 0:  U, s, Vh = svd(G);  P = Vh[:r].T (n, r) if m >= n else U[:, :r] (m, r)
                    (the slice clips r to min(m, n)); column signs canonical (largest |entry| positive)
    R = G P  or  P.T G
    m = b1 m + (1-b1) R;  v = b2 v + (1-b2) R^2            (kept across refreshes)
    W -= lr sqrt(1-b2^(t+1)) / (1-b1^(t+1)) * alpha * (m / (sqrt(v) + eps)) P.T   (or P (...))
    W -= lr wd W
  the other tensors: torch.optim.AdamW (float64), decay only where the spec says so.

The problem is small and mirrored in test_galore.cpp (SPECS, BLOCKS below): 6 parameter tensors in one flat
buffer, 5 projected blocks covering both sides (m >= n right, m < n left), a fused spec split by rows into two
blocks of different shapes, 2 stacked layers, and a block whose rank 4 is clipped to min(5, 3) = 3. 7 steps
with update gap 3: projections are computed at steps 0, 3 and 6; varying lr and grad_scale.

Every gradient is drawn so that the problem is well posed for an fp32 implementation: the top r+1 singular
values of each block are separated by at least 2% of the largest (Adam is not rotation-invariant inside the
subspace, so each singular vector must be well determined, not only the subspace), and in every projection
column the largest |entry| beats the runner-up by 1e-3 (so the canonical sign cannot depend on round-off).

Sign check (printed, asserted): re-running the reference with random sign flips of P's columns at each refresh
and no canonicalization gives the same parameters until the first refresh that finds non-zero moments
(steps 0-2 agree exactly: R and m flip with P's columns, v does not, and the back-projection multiplies the
flips back out; sign flips are exact in floating point), and different ones from step 3 on (the kept moments live in the old basis). So canonical signs
are needed exactly because GaLore keeps its moments across refreshes.

Writes test/fixtures/galore/reference.safetensors (about 40 KiB):
  init.<spec>             F32  spec shape   initial parameters
  grad.<s>.<spec>         F32  spec shape   gradient of step s (before grad_scale)
  param.<s>.<spec>        F32  spec shape   parameters after step s (reference, rounded from float64)
  proj.<s>.<block>        F32  (L, k, r)    projection used by step s
  lrs, grad_scales        F32  [STEPS]
metadata "info": JSON with the generator versions and hyper-parameters.

Regenerate (from the repository root; needs torch, numpy, safetensors):
    python test/reference/make_galore_fixtures.py
"""

import json
import math
import os

import numpy as np
import torch
import safetensors
from safetensors.torch import save_file

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(REPO_ROOT, "test", "fixtures", "galore", "reference.safetensors")

# (name, shape, decay). Offsets: contiguous in this order (mirrored in the C++ test).
SPECS = [
    ("emb", (7, 4), True),
    ("tall", (12, 8), True),
    ("norm", (4,), False),
    ("wide", (2, 6, 10), True),
    ("fused", (2, 14, 6), True),
    ("small", (5, 3), True),
]
# (block name, spec, first row inside each layer's (rows_total, cols) slab, rows, requested rank)
BLOCKS = [
    ("tall", "tall", 0, 12, 4),
    ("wide", "wide", 0, 6, 4),
    ("fused.a", "fused", 0, 9, 3),
    ("fused.b", "fused", 9, 5, 3),
    ("small", "small", 0, 5, 4),
]
STEPS = 7
GAP = 3
ALPHA = 0.25
BETAS = (0.9, 0.95)
EPS = 1e-8
WD = 0.1
LRS = [1e-2, 2e-2, 2e-2, 1.5e-2, 1e-2, 1e-2, 5e-3]
GRAD_SCALES = [1.0, 0.5, 1.0, 0.8, 1.0, 1.0, 0.9]
SEED = 20240306


def spec_shape(name):
    return next(s for n, s, _ in SPECS if n == name)


def layers_of(shape):
    return shape[0] if len(shape) == 3 else 1


def block_views(t, spec, row0, rows):
    """The (rows, cols) matrices of a block, one per layer, as views into the spec tensor t."""
    if t.dim() == 2:
        t = t.unsqueeze(0)
    return [t[l, row0 : row0 + rows, :] for l in range(t.shape[0])]


def canonical_signs(P):
    idx = P.abs().argmax(dim=0)
    signs = torch.sign(P[idx, torch.arange(P.shape[1])])
    return P * signs


def projection(G, rank):
    m, n = G.shape
    U, s, Vh = torch.linalg.svd(G, full_matrices=False)
    return Vh[:rank, :].T if m >= n else U[:, :rank]


def well_posed(G, rank):
    s = torch.linalg.svdvals(G.double())
    k = min(rank, min(G.shape))
    top = s[: min(k + 1, len(s))]
    if len(top) > 1 and (top[:-1] - top[1:]).min() < 0.02 * s[0]:
        return False
    P = projection(G.double(), rank)
    mags = P.abs().sort(dim=0, descending=True).values
    return bool((mags[0] - mags[1]).min() > 1e-3)


def draw_gradients(gen):
    grads = []
    for _ in range(STEPS):
        step = {}
        for name, shape, _ in SPECS:
            step[name] = torch.randn(shape, generator=gen, dtype=torch.float32)
        # redraw any block whose spectrum or sign choice is not well determined
        for bname, spec, row0, rows, rank in BLOCKS:
            for G in block_views(step[spec], spec, row0, rows):
                while not well_posed(G, rank):
                    G.copy_(torch.randn(G.shape, generator=gen, dtype=torch.float32))
        grads.append(step)
    return grads


def reference(init, grads, flip_gen=None):
    """Float64 trajectory. flip_gen: instead of canonical signs, random column signs at each refresh."""
    params = {n: init[n].double().clone() for n, _, _ in SPECS}
    in_block = {spec for _, spec, _, _, _ in BLOCKS}
    dense = [n for n, _, _ in SPECS if n not in in_block]
    decay = {n: d for n, _, d in SPECS}
    dense_params = {n: torch.nn.Parameter(params[n]) for n in dense}
    adamw = torch.optim.AdamW(
        [
            {"params": [dense_params[n] for n in dense if decay[n]], "weight_decay": WD},
            {"params": [dense_params[n] for n in dense if not decay[n]], "weight_decay": 0.0},
        ],
        lr=LRS[0],
        betas=BETAS,
        eps=EPS,
    )
    state = {}  # (block, layer) -> [P, m, v]
    out_params, out_proj = [], []
    for t in range(STEPS):
        lr, gs = LRS[t], GRAD_SCALES[t]
        for n in dense:
            dense_params[n].grad = grads[t][n].double() * gs
        for g in adamw.param_groups:
            g["lr"] = lr
        adamw.step()
        step = t + 1
        step_size = lr * math.sqrt(1 - BETAS[1] ** step) / (1 - BETAS[0] ** step)
        projs = {}
        for bname, spec, row0, rows, rank in BLOCKS:
            Ws = block_views(params[spec], spec, row0, rows)
            Gs = block_views(grads[t][spec], spec, row0, rows)
            layer_P = []
            for l, (W, G) in enumerate(zip(Ws, Gs)):
                G = G.double() * gs
                m_, n_ = G.shape
                st = state.setdefault((bname, l), [None, None, None])
                if t % GAP == 0:
                    P = projection(G, rank)
                    if flip_gen is None:
                        P = canonical_signs(P)
                    else:
                        flips = torch.randint(0, 2, (P.shape[1],), generator=flip_gen).double() * 2 - 1
                        P = P * flips
                    st[0] = P
                P = st[0]
                R = G @ P if m_ >= n_ else P.T @ G
                if st[1] is None:
                    st[1], st[2] = torch.zeros_like(R), torch.zeros_like(R)
                st[1] = BETAS[0] * st[1] + (1 - BETAS[0]) * R
                st[2] = BETAS[1] * st[2] + (1 - BETAS[1]) * R * R
                N = st[1] / (st[2].sqrt() + EPS)
                back = N @ P.T if m_ >= n_ else P @ N
                W -= step_size * ALPHA * back
                W -= lr * WD * W
                layer_P.append(P.clone())
            projs[bname] = torch.stack(layer_P)
        for n in dense:
            params[n] = dense_params[n].detach()
        out_params.append({n: params[n].clone() for n, _, _ in SPECS})
        out_proj.append(projs)
    return out_params, out_proj


def main():
    gen = torch.Generator().manual_seed(SEED)
    init = {n: 0.1 * torch.randn(shape, generator=gen, dtype=torch.float32) for n, shape, _ in SPECS}
    grads = draw_gradients(gen)
    params, projs = reference(init, grads)

    # sign check: random column signs at every refresh, no canonicalization
    flipped, _ = reference(init, grads, flip_gen=torch.Generator().manual_seed(7))
    diffs = [max((params[t][n] - flipped[t][n]).abs().max().item() for n, _, _ in SPECS) for t in range(STEPS)]
    print("sign check, max |difference| per step with random P signs:", " ".join(f"{d:.1e}" for d in diffs))
    assert max(diffs[:GAP]) == 0.0, "GaLore should be sign-invariant before the first kept-moment refresh"
    assert min(diffs[GAP:]) > 1e-6, "kept moments should make the run sign-dependent after a refresh"

    tensors = {}
    for n, _, _ in SPECS:
        tensors[f"init.{n}"] = init[n]
    for t in range(STEPS):
        for n, _, _ in SPECS:
            tensors[f"grad.{t}.{n}"] = grads[t][n]
            tensors[f"param.{t}.{n}"] = params[t][n].float()
        for b, P in projs[t].items():
            tensors[f"proj.{t}.{b}"] = P.float()
    tensors["lrs"] = torch.tensor(LRS, dtype=torch.float32)
    tensors["grad_scales"] = torch.tensor(GRAD_SCALES, dtype=torch.float32)
    info = {
        "generator": "test/reference/make_galore_fixtures.py",
        "torch": torch.__version__,
        "numpy": np.__version__,
        "safetensors": safetensors.__version__,
        "specs": [[n, list(s), d] for n, s, d in SPECS],
        "blocks": [list(b) for b in BLOCKS],
        "steps": STEPS,
        "update_gap": GAP,
        "alpha": ALPHA,
        "betas": list(BETAS),
        "eps": EPS,
        "weight_decay": WD,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, OUT, metadata={"info": json.dumps(info)})
    moved = max((params[-1][n] - init[n].double()).abs().max().item() for n, _, _ in SPECS)
    print(f"wrote {OUT}: {len(tensors)} tensors, {os.path.getsize(OUT)} bytes; max |param change| {moved:.3e}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
