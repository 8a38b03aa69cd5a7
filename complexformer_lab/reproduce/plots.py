"""Loss curves of a reproduction: per variant the mean over seeds, one PNG per table.

matplotlib is imported only inside the functions (object-oriented Agg canvas, so the global
backend is left alone) and every PNG is written atomically
(:func:`complexformer.storage.atomic_output`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from complexformer.storage import atomic_output
from complexformer.training.metrics import METRICS_FILE
from complexformer.training.plot import read_metrics

__all__ = ["mean_curve", "plot_extrapolation_means", "plot_table_losses", "read_loss_curves"]


def read_loss_curves(run_dir: str | os.PathLike) -> dict[str, list[tuple[int, float]]]:
    """``{"train": [(step, loss)], "val": [(step, loss)]}`` from a run's ``metrics.jsonl``
    (empty lists when the file is missing)."""
    path = Path(run_dir) / METRICS_FILE
    rows = read_metrics(path) if path.is_file() else []
    out: dict[str, list[tuple[int, float]]] = {"train": [], "val": []}
    for r in rows:
        for key, name in (("train_loss", "train"), ("val_loss", "val")):
            v = r.get(key)
            if v is not None and math.isfinite(float(v)):
                out[name].append((int(r["step"]), float(v)))
    return out


def mean_curve(curves: Sequence[Sequence[tuple[int, float]]]) -> list[tuple[int, float, float]]:
    """Mean and population std over the curves at the steps every curve has.

    Returns:
        ``[(step, mean, std)]`` sorted by step (empty when no step is shared).
    """
    if not curves:
        return []
    maps = [dict(c) for c in curves]
    steps = sorted(set.intersection(*(set(m) for m in maps)))
    out = []
    for s in steps:
        vals = [m[s] for m in maps]
        mu = sum(vals) / len(vals)
        out.append((s, mu, math.sqrt(sum((v - mu) ** 2 for v in vals) / len(vals))))
    return out


def figure(ncols: int, width: float = 6.0, height: float = 4.5):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Any, out_path: str | os.PathLike) -> Path:
    fig.tight_layout()
    out = Path(out_path)
    with atomic_output(out) as tmp:
        fig.savefig(tmp, format="png")
    return out


def _no_matplotlib(log: Callable[[str], Any] | None) -> None:
    if log is not None:
        log(
            "note: matplotlib is not installed, skipping the plot "
            "(pip install 'complexformer[plot]')"
        )


def plot_table_losses(
    runs: Mapping[str, Sequence[str | os.PathLike]],
    out_path: str | os.PathLike,
    *,
    title: str | None = None,
    labels: Mapping[str, str] | None = None,
    log: Callable[[str], Any] | None = print,
) -> Path | None:
    """Train and validation loss against the step, the mean over seeds per variant (shaded:
    ± one standard deviation), two panels.

    Args:
        runs: ``{variant: [run directories, one per seed]}``.
        out_path: the PNG to write.
        title: the figure title.
        labels: display names of the variants.
        log: where to print a note when matplotlib is missing.

    Returns:
        The PNG path, or None when matplotlib is not installed.
    """
    try:
        fig = figure(2)
    except ImportError:
        _no_matplotlib(log)
        return None
    axes = [fig.add_subplot(1, 2, i + 1) for i in range(2)]
    for variant, dirs in runs.items():
        curves = [read_loss_curves(d) for d in dirs]
        name = (labels or {}).get(variant, variant)
        for ax, key in zip(axes, ("train", "val"), strict=True):
            mc = mean_curve([c[key] for c in curves if c[key]])
            if not mc:
                continue
            steps, mean, std = (list(x) for x in zip(*mc, strict=True))
            n = sum(1 for c in curves if c[key])
            style = "-" if key == "train" else "o-"
            (line,) = ax.plot(
                steps, mean, style, label=f"{name} (n={n})", linewidth=1.3, markersize=3
            )
            if n > 1:
                ax.fill_between(
                    steps,
                    [m - s for m, s in zip(mean, std, strict=True)],
                    [m + s for m, s in zip(mean, std, strict=True)],
                    color=line.get_color(),
                    alpha=0.15,
                    linewidth=0,
                )
    for ax, what in zip(axes, ("train loss", "validation loss"), strict=True):
        ax.set_xlabel("step")
        ax.set_ylabel(f"{what} (nats / token)")
        ax.set_title(f"{what}, mean over seeds")
        ax.grid(True, alpha=0.3)
        if ax.get_lines():
            ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return save_figure(fig, out_path)


def plot_extrapolation_means(
    payload: dict[str, Any],
    out_path: str | os.PathLike,
    *,
    log: Callable[[str], Any] | None = print,
) -> Path | None:
    """Mean perplexity (± std over seeds) against the length multiplier, one line per
    variant, from :func:`complexformer_lab.reproduce.table.build_extrapolation_table`'s payload.

    Returns:
        The PNG path, or None when matplotlib is not installed.
    """
    try:
        fig = figure(1, width=7.0)
    except ImportError:
        _no_matplotlib(log)
        return None
    ax = fig.add_subplot(1, 1, 1)
    mults = payload["multipliers"]
    for row in payload["rows"]:
        pts = [(m, row["stats"][f"ppl_x{m}"]) for m in mults]
        pts = [(m, s["mean"], s["std"] or 0.0) for m, s in pts if s["mean"] is not None]
        if not pts:
            continue
        xs, ys, es = (list(x) for x in zip(*pts, strict=True))
        ax.errorbar(
            xs, ys, yerr=es, fmt="o-", capsize=3, label=row["label"], linewidth=1.3, markersize=4
        )
    means = [
        s["mean"]
        for row in payload["rows"]
        for s in row["stats"].values()
        if s["mean"] is not None and s["mean"] > 0
    ]
    if means and max(means) > 4 * min(means):
        ax.set_yscale("log")
    ax.set_xscale("log", base=2)
    ax.set_xticks(mults)
    ax.set_xticklabels([f"{m}×T" for m in mults])
    ax.set_xlabel("evaluation length")
    ax.set_ylabel("perplexity (same tokens at every length)")
    ax.grid(True, alpha=0.3)
    if ax.get_lines():
        ax.legend(fontsize=8)
    ax.set_title(payload.get("title", "extrapolation"))
    return save_figure(fig, out_path)
