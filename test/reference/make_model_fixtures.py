#!/usr/bin/env python3
"""Build tiny GPT-2 and LLaMA reference fixtures with Hugging Face transformers.

The real GPT2LMHeadModel / LlamaForCausalLM are the independent reference for
our C++ trainer: weight layouts, forward math, gradients and a 10-step AdamW
trajectory are all produced here and written to small safetensors files under
test/fixtures/{gpt2_tiny,llama_tiny}/.  The C++ tests read those files and
never need Python.  See test/reference/README.md for the exact conventions.

Regenerate (from the repository root):
    python test/reference/make_model_fixtures.py
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(REPO_ROOT, "test", "fixtures")

VOCAB = 96
B, T = 2, 16
IGNORE_POSITIONS = [(0, 3), (0, 10), (1, 15)]  # target positions set to "ignore"

# Training-trajectory hyper-parameters (see README.md).
TRAIN_STEPS = 10
WARMUP_STEPS = 2
PEAK_LR = 1e-2
MIN_LR_FRAC = 0.1
BETAS = (0.9, 0.95)
ADAM_EPS = 1e-8
WEIGHT_DECAY = 0.1
CLIP_NORM = 1.0
GRAD_ACCUM = 2  # micro-batches = row 0, then row 1 (each B=1)


def set_determinism():
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    torch.backends.mkldnn.enabled = False


def lr_at(step):
    """Warmup + cosine decay; step is 0-based."""
    if step < WARMUP_STEPS:
        return PEAK_LR * (step + 1) / WARMUP_STEPS
    min_lr = MIN_LR_FRAC * PEAK_LR
    decay_ratio = (step - WARMUP_STEPS) / (TRAIN_STEPS - WARMUP_STEPS)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (PEAK_LR - min_lr)


# --------------------------------------------------------------------------- models


def build_gpt2():
    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=32,
        n_embd=32,
        n_layer=2,
        n_head=4,
        activation_function="gelu_new",
        layer_norm_epsilon=1e-5,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        tie_word_embeddings=True,
        bos_token_id=VOCAB - 1,
        eos_token_id=VOCAB - 1,
        attn_implementation="eager",
    )
    torch.manual_seed(1234)
    model = GPT2LMHeadModel(config)
    assert model.lm_head.weight is model.transformer.wte.weight, "GPT-2 embeddings must be tied"
    return model


def build_llama():
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=88,  # deliberately not a multiple of 64
        num_attention_heads=4,
        num_key_value_heads=4,
        num_hidden_layers=2,
        max_position_embeddings=32,
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
        hidden_act="silu",
        tie_word_embeddings=False,
        attention_bias=False,
        mlp_bias=False,
        attention_dropout=0.0,
        attn_implementation="eager",
    )
    # transformers >= 5 moves rope_theta into rope_parameters; make sure the
    # plain ("default") rotate-half RoPE is used with theta 10000.
    rp = getattr(config, "rope_parameters", None)
    if rp is not None:
        assert rp.get("rope_type", "default") == "default", rp
        assert float(rp["rope_theta"]) == 10000.0, rp
    else:
        assert getattr(config, "rope_scaling", None) is None
        assert float(config.rope_theta) == 10000.0
    torch.manual_seed(5678)
    model = LlamaForCausalLM(config)
    assert model.lm_head.weight is not model.model.embed_tokens.weight
    return model


def perturb(model, seed):
    """Perturb every parameter so that every term of the math is exercised.

    Norm weights (HF init 1) and biases (HF init 0) get +0.05*randn; matmul /
    embedding weights (HF init normal(0, 0.02)) get +0.02*randn.
    """
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            scale = 0.02 if p.dim() >= 2 else 0.05
            p.add_(scale * torch.randn(p.shape, generator=g, dtype=p.dtype))


def make_batch(seed):
    g = torch.Generator().manual_seed(seed)
    seq = torch.randint(0, VOCAB, (B, T + 1), generator=g, dtype=torch.int64)
    inputs = seq[:, :T].clone()
    targets = seq[:, 1:].clone()
    for b, t in IGNORE_POSITIONS:
        targets[b, t] = -1
    return inputs, targets


def ce_loss(logits, targets):
    """Mean token cross-entropy over non-ignored targets (targets: -1 = ignore)."""
    tgt = targets.clone()
    tgt[tgt < 0] = -100
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), tgt.reshape(-1), ignore_index=-100, reduction="mean"
    )


# --------------------------------------------------------------------------- reference


def forward_backward(model, inputs, targets):
    model.zero_grad(set_to_none=True)
    logits = model(input_ids=inputs).logits
    loss = ce_loss(logits, targets)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return logits.detach().clone(), loss.detach().clone(), grads


def train_trajectory(model, inputs, targets):
    decay, no_decay = [], []
    for _, p in model.named_parameters():  # tied params appear once
        (decay if p.dim() >= 2 else no_decay).append(p)
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": WEIGHT_DECAY},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=PEAK_LR,
        betas=BETAS,
        eps=ADAM_EPS,
        foreach=False,
        fused=False,
    )
    losses, norms, lrs = [], [], []
    for step in range(TRAIN_STEPS):
        lr = lr_at(step)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad(set_to_none=True)
        micro_losses = []
        for m in range(GRAD_ACCUM):
            x = inputs[m : m + 1]
            y = targets[m : m + 1]
            logits = model(input_ids=x).logits
            loss = ce_loss(logits, y)
            micro_losses.append(loss.item())
            (loss / GRAD_ACCUM).backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
        opt.step()
        losses.append(sum(micro_losses) / GRAD_ACCUM)
        norms.append(float(norm))
        lrs.append(lr)
    final = {n: p.detach().clone() for n, p in model.named_parameters()}
    return losses, norms, lrs, final


# --------------------------------------------------------------------------- numpy cross-checks
# Small independent re-implementations of the forward pass, written from the
# conventions documented in README.md (not from HF code), used to check that
# the documented math matches what HF computes.


def np_gpt2_logits(w, cfg, inputs):
    C, H = cfg["n_embd"], cfg["n_head"]
    hd = C // H
    eps = cfg["layer_norm_epsilon"]

    def ln(x, g, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * g + b

    def gelu_new(x):
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))

    Bn, Tn = inputs.shape
    x = w["transformer.wte.weight"][inputs] + w["transformer.wpe.weight"][np.arange(Tn)][None]
    mask = np.triu(np.ones((Tn, Tn), dtype=bool), 1)
    for l in range(cfg["n_layer"]):
        p = f"transformer.h.{l}."
        h = ln(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"])
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]  # Conv1D: (in, out)
        q, k, v = np.split(qkv, 3, axis=-1)
        q = q.reshape(Bn, Tn, H, hd).transpose(0, 2, 1, 3)
        k = k.reshape(Bn, Tn, H, hd).transpose(0, 2, 1, 3)
        v = v.reshape(Bn, Tn, H, hd).transpose(0, 2, 1, 3)
        att = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd)
        att = np.where(mask, -np.inf, att)
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(Bn, Tn, C)
        x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = ln(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"])
        h = gelu_new(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = ln(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"])
    return x @ w["transformer.wte.weight"].T  # tied lm_head


def np_llama_logits(w, cfg, inputs):
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KVH = cfg["num_key_value_heads"]
    hd = C // H
    eps = cfg["rms_norm_eps"]
    theta = cfg.get("rope_parameters", {}).get("rope_theta", cfg.get("rope_theta"))

    def rms(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g

    def silu(x):
        return x / (1.0 + np.exp(-x))

    Bn, Tn = inputs.shape
    inv_freq = 1.0 / (theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    freqs = np.arange(Tn)[:, None] * inv_freq[None, :]  # (T, hd/2)
    emb = np.concatenate([freqs, freqs], -1)  # (T, hd)
    cos, sin = np.cos(emb), np.sin(emb)

    def rope(x):  # x: (B, H, T, hd); rotate-half convention
        x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
        rot = np.concatenate([-x2, x1], -1)
        return x * cos + rot * sin

    x = w["model.embed_tokens.weight"][inputs]
    mask = np.triu(np.ones((Tn, Tn), dtype=bool), 1)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, w[p + "input_layernorm.weight"])
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(Bn, Tn, H, hd).transpose(0, 2, 1, 3)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(Bn, Tn, KVH, hd).transpose(0, 2, 1, 3)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(Bn, Tn, KVH, hd).transpose(0, 2, 1, 3)
        q, k = rope(q), rope(k)
        rep = H // KVH
        k = np.repeat(k, rep, axis=1)
        v = np.repeat(v, rep, axis=1)
        att = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd)
        att = np.where(mask, -np.inf, att)
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(Bn, Tn, C)
        x = x + y @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        g_ = h @ w[p + "mlp.gate_proj.weight"].T
        u = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (silu(g_) * u) @ w[p + "mlp.down_proj.weight"].T
    x = rms(x, w["model.norm.weight"])
    return x @ w["lm_head.weight"].T


def np_ce(logits, targets):
    lg = logits.reshape(-1, logits.shape[-1])
    tg = targets.reshape(-1)
    keep = tg >= 0
    lg, tg = lg[keep], tg[keep]
    m = lg.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(lg - m).sum(-1, keepdims=True)))[:, 0]
    return float((lse - lg[np.arange(len(tg)), tg]).mean())


# --------------------------------------------------------------------------- driver


def make_fixture(name, build, perturb_seed, batch_seed, np_forward, model_cls):
    out_dir = os.path.join(FIXTURES, name)
    os.makedirs(out_dir, exist_ok=True)
    for f in ("config.json", "model.safetensors", "reference.safetensors", "generation_config.json"):
        path = os.path.join(out_dir, f)
        if os.path.exists(path):
            os.remove(path)

    model = build()
    perturb(model, perturb_seed)
    model.eval()  # all dropout probabilities are 0 anyway
    model.save_pretrained(out_dir, safe_serialization=True)
    # save_pretrained may write a generation_config.json; the C++ side does not need it.
    gen_cfg = os.path.join(out_dir, "generation_config.json")
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)

    param_names = [n for n, _ in model.named_parameters()]
    init_params = {n: p.detach().clone() for n, p in model.named_parameters()}
    inputs, targets = make_batch(batch_seed)

    logits, loss, grads = forward_backward(model, inputs, targets)

    model.train()
    losses, norms, lrs, final = train_trajectory(model, inputs, targets)

    tensors = {
        "inputs": inputs.to(torch.int32).contiguous(),
        "targets": targets.to(torch.int32).contiguous(),
        "logits": logits.float().contiguous(),
        "loss": loss.float().reshape(()).contiguous(),
        "train.losses": torch.tensor(losses, dtype=torch.float32),
        "train.grad_norms": torch.tensor(norms, dtype=torch.float32),
        "train.lrs": torch.tensor(lrs, dtype=torch.float32),
    }
    for n in param_names:
        tensors["grad." + n] = grads[n].float().contiguous()
        tensors["final." + n] = final[n].float().contiguous()
    # A single metadata key: safetensors writes metadata entries in hash order,
    # so several keys would make the file bytes differ from run to run.
    metadata = {
        "info": json.dumps(
            {
                "generator": "test/reference/make_model_fixtures.py",
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "numpy": np.__version__,
                "model": name,
                "ignore_index": -1,
                "train": {
                    "steps": TRAIN_STEPS,
                    "warmup_steps": WARMUP_STEPS,
                    "peak_lr": PEAK_LR,
                    "min_lr_frac": MIN_LR_FRAC,
                    "betas": list(BETAS),
                    "eps": ADAM_EPS,
                    "weight_decay": WEIGHT_DECAY,
                    "weight_decay_applies_to": "dim>=2",
                    "clip_norm": CLIP_NORM,
                    "grad_accum": GRAD_ACCUM,
                    "micro_batches": "row 0 then row 1 (B=1 each), same batch every step",
                },
            },
            sort_keys=True,
        )
    }
    ref_path = os.path.join(out_dir, "reference.safetensors")
    save_file(tensors, ref_path, metadata=metadata)
    for f in os.listdir(out_dir):
        os.chmod(os.path.join(out_dir, f), 0o644)

    # ------------------------------------------------------------------ verify
    ok = True

    def check(cond, msg):
        nonlocal ok
        if not cond:
            ok = False
            print(f"  FAIL: {msg}")

    with safe_open(os.path.join(out_dir, "model.safetensors"), "pt") as f:
        saved = {k: f.get_tensor(k) for k in f.keys()}
    with safe_open(ref_path, "pt") as f:
        ref = {k: f.get_tensor(k) for k in f.keys()}
    cfg = json.load(open(os.path.join(out_dir, "config.json")))

    check(set(saved) == set(param_names), f"saved keys {sorted(set(saved) ^ set(param_names))}")
    for n in param_names:
        check(torch.equal(saved[n], init_params[n]), f"saved {n} differs from model")
        check(ref["grad." + n].shape == init_params[n].shape, f"grad shape {n}")
        check(ref["final." + n].shape == init_params[n].shape, f"final shape {n}")
        check(bool(torch.isfinite(ref["grad." + n]).all()), f"grad {n} not finite")
        check(float(ref["grad." + n].abs().max()) > 0, f"grad {n} is all zero")
    check(ref["inputs"].dtype == torch.int32 and tuple(ref["inputs"].shape) == (B, T), "inputs")
    check(ref["targets"].dtype == torch.int32 and int((ref["targets"] < 0).sum()) == len(IGNORE_POSITIONS), "targets")

    # Reload through HF and recompute the forward pass.
    reloaded = model_cls.from_pretrained(out_dir, attn_implementation="eager", dtype=torch.float32)
    reloaded.eval()
    with torch.no_grad():
        lg2 = reloaded(input_ids=ref["inputs"].long()).logits
    check(torch.equal(lg2, ref["logits"]), f"reloaded logits differ (max {float((lg2 - ref['logits']).abs().max())})")
    check(torch.equal(ce_loss(lg2, ref["targets"].long()), ref["loss"]), "reloaded loss differs")

    # Independent numpy (float64) forward from the documented conventions.
    w = {k: v.double().numpy() for k, v in saved.items()}
    np_logits = np_forward(w, cfg, ref["inputs"].numpy().astype(np.int64))
    np_diff = float(np.abs(np_logits - ref["logits"].double().numpy()).max())
    np_loss = np_ce(np_logits, ref["targets"].numpy())
    check(np_diff < 1e-4, f"numpy logits differ by {np_diff}")
    check(abs(np_loss - float(ref["loss"])) < 1e-5, f"numpy loss {np_loss} vs {float(ref['loss'])}")

    check(losses[-1] < losses[0] - 0.5, f"training did not move the loss enough: {losses}")

    size = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir))
    max_grad = max(float(g.abs().max()) for g in grads.values())
    print(f"[{name}] params={sum(p.numel() for p in init_params.values())} dir={size / 1024:.1f} KiB")
    print(f"  loss={float(loss):.6f}  numpy-loss={np_loss:.6f}  numpy max|dlogit|={np_diff:.2e}  max|grad|={max_grad:.6f}")
    print("  train.losses     =", " ".join(f"{v:.5f}" for v in losses))
    print("  train.grad_norms =", " ".join(f"{v:.5f}" for v in norms))
    print("  train.lrs        =", " ".join(f"{v:.6g}" for v in lrs))
    print("  params:")
    for n in param_names:
        print(f"    {n:45s} {tuple(init_params[n].shape)}")
    print("  verify:", "OK" if ok else "FAILED")
    return ok


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    set_determinism()
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    print(f"torch {torch.__version__}  transformers {transformers.__version__}  numpy {np.__version__}")
    ok = True
    ok &= make_fixture("gpt2_tiny", build_gpt2, 11, 21, np_gpt2_logits, GPT2LMHeadModel)
    ok &= make_fixture("llama_tiny", build_llama, 12, 22, np_llama_logits, LlamaForCausalLM)
    if not ok:
        print("verification FAILED")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
