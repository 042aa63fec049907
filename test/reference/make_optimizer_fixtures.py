#!/usr/bin/env python3
"""Reference trajectories of Muon and Adam-mini for test/test_optimizers.cpp, computed with torch (CPU, fp32).

Written from the published algorithms, not from the C++ (train/optim_muon.h, train/optim_adam_mini.h):
  - Muon: Keller Jordan's Newton-Schulz quintic (a, b, c) = (3.4445, -4.7750, 2.0315), 5 steps, on X / (||X||_F +
    1e-7), transposed when rows > cols; Moonlight's (arXiv 2502.16982) Nesterov momentum buf = mu buf + g,
    u = g + mu buf, decoupled weight decay and update scale 0.2 * sqrt(max(A, B)); torch.optim.AdamW for the
    embeddings, head, norms and biases. The hidden weights are held the way a PyTorch model holds them: one
    tensor per nn.Linear (q, k, v and gate, up separate: "split"), or one per fused nn.Linear ("fused": c_attn
    (3C, C), gate_up (2F, C)).
  - Adam-mini (arXiv 2406.16793): m per element; v one value per block = mean of g^2 over the block, blocks: q and
    k by head, v / o / MLP / embeddings / head by output row (one token per row for embeddings), norms and biases one
    block per tensor; Adam's bias corrections; decoupled weight decay on the 2-D weights. Held per layer and per
    nn.Linear like a PyTorch model.
The C++ test lays the same values into its parameter buffer by name (our stacked (L, rows, cols) tensors), runs
3 steps with the lr and grad_scale (gradient clipping factor) of each step below, and compares.

Model shapes are two tiny configs of our GPT-2 and LLaMA layouts (see CONFIGS). File
test/fixtures/optim/optimizers.safetensors, all F32 except "<arch>.config" (I32: V, Vp, L, NH, C, F, maxT):
  <arch>.param.<name>                      initial parameters (our stacked shapes)
  <arch>.grad<k>.<name>                    gradient of step k (k = 0, 1, 2), before grad_scale
  <arch>.<opt>.after<s>.<name>             parameters after s = 1 and s = 3 steps; opt = muon_split, muon_fused,
                                           adam_mini
  <arch>.muon_split.momentum.<name>        Muon momentum after 3 steps (hidden weights, stacked shape)
  <arch>.muon_split.adamw_m.<name>, .adamw_v.<name>   AdamW moments after 3 steps (all other tensors)
  <arch>.adam_mini.m.<name>                Adam-mini m after 3 steps (stacked shape)
  <arch>.adam_mini.v.<name>                Adam-mini v after 3 steps, one value per block, in the block order the
                                           C++ documents (qkvw layer l: q heads, k heads, v rows; then layer l+1)
  lr, grad_scale                           (3) per step
  hyper                                    (5) beta1 0.9, beta2 0.95, eps 1e-8, weight decay 0.1, momentum 0.95
  ns.in.<r>x<c>, ns.out.<r>x<c>            Newton-Schulz input and output (square, tall, wide)
Metadata: {"format": "pt"} only (one key: the header's bytes do not depend on map order, so the file is
byte-for-byte reproducible).

Regenerate (from the repository root):
    python test/reference/make_optimizer_fixtures.py
Generated with torch 2.15.0+cu132 (CPU), safetensors 0.8.0, numpy 2.4.6, Python 3.11.7. The file is about 0.4 MB.
"""

import math
import os

import torch
from safetensors.torch import save_file

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(REPO_ROOT, "test", "fixtures", "optim", "optimizers.safetensors")

BETA1, BETA2, EPS, WD, MU = 0.9, 0.95, 1e-8, 0.1, 0.95
LRS = [0.02, 0.015, 0.01]
SCALES = [1.0, 0.5, 0.8]
NS_A, NS_B, NS_C = 3.4445, -4.7750, 2.0315

# name: V, Vp, L, NH, C, F, maxT
CONFIGS = {
    "gpt2": dict(V=50, Vp=64, L=2, NH=2, C=16, F=64, T=12),
    "llama": dict(V=50, Vp=64, L=2, NH=4, C=16, F=24, T=0),
}


def specs(arch, c):
    """Our parameter tensors in buffer order: name -> (shape, decay)."""
    V, L, C, F = c["Vp"], c["L"], c["C"], c["F"]
    if arch == "gpt2":
        return {
            "wte": ((V, C), True), "wpe": ((c["T"], C), True),
            "ln1w": ((L, C), False), "ln1b": ((L, C), False),
            "qkvw": ((L, 3 * C, C), True), "qkvb": ((L, 3 * C), False),
            "attprojw": ((L, C, C), True), "attprojb": ((L, C), False),
            "ln2w": ((L, C), False), "ln2b": ((L, C), False),
            "fcw": ((L, F, C), True), "fcb": ((L, F), False),
            "fcprojw": ((L, C, F), True), "fcprojb": ((L, C), False),
            "lnfw": ((C,), False), "lnfb": ((C,), False),
        }
    return {
        "wte": ((V, C), True), "ln1w": ((L, C), False), "qkvw": ((L, 3 * C, C), True),
        "attprojw": ((L, C, C), True), "ln2w": ((L, C), False), "fcw": ((L, 2 * F, C), True),
        "fcprojw": ((L, C, F), True), "lnfw": ((C,), False), "lm_head": ((V, C), True),
    }


def make_inputs(arch, c, gen):
    params, grads = {}, [{} for _ in LRS]
    for i, (name, (shape, _)) in enumerate(specs(arch, c).items()):
        if name.startswith("ln") and name.endswith("w"):
            p = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        else:
            p = 0.02 * torch.randn(shape, generator=gen)
        params[name] = p
        for k in range(len(LRS)):
            g = torch.randn(shape, generator=gen) * (0.01 * (1 + i % 4))
            if len(shape) >= 2:  # rows of different size, so per-row and per-head blocks differ
                g = g * torch.exp(0.5 * torch.randn(shape[:-1] + (1,), generator=gen))
            grads[k][name] = g
    return params, grads


def per_layer_modules(arch, c, split):
    """A PyTorch-style model's tensors as (module name, our tensor, layer, row range), for the layer tensors."""
    L, C, F = c["L"], c["C"], c["F"]
    mods = []
    for l in range(L):
        if split:
            mods += [(f"h{l}.q", "qkvw", l, 0, C), (f"h{l}.k", "qkvw", l, C, 2 * C), (f"h{l}.v", "qkvw", l, 2 * C, 3 * C)]
        else:
            mods.append((f"h{l}.c_attn", "qkvw", l, 0, 3 * C))
        mods.append((f"h{l}.o", "attprojw", l, 0, C))
        if arch == "llama" and split:
            mods += [(f"h{l}.gate", "fcw", l, 0, F), (f"h{l}.up", "fcw", l, F, 2 * F)]
        else:
            mods.append((f"h{l}.fc", "fcw", l, 0, F if arch == "gpt2" else 2 * F))
        mods.append((f"h{l}.down", "fcprojw", l, 0, C))
    return mods


def newton_schulz5(G, steps=5):
    X = G.float()
    tall = G.size(0) > G.size(1)
    if tall:
        X = X.T
    X = X / (X.norm() + 1e-7)
    for _ in range(steps):
        A = X @ X.T
        B = NS_B * A + NS_C * (A @ A)
        X = NS_A * X + B @ X
    return X.T if tall else X


def run_muon(arch, c, params0, grads, split):
    """Muon on the hidden nn.Linear weights, torch.optim.AdamW on the rest. Returns params after each step and
    the final state."""
    mods = per_layer_modules(arch, c, split)
    hidden = {m[1] for m in mods}
    shapes = specs(arch, c)
    # the model: one leaf tensor per nn.Linear for the hidden weights, our tensors for the rest
    W = {m[0]: params0[m[1]][m[2], m[3]:m[4]].clone() for m in mods}
    rest = {n: torch.nn.Parameter(p.clone()) for n, p in params0.items() if n not in hidden}
    decay = [p for n, p in rest.items() if shapes[n][1]]
    no_decay = [p for n, p in rest.items() if not shapes[n][1]]
    adamw = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}],
                              lr=LRS[0], betas=(BETA1, BETA2), eps=EPS, foreach=False)
    buf = {k: torch.zeros_like(w) for k, w in W.items()}
    history = []
    for k, (lr, s) in enumerate(zip(LRS, SCALES)):
        for n, p in rest.items():
            p.grad = grads[k][n] * s
        for gr in adamw.param_groups:
            gr["lr"] = lr
        adamw.step()
        for name, ours, l, r0, r1 in mods:
            g = grads[k][ours][l, r0:r1] * s
            buf[name].mul_(MU).add_(g)
            u = g + MU * buf[name]
            O = newton_schulz5(u)
            A, B = W[name].shape
            W[name].mul_(1 - lr * WD)
            W[name].add_(O, alpha=-lr * 0.2 * math.sqrt(max(A, B)))
        history.append(assemble(params0, W, rest, mods))
    momentum = assemble({n: torch.zeros_like(params0[n]) for n in hidden}, buf, {}, mods)
    adam_m = {n: adamw.state[p]["exp_avg"].clone() for n, p in rest.items()}
    adam_v = {n: adamw.state[p]["exp_avg_sq"].clone() for n, p in rest.items()}
    return history, momentum, adam_m, adam_v


def assemble(base, W, rest, mods):
    out = {n: p.detach().clone() for n, p in base.items()}
    for n, p in rest.items():
        out[n] = p.detach().clone()
    for name, ours, l, r0, r1 in mods:
        out[ours][l, r0:r1] = W[name]
    return out


def adam_mini_tensors(arch, c):
    """The model's tensors as Adam-mini sees them: (key, our name, layer or None, row range or None, rule) with
    rule 'head' (blocks of HS rows), 'row' (one block per row), 'tensor' (one block)."""
    L, C, F, NH = c["L"], c["C"], c["F"], c["NH"]
    out = []
    for n, (shape, _) in specs(arch, c).items():
        if n in ("wte", "wpe", "lm_head"):
            out.append((n, n, None, None, "row"))
        elif n == "qkvw":
            for l in range(L):
                out += [(f"h{l}.q", n, l, (0, C), "head"), (f"h{l}.k", n, l, (C, 2 * C), "head"),
                        (f"h{l}.v", n, l, (2 * C, 3 * C), "row")]
        elif n in ("attprojw", "fcw", "fcprojw"):
            out += [(f"h{l}.{n}", n, l, None, "row") for l in range(L)]
        elif len(shape) == 2:  # per-layer norms and biases
            out += [(f"h{l}.{n}", n, l, None, "tensor") for l in range(L)]
        else:
            out.append((n, n, None, None, "tensor"))
    return out


def run_adam_mini(arch, c, params0, grads):
    shapes = specs(arch, c)
    HS = c["C"] // c["NH"]
    tens = adam_mini_tensors(arch, c)

    def view(d, n, l, rows):
        x = d[n] if l is None else d[n][l]
        return x if rows is None else x[rows[0]:rows[1]]

    P = {key: view(params0, n, l, rows).clone() for key, n, l, rows, _ in tens}
    m = {key: torch.zeros_like(p) for key, p in P.items()}
    v = {}
    for key, n, l, rows, rule in tens:
        x = P[key]
        nb = x.shape[0] // HS if rule == "head" else x.shape[0] if rule == "row" else 1
        v[key] = torch.zeros(nb)
    history = []
    for k, (lr, s) in enumerate(zip(LRS, SCALES)):
        t = k + 1
        bc1, bc2 = 1 - BETA1**t, 1 - BETA2**t
        for key, n, l, rows, rule in tens:
            g = view(grads[k], n, l, rows) * s
            nb = v[key].numel()
            blocks = g.reshape(nb, -1)
            v[key].mul_(BETA2).add_((1 - BETA2) * blocks.pow(2).mean(dim=1))
            m[key].mul_(BETA1).add_((1 - BETA1) * g)
            wd = WD if shapes[n][1] else 0.0
            P[key].mul_(1 - lr * wd)
            den = (v[key].sqrt() / math.sqrt(bc2) + EPS).repeat_interleave(g.numel() // nb).reshape(g.shape)
            P[key].add_(-(lr / bc1) * m[key] / den)
        history.append(gather(params0, P, tens))
    m_out = gather({n: torch.zeros_like(p) for n, p in params0.items()}, m, tens)
    v_out = {}
    for key, n, l, rows, rule in tens:  # our order: spec by spec, layer by layer, q, k, v within qkvw
        v_out.setdefault(n, []).append(v[key])
    v_out = {n: torch.cat(parts) for n, parts in v_out.items()}
    return history, m_out, v_out


def gather(base, P, tens):
    out = {n: p.clone() for n, p in base.items()}
    for key, n, l, rows, _ in tens:
        x = out[n] if l is None else out[n][l]
        if rows is None:
            x.copy_(P[key])
        else:
            x[rows[0]:rows[1]] = P[key]
    return out


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1234)
    torch.set_num_threads(1)
    T = {"lr": torch.tensor(LRS, dtype=torch.float32), "grad_scale": torch.tensor(SCALES, dtype=torch.float32),
         "hyper": torch.tensor([BETA1, BETA2, EPS, WD, MU], dtype=torch.float32)}
    for arch, c in CONFIGS.items():
        T[f"{arch}.config"] = torch.tensor([c["V"], c["Vp"], c["L"], c["NH"], c["C"], c["F"], c["T"]],
                                           dtype=torch.int32)
        params, grads = make_inputs(arch, c, gen)
        for n, p in params.items():
            T[f"{arch}.param.{n}"] = p
            for k in range(len(LRS)):
                T[f"{arch}.grad{k}.{n}"] = grads[k][n]
        for split in (True, False):
            tag = "muon_split" if split else "muon_fused"
            hist, mom, am, av = run_muon(arch, c, params, grads, split)
            for s in (1, 3):
                for n, p in hist[s - 1].items():
                    T[f"{arch}.{tag}.after{s}.{n}"] = p
            if split:
                for n, p in mom.items():
                    T[f"{arch}.{tag}.momentum.{n}"] = p
                for n in am:
                    T[f"{arch}.{tag}.adamw_m.{n}"] = am[n]
                    T[f"{arch}.{tag}.adamw_v.{n}"] = av[n]
        hist, m, v = run_adam_mini(arch, c, params, grads)
        for s in (1, 3):
            for n, p in hist[s - 1].items():
                T[f"{arch}.adam_mini.after{s}.{n}"] = p
        for n in m:
            T[f"{arch}.adam_mini.m.{n}"] = m[n]
            T[f"{arch}.adam_mini.v.{n}"] = v[n]
    for r, cc in ((32, 32), (40, 24), (24, 40)):
        G = torch.randn((r, cc), generator=gen)
        T[f"ns.in.{r}x{cc}"] = G
        T[f"ns.out.{r}x{cc}"] = newton_schulz5(G)
    T = {k: v.contiguous() for k, v in T.items()}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(T, OUT, metadata={"format": "pt"})
    print(f"wrote {OUT}: {len(T)} tensors, {os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()
