#!/usr/bin/env python3
"""Tiny RoBERTa sequence-classification fixtures (issue 17) from Hugging Face transformers.

The real RobertaForSequenceClassification is the independent reference for the encoder model: weight names and
layouts, the forward with a key-padding mask and RoBERTa's padding-offset positions, the classification head
(dense + tanh + out_proj on the <s> token), the loss (cross-entropy, or MSE for one label as STS-B), every
parameter gradient and a short AdamW trajectory, on a batch whose rows have different lengths (padding inside
the batch). Written under test/fixtures/roberta_tiny_{cls,reg}/: config.json and model.safetensors exactly as
save_pretrained writes them, and reference.safetensors (keys in test/reference/README.md).

    python3 test/reference/make_roberta_fixtures.py      # needs numpy, torch, transformers, safetensors
"""
import json
import os

import numpy as np
import torch
import transformers
from safetensors.torch import save_file
from transformers import RobertaConfig, RobertaForSequenceClassification

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VOCAB, PAD, BOS, EOS = 96, 1, 0, 2  # RoBERTa's ids of <pad>, <s>, </s> (vocab.json of roberta-base)
LENGTHS = [16, 11, 7]  # tokens per row, <s> and </s> included; the rest of each row is <pad>
T = 16
STEPS, LR, BETAS, EPS, WEIGHT_DECAY = 3, 1e-3, (0.9, 0.999), 1e-8, 0.01  # torch.optim.AdamW, constant lr


def batch(gen):
    ids = torch.full((len(LENGTHS), T), PAD, dtype=torch.long)
    for b, n in enumerate(LENGTHS):
        ids[b, 0] = BOS
        ids[b, 1:n - 1] = torch.randint(3, VOCAB, (n - 2,), generator=gen)
        ids[b, n - 1] = EOS
    mask = (ids != PAD).long()
    return ids, mask


def build(name, num_labels):
    torch.manual_seed(17)
    gen = torch.Generator().manual_seed(1717)
    cfg = RobertaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=T + PAD + 1, type_vocab_size=1,
                        hidden_act="gelu", layer_norm_eps=1e-5, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, classifier_dropout=0.0, num_labels=num_labels,
                        pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS, initializer_range=0.2)
    cfg._attn_implementation = "eager"
    model = RobertaForSequenceClassification(cfg).eval()  # eval: no dropout (all 0 anyway)
    out_dir = os.path.join(ROOT, "test", "fixtures", name)
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    gc = os.path.join(out_dir, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)

    ids, mask = batch(gen)
    if num_labels == 1:
        labels = torch.tensor([4.2, 0.6, 2.5])
    else:
        labels = torch.randint(0, num_labels, (len(LENGTHS),), generator=gen)
    ref = {"input_ids": ids.int(), "attention_mask": mask.int(),
           "labels": labels.float() if num_labels == 1 else labels.int()}
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    out.loss.backward()
    ref["logits"] = out.logits.detach().float()
    ref["loss"] = out.loss.detach().float().reshape(())
    for n, p in model.named_parameters():
        ref["grad." + n] = p.grad.detach().float().clone()
    # padding changes nothing for the real tokens: row 2 alone, unpadded, gives the same logits
    n2 = LENGTHS[2]
    alone = model(input_ids=ids[2:, :n2], attention_mask=mask[2:, :n2]).logits.detach()
    assert torch.allclose(alone, out.logits[2:].detach(), atol=1e-5), "padding leaked into the real tokens"

    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        losses.append(loss.item())
    ref["train.losses"] = torch.tensor(losses, dtype=torch.float32)
    for n, p in model.named_parameters():
        ref["final." + n] = p.detach().float().clone()
    info = {"generator": "test/reference/make_roberta_fixtures.py", "torch": torch.__version__,
            "transformers": transformers.__version__, "numpy": np.__version__, "lengths": LENGTHS,
            "adamw": {"steps": STEPS, "lr": LR, "betas": BETAS, "eps": EPS, "weight_decay": WEIGHT_DECAY}}
    save_file({k: v.contiguous() for k, v in ref.items()}, os.path.join(out_dir, "reference.safetensors"),
              metadata={"info": json.dumps(info)})
    print(f"{name}: loss {out.loss.item():.6f}, losses {' '.join(f'{l:.6f}' for l in losses)}, "
          f"{sum(p.numel() for p in model.parameters())} parameters")


if __name__ == "__main__":
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    build("roberta_tiny_cls", 3)  # MNLI-like: three classes, cross-entropy
    build("roberta_tiny_reg", 1)  # STS-B-like: one output, MSE
