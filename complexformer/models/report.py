"""Parameter counts, with CMHA's adaptation parameters shown separately."""

from __future__ import annotations

from torch import nn

__all__ = ["format_parameter_report", "parameter_report"]


def parameter_report(model: nn.Module) -> dict[str, int]:
    """Count unique parameters by group.

    Groups: ``adaptation`` (CMHA delta and b; the paper's L x d_model for per-head CMHA),
    ``pcl`` (phase-contrastive channel weights), ``embedding`` (token and position
    embeddings), ``other``; plus ``total`` and ``trainable``.
    """
    groups = {"adaptation": 0, "pcl": 0, "embedding": 0, "other": 0}
    total = trainable = 0
    for name, p in model.named_parameters():  # named_parameters skips tied duplicates
        n = p.numel()
        total += n
        trainable += n if p.requires_grad else 0
        leaf = name.rsplit(".", 1)[-1]
        if leaf in ("adapt_delta", "adapt_bias"):
            groups["adaptation"] += n
        elif leaf == "pcl_weight":
            groups["pcl"] += n
        elif name.startswith(("wte.", "wpe.")):
            groups["embedding"] += n
        else:
            groups["other"] += n
    return {"total": total, "trainable": trainable, **groups}


def format_parameter_report(model: nn.Module) -> str:
    """A small table of :func:`parameter_report` with shares of the total."""
    r = parameter_report(model)
    lines = [f"{'parameters':<12}{'count':>14}{'share':>9}"]
    for key in ("total", "trainable", "embedding", "adaptation", "pcl", "other"):
        share = 100.0 * r[key] / r["total"] if r["total"] else 0.0
        lines.append(f"{key:<12}{r[key]:>14,}{share:>8.3f}%")
    return "\n".join(lines)
