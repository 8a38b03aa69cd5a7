"""Helpers of tests/lora: tiny random BERTs, batches, a small real text (stdlib docstrings)."""

from __future__ import annotations

import inspect

import torch

TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=64)


def tiny_config(**kw):
    from transformers import BertConfig

    return BertConfig(**{**TINY, **kw})


def tiny_model(kind: str = "BertModel", seed: int = 0, perturb: bool = True, **kw):
    """A tiny random HF BERT in eval mode; with ``perturb`` the LayerNorm γ, β and all biases
    are random too (HF's init makes them 1 / 0, which would hide copy mistakes)."""
    import transformers

    torch.manual_seed(seed)
    model = getattr(transformers, kind)(tiny_config(**kw)).eval()
    if perturb:
        g = torch.Generator().manual_seed(seed + 1)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("LayerNorm.weight"):
                    p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
                elif name.endswith("bias"):
                    p.copy_(0.1 * torch.randn(p.shape, generator=g))
    return model


def batch(b: int = 3, t: int = 11, seed: int = 0, vocab: int = 99):
    """(input_ids, attention_mask with right padding on rows 1.., token_type_ids)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (b, t), generator=g)
    mask = torch.ones(b, t, dtype=torch.long)
    for i in range(1, b):
        mask[i, t - 2 * i:] = 0
    ids = ids.masked_fill(mask == 0, 0)
    tt = torch.zeros(b, t, dtype=torch.long)
    tt[:, t // 2:] = 1
    return ids, mask, tt


def stdlib_sentences(n: int = 16) -> list[str]:
    """Sentences from the docstrings of a few stdlib functions (offline real text)."""
    import json
    import os.path
    import textwrap

    out: list[str] = []
    for f in (json.dumps, json.loads, os.path.join, textwrap.wrap, textwrap.dedent,
              inspect.getdoc, inspect.signature, str.split, sorted, zip):
        doc = inspect.getdoc(f) or ""
        for s in doc.replace("\n", " ").split(". "):
            s = " ".join(s.split())
            if len(s) > 30:
                out.append(s)
    return out[:n]


def char_mlm_batch(t: int = 40, n: int = 8, vocab: int = 99, seed: int = 0, mask_id: int = 4):
    """Char-level ids of stdlib sentences in [5, vocab), 15% masked (labels -100 elsewhere)."""
    rows = []
    for s in stdlib_sentences(n):
        ids = [5 + (ord(c) % (vocab - 5)) for c in s[:t]]
        rows.append(ids + [0] * (t - len(ids)))
    ids = torch.tensor(rows)
    attn = (ids != 0).long()
    return mask_tokens(ids, attn, mask_id, seed)


def mask_tokens(ids, attn, mask_id: int, seed: int = 0, p: float = 0.15):
    g = torch.Generator().manual_seed(seed)
    pick = (torch.rand(ids.shape, generator=g) < p) & (attn == 1)
    pick[:, 1] = True  # at least one per row
    labels = ids.masked_fill(~pick, -100)
    return ids.masked_fill(pick, mask_id), attn, labels
