"""Helpers of tests/lora: tiny random BERTs, batches, a small real text (stdlib docstrings)."""

from __future__ import annotations

import inspect

import torch

TINY = dict(
    vocab_size=99,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=37,
    max_position_embeddings=64,
)


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
        mask[i, t - 2 * i :] = 0
    ids = ids.masked_fill(mask == 0, 0)
    tt = torch.zeros(b, t, dtype=torch.long)
    tt[:, t // 2 :] = 1
    return ids, mask, tt


def stdlib_sentences(n: int = 16) -> list[str]:
    """Sentences from the docstrings of a few stdlib functions (offline real text)."""
    import json
    import os.path
    import textwrap

    out: list[str] = []
    for f in (
        json.dumps,
        json.loads,
        os.path.join,
        textwrap.wrap,
        textwrap.dedent,
        inspect.getdoc,
        inspect.signature,
        str.split,
        sorted,
        zip,
    ):
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


def write_docstring_corpus(path, n_docs: int = 400) -> str:
    """A JSONL corpus of real English text: docstrings of stdlib modules' public objects.
    Returns its ``text:`` data spec."""
    import importlib
    import json

    docs: list[str] = []
    for mod_name in (
        "json",
        "os",
        "textwrap",
        "inspect",
        "collections",
        "itertools",
        "functools",
        "pathlib",
        "argparse",
        "logging",
        "csv",
        "re",
        "string",
        "random",
        "statistics",
        "heapq",
        "bisect",
        "shutil",
        "tempfile",
    ):
        mod = importlib.import_module(mod_name)
        for name in sorted(dir(mod)):
            if name.startswith("_"):
                continue
            doc = inspect.getdoc(getattr(mod, name, None))
            if doc and len(doc) > 80 and doc not in docs:
                docs.append(doc)
    rows = docs[:n_docs]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps({"text": d}) for d in rows) + "\n", encoding="utf-8")
    return f"text:{path}"


def save_tiny_bert_dir(directory, kind: str = "BertModel", seed: int = 0, **kw):
    """A tiny random HF BERT saved with the real MiniLM WordPiece tokenizer (vocab 30522).

    Returns:
        The directory (a local Hugging Face BERT: config.json, weights, tokenizer files).
    """
    from complexformer.cmplxbert import load_minilm

    _, tok = load_minilm("BertModel")
    model = tiny_model(
        kind, seed=seed, vocab_size=tok.vocab_size, max_position_embeddings=128, **kw
    )
    model.save_pretrained(str(directory))
    tok.save_pretrained(str(directory))
    return directory
