"""The per-head analysis's report: the measures it tabulates, heat-map and attention-map plots
(matplotlib, optional) and the markdown report of :mod:`.heads`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor

from complexformer.evaluation.suite import fmt_number
from complexformer.results import markdown_table
from complexformer.storage import atomic_output

__all__ = [
    "MEASURES",
    "MEASURE_LABELS",
    "STAT_NAMES",
    "heads_markdown",
    "plot_attention",
    "plot_grids",
]

STAT_NAMES = ("mean", "std", "mean_abs", "min", "max", "frac_abs_gt")
MEASURES = (
    "semantic_share",
    "rel_l2_no_semantic",
    "rel_l2_no_position",
    "kl_no_semantic",
    "kl_no_position",
    "attention_distance",
    "attention_entropy",
)
MEASURE_LABELS = {
    "semantic_share": "semantic share",
    "rel_l2_no_semantic": "rel L2 (δ = 0)",
    "rel_l2_no_position": "rel L2 (ω = 0)",
    "kl_no_semantic": "KL (δ = 0)",
    "kl_no_position": "KL (ω = 0)",
    "attention_distance": "mean attention distance",
    "attention_entropy": "attention entropy",
}


def _grid_array(g: list[list[float | None]]) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in r] for r in g], dtype=float)


def plot_grids(
    panels: list[tuple[str, list[list[float | None]]]], path: Path, title: str
) -> Path | None:
    """A figure of (layer × head) heatmaps, one panel per statistic; None without matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    arrays = [(name, _grid_array(g)) for name, g in panels]
    n_layer, n_head = arrays[0][1].shape
    ncols = min(3, len(arrays))
    nrows = -(-len(arrays) // ncols)
    cell = 0.45
    w = max(3.2, 1.4 + cell * n_head)
    h = max(2.4, 1.0 + cell * n_layer)
    fig = Figure(figsize=(w * ncols, h * nrows + 0.6), dpi=100)
    FigureCanvasAgg(fig)
    annotate = n_layer * n_head <= 64
    for i, (name, a) in enumerate(arrays):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        finite = np.isfinite(a)
        if finite.any():
            im = ax.imshow(
                np.ma.masked_invalid(a), aspect="auto", cmap="viridis", interpolation="nearest"
            )
            cb = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
            cb.formatter.set_useOffset(False)
            cb.update_ticks()
            lo, hi = np.nanmin(a), np.nanmax(a)
            if annotate:
                for (r, c), v in np.ndenumerate(a):
                    if np.isfinite(v):
                        bright = hi > lo and (v - lo) / (hi - lo) > 0.6
                        ax.text(
                            c,
                            r,
                            f"{v:.3g}",
                            ha="center",
                            va="center",
                            fontsize=7,
                            color="black" if bright else "white",
                        )
        else:
            ax.text(0.5, 0.5, "n/a", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_xticks(range(n_head))
        ax.set_yticks(range(n_layer))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    with atomic_output(path) as tmp:
        fig.savefig(tmp, format="png")
    return path


def plot_attention(
    probs: dict[int, Tensor], labels: list[str], path: Path, title: str
) -> Path | None:
    """Grid of attention-probability images: rows = layers, columns = heads."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.colors import PowerNorm
        from matplotlib.figure import Figure
    except ImportError:
        return None
    layers = sorted(probs)
    n_head = probs[layers[0]].shape[1]
    t = probs[layers[0]].shape[-1]
    size = 2.6 if t <= 24 else 2.2
    fig = Figure(figsize=(size * n_head + 0.5, size * len(layers) + 0.7), dpi=90)
    FigureCanvasAgg(fig)
    show_labels = t <= 24
    for r, layer in enumerate(layers):
        for h in range(n_head):
            ax = fig.add_subplot(len(layers), n_head, r * n_head + h + 1)
            img = probs[layer][0, h].float().cpu().numpy()
            ax.imshow(
                img,
                cmap="magma",
                interpolation="nearest",
                norm=PowerNorm(0.5, vmin=0.0, vmax=max(float(img.max()), 1e-12)),
            )
            ax.set_title(f"layer {layer} head {h}", fontsize=8)
            if show_labels:
                ax.set_xticks(range(t))
                ax.set_xticklabels(labels, rotation=90, fontsize=5)
                ax.set_yticks(range(t))
                ax.set_yticklabels(labels, fontsize=5)
            else:
                ax.set_xticks([])
                ax.set_yticks([])
    fig.suptitle(title + "\n(rows: queries, columns: keys; sqrt colour scale)", fontsize=9)
    fig.tight_layout()
    with atomic_output(path) as tmp:
        fig.savefig(tmp, format="png")
    return path


# ------------------------------------------------------------------------------ report
def _fmt3(v: float | None) -> str:
    return fmt_number(v, 3, "g")


def heads_markdown(p: dict[str, Any]) -> str:
    run, data, sc, ad = p["run"], p["data"], p["scores"], p["adaptation"]
    n_layer, n_head = run["n_layer"], run["n_head"]
    lines = [
        f"# Heads: {run['pos_scheme']} ({run['path'] or 'model'})",
        "",
        f"{n_layer} layers × {n_head} heads, head dim {run['head_dim']}, T = "
        f"{run['max_seq_len']}. Score measures on {data['blocks']} blocks of "
        f"{data['block_len']} tokens of `{data['spec']}` [{data['split']}] (seed "
        f"{p['config']['seed']}).",
        "",
    ]
    if ad is None:
        lines += [
            "## Adaptation parameters",
            "",
            f"Not applicable: `{run['pos_scheme']}` has no δ, b (eq. 7).",
            "",
        ]
    else:
        note = " (one vector per layer, shared by the heads)" if ad["shared"] else ""
        note += " (frozen δ = 1, b = 0)" if ad["fixed"] else ""
        rows = []
        for layer in range(n_layer):
            for h in range(n_head):
                d = {k: v[layer][h] for k, v in ad["delta"].items()}
                b = {k: v[layer][h] for k, v in ad["bias"].items()}
                rows.append(
                    [
                        layer,
                        h,
                        *[_fmt3(d[k]) for k in STAT_NAMES],
                        *[_fmt3(b[k]) for k in ("mean", "std", "mean_abs", "frac_abs_gt")],
                    ]
                )
        lines += [
            "## Adaptation parameters δ, b (eq. 7)" + note,
            "",
            markdown_table(
                [
                    "layer",
                    "head",
                    "mean δ",
                    "std δ",
                    r"mean \|δ\|",
                    "min δ",
                    "max δ",
                    rf"frac \|δ\|>{ad['delta_threshold']:g}",
                    "mean b",
                    "std b",
                    r"mean \|b\|",
                    rf"frac \|b\|>{ad['bias_threshold']:g}",
                ],
                rows,
                "rr" + "r" * 10,
            ),
            "",
        ]
    rows = []
    for layer in range(n_layer):
        for h in range(n_head):
            rows.append([layer, h, *[_fmt3(sc[k][layer][h]) for k in MEASURES]])
    lines += [
        "## Semantic vs positional term (eq. 8) and attention statistics",
        "",
        "semantic share = N(S − S_pos) / (N(S − S_pos) + N(S − S_sem)), S_pos: δ = 0 (no "
        "semantic phase), S_sem: ω = 0 (no positional phase), N: squared norm of the "
        "row-centred causal scores; rel L2 = sqrt(N(S − S_x) / N(S)); KL = mean row "
        "KL(softmax S || softmax S_x); distance / entropy of softmax S (rows m ≥ 1).",
        "",
        markdown_table(
            [
                "layer",
                "head",
                "semantic share",
                "rel L2 δ=0",
                "rel L2 ω=0",
                "KL δ=0",
                "KL ω=0",
                "mean distance",
                "entropy",
            ],
            rows,
            "rr" + "r" * 7,
        ),
        "",
    ]
    am = p["attention_maps"]
    lines += [
        "## Attention maps",
        "",
        f"`attention_maps.png`: layers {', '.join(map(str, am['layers']))}, "
        f"{len(am['ids'])} prompt tokens ({am['source']}).",
    ]
    return "\n".join(lines)
