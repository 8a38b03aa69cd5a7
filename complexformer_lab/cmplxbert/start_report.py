"""``complexformer cbert-start``: the start of a modulus CmplxBERT against the real model.

Measures, layer by layer on unseen sentences, what the paper's zero start and the
sign-preserving start (:mod:`complexformer.cmplxbert.start`) do to a pre-trained BERT
(:func:`compare_starts`), and writes ``start.json``, ``start.md`` and ``start.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from complexformer.cmplxbert.analysis import imaginary_to_real, sentence_cosine
from complexformer.cmplxbert.complexify import complexify
from complexformer.cmplxbert.config import CmplxBertConfig
from complexformer.cmplxbert.loading import load_hf_bert, resolve_base
from complexformer.results import markdown_table, write_report
from complexformer.runtime import cpu_settings
from complexformer.storage import atomic_output

from .docstrings import build_docstring_dataset

__all__ = ["compare_starts", "start_report"]


@torch.no_grad()
def compare_starts(
    base: torch.nn.Module, input_ids: Tensor, attention_mask: Tensor, configs: dict
) -> dict[str, dict[str, list[float]]]:
    """Layer by layer, how far complexified models start from the real one.

    Args:
        base: a Hugging Face ``BertModel`` (the real model; it is wrapped, not changed).
        input_ids, attention_mask: (B, T) sentences (B >= 2).
        configs: ``{name: CmplxBertConfig}``, each complexified from ``base`` in turn.

    Returns:
        ``{"real": {...}, name: {...}}`` with, per hidden state (embeddings, then every
        layer), ``cosine`` (:func:`sentence_cosine`), and for the complex models
        ``rel_error`` (‖h − h_real‖ / ‖h_real‖ over the tokens) and ``imag_to_real``.
    """
    was = base.training
    base.eval()
    real = base(
        input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True
    ).hidden_states
    w = attention_mask[..., None].to(torch.float64)
    out = {"real": {"cosine": [sentence_cosine(h, attention_mask) for h in real]}}
    for name, cfg in configs.items():
        model = complexify(base, model_config=cfg).eval()
        states = model(
            input_ids, attention_mask=attention_mask, output_hidden_states=True
        ).hidden_states
        rel = []
        for h, r in zip(states, real, strict=True):
            diff = ((h - r.to(h.dtype)).abs().double().pow(2) * w).sum()
            rel.append(float((diff / (r.double().pow(2) * w).sum()).sqrt()))
        out[name] = {
            "cosine": [sentence_cosine(h, attention_mask) for h in states],
            "rel_error": rel,
            "imag_to_real": [imaginary_to_real(h, attention_mask) for h in states],
        }
    base.train(was)
    return out


def start_report(
    base: str, out_dir: str | Path, n: int = 64, max_len: int = 64, start_offset: float = 8.0,
    threads: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Compare the paper's start and the keep start with the real ``base`` on the first
    ``n`` docstrings of the docstring task's test split; returns the payload written.

    Args:
        base: the real BERT (hub name, local directory or ``minilm``).
        out_dir: the folder of start.json, start.md and start.png.
        n: sentences compared.
        max_len: tokens per sentence (truncation).
        start_offset: C of the keep start: every attention logit is shifted by C,
            a² = C·√d (``CmplxBertConfig.start_offset``).
        threads: torch CPU threads (None: torch's default).
    """
    from transformers import AutoTokenizer

    texts = [e.text for e in build_docstring_dataset().splits["test"][:n]]
    with cpu_settings(threads):
        hf, _ = load_hf_bert(base, "base")
        tok = AutoTokenizer.from_pretrained(resolve_base(base))
        enc = tok(texts, truncation=True, max_length=max_len, padding=True, return_tensors="pt")
        configs = {
            "paper start": CmplxBertConfig(start="paper"),
            "keep start": CmplxBertConfig(start="keep", start_offset=start_offset),
        }
        res = compare_starts(hf, enc["input_ids"], enc["attention_mask"], configs)
    payload = {"base": base, "sentences": len(texts), "max_len": max_len, "offset": start_offset,
               "layers": res}  # fmt: skip
    write_report(out_dir, "start", payload, _markdown(payload))
    _plot(payload, Path(out_dir) / "start.png")
    return payload


def _markdown(p: dict[str, Any]) -> str:
    res = p["layers"]
    names = [k for k in res if k != "real"]
    rows = []
    for i, cos in enumerate(res["real"]["cosine"]):
        row = ["embeddings" if i == 0 else f"layer {i}", f"{cos:.3f}"]
        for k in names:
            row += [f"{res[k]['cosine'][i]:.3f}", f"{res[k]['rel_error'][i]:.4f}"]
        rows.append(row)
    cols = ["hidden state", "cosine, real"]
    for k in names:
        cols += [f"cosine, {k}", f"rel. error, {k}"]
    return (
        f"Start of a modulus CmplxBERT (modulus scores and heads) from `{p['base']}` against "
        f"the real model on {p['sentences']} unseen docstrings (at most {p['max_len']} "
        "tokens): mean pairwise cosine of the sentence vectors (masked mean of the hidden "
        "states, [Re, Im] for complex ones) and relative error ‖h − h_real‖ / ‖h_real‖, "
        f"per hidden state. Keep start offset C = {p['offset']:g}.\n\n"
        + markdown_table(cols, rows, align="l" + "r" * (len(cols) - 1))
    )


def _plot(p: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    res = p["layers"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, r in res.items():
        ax.plot(range(len(r["cosine"])), r["cosine"], marker="o", label=name)
        if "rel_error" in r:
            bx.semilogy(range(len(r["rel_error"])), [max(x, 1e-6) for x in r["rel_error"]],
                        marker="o", label=name)  # fmt: skip
    ax.set_xlabel("hidden state (0 = embeddings)")
    ax.set_ylabel("mean pairwise cosine of sentence vectors")
    bx.set_xlabel("hidden state (0 = embeddings)")
    bx.set_ylabel("relative error vs the real model")
    ax.legend(fontsize=8)
    bx.legend(fontsize=8)
    fig.tight_layout()
    with atomic_output(path) as tmp:  # refuses a symbolic link at path
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
