"""The complex word embeddings of a CmplxBERT in the complex plane (Tamburini 2024, Figure 1):
the scatter plot and the ``cbert-embeddings`` report (``embeddings.png``, ``embeddings.json``,
``embeddings.md``), from the library's
:func:`complexformer.cmplxbert.analysis.embedding_components` and
:func:`complexformer.cmplxbert.analysis.imaginary_energy_share`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from complexformer.cmplxbert.analysis import embedding_components, imaginary_energy_share
from complexformer.cmplxbert.loading import load_cmplxbert
from complexformer.results import write_report
from complexformer.storage import atomic_output

__all__ = ["embeddings_report", "plot_embedding_scatter"]


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
