"""Loss curves from ``metrics.jsonl`` (matplotlib, imported only here; the ``plot`` extra)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..storage import atomic_output, open_file

__all__ = ["plot_loss_curves", "read_metrics"]


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a ``metrics.jsonl`` file (blank or truncated trailing lines are skipped).

    The file is read without following a symbolic link
    (:class:`~complexformer.storage.SymlinkRefusedError`).
    """
    rows = []
    with open_file(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut short by a crash
    return rows


def plot_loss_curves(
    metrics_path: str | os.PathLike,
    out_path: str | os.PathLike,
    *,
    title: str | None = None,
    log: Callable[[str], Any] | None = print,
) -> Path | None:
    """Plot train and validation loss against the step into a PNG.

    Uses matplotlib's object-oriented Agg canvas, so the global backend is left alone.

    Args:
        metrics_path: a ``metrics.jsonl`` file (rows with ``step``, ``train_loss`` and, on
            evaluation steps, ``val_loss``).
        out_path: the PNG to write.
        title: the figure title.
        log: where to print a note when matplotlib is missing.

    Returns:
        The PNG path, or None (with a printed note) when matplotlib is not installed.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        if log is not None:
            log(
                "note: matplotlib is not installed, skipping the loss plot "
                "(pip install 'complexformer[plot]')"
            )
        return None
    rows = read_metrics(metrics_path)
    train = [(r["step"], r["train_loss"]) for r in rows if r.get("train_loss") is not None]
    val = [(r["step"], r["val_loss"]) for r in rows if r.get("val_loss") is not None]
    fig = Figure(figsize=(7, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    if train:
        ax.plot(*zip(*train, strict=True), label="train", linewidth=1.2)
    if val:
        ax.plot(*zip(*val, strict=True), "o-", label="val", linewidth=1.5, markersize=4)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats / token)")
    ax.grid(True, alpha=0.3)
    if train or val:
        ax.legend()
    if title:
        ax.set_title(title)
    fig.tight_layout()
    out = Path(out_path)
    with atomic_output(out) as tmp:
        fig.savefig(tmp, format="png")
    return out
