"""Classification metrics of the fine-tuning reports: accuracy, macro-F1, mean ± std."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["accuracy", "classification_metrics", "macro_f1", "mean_std"]


def accuracy(y_true: Sequence[int], y_pred: Sequence[int]) -> float:
    """Share of equal labels."""
    if len(y_true) != len(y_pred) or not y_true:
        raise ValueError(
            f"need two non-empty label lists of equal length, got {len(y_true)} and {len(y_pred)}"
        )
    return sum(int(a == b) for a, b in zip(y_true, y_pred, strict=True)) / len(y_true)


def macro_f1(y_true: Sequence[int], y_pred: Sequence[int]) -> float:
    """Unweighted mean over classes of F1 = 2·TP / (2·TP + FP + FN).

    The classes are those present in ``y_true`` or ``y_pred`` (as scikit-learn's
    ``f1_score(average="macro")``); a class with no true and no predicted example cannot occur,
    and one with TP = 0 has F1 = 0.
    """
    accuracy(y_true, y_pred)  # validates the inputs
    classes = sorted(set(y_true) | set(y_pred))
    scores = []
    for c in classes:
        tp = sum(1 for a, b in zip(y_true, y_pred, strict=True) if a == c and b == c)
        fp = sum(1 for a, b in zip(y_true, y_pred, strict=True) if a != c and b == c)
        fn = sum(1 for a, b in zip(y_true, y_pred, strict=True) if a == c and b != c)
        scores.append(2 * tp / (2 * tp + fp + fn))
    return sum(scores) / len(scores)


def classification_metrics(y_true: Sequence[int], y_pred: Sequence[int]) -> dict[str, float]:
    """``{"accuracy", "macro_f1"}``."""
    return {"accuracy": accuracy(y_true, y_pred), "macro_f1": macro_f1(y_true, y_pred)}


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n − 1; 0 for a single value)."""
    if not values:
        raise ValueError("mean_std of no values")
    m = sum(values) / len(values)
    if len(values) == 1:
        return m, 0.0
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))
