"""Metrics of the fine-tuning reports: accuracy and macro-F1 of sequence labels, token-level
micro-F1 and entity F1 (BIO tags, as seqeval's default mode) of token labels, mean ± std."""

from __future__ import annotations

from collections.abc import Sequence

from complexformer import results

__all__ = [
    "accuracy",
    "bio_entities",
    "classification_metrics",
    "entity_f1",
    "is_bio",
    "macro_f1",
    "mean_std",
    "token_metrics",
]


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


def is_bio(tags: Sequence[str]) -> bool:
    """Whether every tag name is ``O``, ``B-TYPE`` or ``I-TYPE`` (and one is not ``O``)."""
    return any(t != "O" for t in tags) and all(
        t == "O" or (t[:2] in ("B-", "I-") and len(t) > 2) for t in tags
    )


def bio_entities(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """The (type, start, end) chunks of one BIO tag sequence, as seqeval's default (IOB2,
    not strict): a chunk starts at ``B-X``, or at ``I-X`` after ``O`` or another type, and
    runs while ``I-X`` follows."""
    out, start, kind = set(), None, None
    for i, t in enumerate([*tags, "O"]):
        prefix, name = (t[0], t[2:]) if t != "O" else ("O", None)
        if start is not None and (prefix != "I" or name != kind):
            out.add((kind, start, i))
            start = kind = None
        if prefix == "B" or (prefix == "I" and start is None):
            start, kind = i, name
    return out


def entity_f1(true: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> float:
    """Micro F1 over exact (type, span) chunks of every sentence (seqeval's ``f1_score``)."""
    tp = n_true = n_pred = 0
    for t, p in zip(true, pred, strict=True):
        a, b = bio_entities(t), bio_entities(p)
        tp, n_true, n_pred = tp + len(a & b), n_true + len(a), n_pred + len(b)
    return 2 * tp / (n_true + n_pred) if n_true + n_pred else 0.0


def token_metrics(
    true: Sequence[Sequence[int]], pred: Sequence[Sequence[int]], names: Sequence[str]
) -> dict[str, float]:
    """Per-word tag ids of each sentence -> ``accuracy`` (= micro-F1 over tokens: every token
    has one tag), ``macro_f1`` over tags, and ``entity_f1`` when the tag names are BIO."""
    flat_t = [a for s in true for a in s]
    flat_p = [b for s in pred for b in s]
    out = classification_metrics(flat_t, flat_p)
    if is_bio(names):
        out["entity_f1"] = entity_f1(
            [[names[i] for i in s] for s in true], [[names[i] for i in s] for s in pred]
        )
    return out


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n − 1; 0 for a single value), as a pair
    (:func:`complexformer.results.mean_std` with the fine-tuning reports' conventions)."""
    if not values:
        raise ValueError("mean_std of no values")
    s = results.mean_std(values)
    return s["mean"], s["std"] or 0.0
