"""The complex word embeddings of a CmplxBERT in the complex plane (Tamburini 2024, Figure 1).

Figure 1 of F. Tamburini, "Complexifying BERT using LoRA adapters" (CLiC-it 2024) plots a
random sample of the components of the complexified word-embedding matrix E + s·A·Bᴴ in the
complex plane, to show how much the imaginary part grew during the continued MLM pre-training
(a freshly complexified model has A·Bᴴ = 0, hence Im = 0). :func:`embedding_components` draws
the sample entry by entry from the frozen real table and the adapter factors (the full complex
table is never built), :func:`imaginary_energy_share` is Σ|Im z|² / Σ|z|², and
:func:`embeddings_report` writes the ``cbert-embeddings`` report (``embeddings.png``,
``embeddings.json``, ``embeddings.md``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from complexformer.cmplxbert import ComplexLoRAEmbedding
from complexformer.cmplxbert.loading import load_cmplxbert
from complexformer.results import write_report
from complexformer.storage import atomic_output

__all__ = [
    "embedding_components",
    "embeddings_report",
    "imaginary_energy_share",
    "plot_embedding_scatter",
]


def _word_embedding_layer(model: nn.Module) -> ComplexLoRAEmbedding:
    if isinstance(model, ComplexLoRAEmbedding):
        return model
    try:
        layer = model.bert.embeddings.word_embeddings
    except AttributeError:
        layer = None
    if not isinstance(layer, ComplexLoRAEmbedding):
        raise ValueError(
            "embedding_components: expected a CmplxBert (from complexify) or a "
            f"ComplexLoRAEmbedding, got {type(model).__name__} whose "
            "bert.embeddings.word_embeddings is not a ComplexLoRAEmbedding"
        )
    return layer


@torch.no_grad()
def embedding_components(model: nn.Module, n: int = 2000, seed: int = 0) -> Tensor:
    """n randomly chosen components of the complex word-embedding matrix E + s·A·Bᴴ.

    Tamburini (2024), Figure 1: the components of the complexified word embeddings, plotted
    in the complex plane. Entry (i, k) of the matrix is E[i, k] + s·Σ_r A[i, r]·conj(B[k, r]),
    where E is the frozen real table of the wrapped ``nn.Embedding`` and A, B, s the adapter
    of the :class:`~complexformer.cmplxbert.ComplexLoRAEmbedding` (see its ``delta_weight``); only
    the sampled entries are computed.

    Args:
        model: a ``CmplxBert`` (its ``bert.embeddings.word_embeddings`` is used) or a
            :class:`~complexformer.cmplxbert.ComplexLoRAEmbedding`.
        n: number of components; sampled without replacement from the num × dim entries
            (all of them, in random order, if n is larger).
        seed: seed of the ``torch.Generator`` used for the sampling; the same seed and
            model give the same components.

    Returns:
        A complex 1-D tensor of min(n, num·dim) components (on the model's device, complex
        dtype matching the real weight).

    Raises:
        ValueError: ``n < 1`` or ``model`` has no complex LoRA word embedding.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"embedding_components: n must be an integer >= 1, got {n!r}")
    layer = _word_embedding_layer(model)
    weight = layer.base_layer.weight.detach()
    num, dim = weight.shape
    g = torch.Generator().manual_seed(int(seed))
    flat = torch.randperm(num * dim, generator=g)[: min(n, num * dim)].to(weight.device)
    rows, cols = flat // dim, flat % dim
    real = weight[rows, cols]
    z = torch.complex(real, torch.zeros_like(real))
    if layer.r > 0:
        a = layer.complex_A.detach()[rows]  # (n, r)
        b = layer.complex_B.detach()[cols]  # (n, r)
        z = z + layer.scaling * (a * b.conj()).sum(dim=-1).to(z.dtype)
    return z


def imaginary_energy_share(z: Tensor) -> float:
    """Share of the energy in the imaginary part: Σ|Im z|² / Σ|z|².

    Tamburini (2024), Figure 1: how far the complexified embeddings moved off the real axis.
    0 for real values (a freshly complexified model), 1 for purely imaginary ones.

    Args:
        z: a tensor of any shape (complex; a real tensor has share 0).

    Returns:
        The share as a Python float in [0, 1]; 0.0 when z is empty or all zero.
    """
    z = z.detach()
    if not z.is_complex():
        return 0.0
    im = z.imag.double().pow(2).sum()
    total = im + z.real.double().pow(2).sum()
    if total.item() == 0.0:
        return 0.0
    return float(im / total)


def plot_embedding_scatter(
    z: Tensor, path: str | os.PathLike, title: str | None = None, dpi: int = 120
) -> Path:
    """Write a PNG scatter plot of complex values in the complex plane (Tamburini 2024, Fig. 1).

    matplotlib is imported here, with the non-interactive Agg backend. The axes are labelled
    Re / Im, with equal aspect; the title ends with the imaginary energy share
    (:func:`imaginary_energy_share`). The file is written atomically: a temporary file in
    the same folder, then ``os.replace``; parent folders are created.

    Args:
        z: complex values (any shape; flattened), e.g. from :func:`embedding_components`.
        path: the PNG file to write.
        title: text before the energy share (default: "word-embedding components").
        dpi: resolution of the PNG.

    Returns:
        The path written.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    z = z.detach().flatten().cpu()
    if not z.is_complex():
        z = torch.complex(z.float(), torch.zeros_like(z, dtype=torch.float32))
    share = imaginary_energy_share(z)
    head = title if title is not None else "word-embedding components"
    re, im = z.real.double().numpy(), z.imag.double().numpy()

    fig = Figure(figsize=(5.5, 5.5))
    ax = fig.add_subplot(1, 1, 1)
    ax.scatter(re, im, s=4, alpha=0.5, linewidths=0)
    ax.axhline(0.0, color="grey", linewidth=0.5)
    ax.axvline(0.0, color="grey", linewidth=0.5)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("Re")
    ax.set_ylabel("Im")
    ax.set_title(f"{head} (n={z.numel()}, Im energy share {share:.3g})")
    fig.tight_layout()

    path = Path(path)
    with atomic_output(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi)
    return path


def embeddings_report(
    model_dir: str, out: str | Path | None = None, n: int = 2000, seed: int = 0, *,
    verify: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """Plot ``n`` components of the CmplxBERT of ``model_dir`` drawn with ``seed`` and write
    ``embeddings.png``, ``embeddings.json`` and ``embeddings.md`` into ``out`` (default: the
    model directory): the share of the energy in the imaginary parts over every component of
    the word-embedding matrix and over the plotted sample. Returns the JSON payload.

    Args:
        model_dir: a CmplxBERT directory (from ``cbert-complexify``).
        out: the output folder (None: the model directory).
        n: components to plot.
        seed: seed of the component sample.
        verify: check the model directory against its manifest.
    """
    model = load_cmplxbert(model_dir, verify=verify)[0]
    sample = embedding_components(model, n=n, seed=seed)
    emb = model.bert.embeddings.word_embeddings
    total = emb.base_layer.weight.numel()
    full = imaginary_energy_share(embedding_components(model, n=total, seed=0))
    out = Path(out) if out else Path(model_dir)
    png = plot_embedding_scatter(
        sample, out / "embeddings.png", title=f"{model.name} word embeddings"
    )
    payload = {
        "model": str(model_dir),
        "name": model.name,
        "components_plotted": len(sample),
        "seed": seed,
        "imaginary_energy_share_sample": imaginary_energy_share(sample),
        "imaginary_energy_share": full,
        "components": total,
        "plot": str(png),
    }
    md = (
        f"| model | components | Im energy share (all) | Im energy share (plotted "
        f"sample) |\n|---|--:|--:|--:|\n| {model.name} | {total:,} | {full:.4g} | "
        f"{payload['imaginary_energy_share_sample']:.4g} |\n\n![embeddings]({png.name})\n"
    )
    write_report(out, "embeddings", payload, md)
    return payload
