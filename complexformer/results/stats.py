"""Statistics of repeated runs: mean ± sample standard deviation over seeds and a two-sided
paired t-test, for every report that compares models run with the same seeds.

The Student t distribution is computed here through the regularised incomplete beta function
(its continued fraction with the modified Lentz method, as in Press et al., "Numerical
Recipes"), so SciPy is not needed at run time; the tests compare it with SciPy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "MIN_PAIRS",
    "format_p",
    "mean_std",
    "paired_t_test",
    "regularized_incomplete_beta",
    "student_t_two_sided_p",
]

#: With fewer paired seeds than this no test is reported.
MIN_PAIRS = 3


def mean_std(values: Iterable[float | None]) -> dict[str, Any]:
    """Mean and sample standard deviation (n − 1 in the denominator) of the finite values.

    Returns:
        ``{"n", "mean", "std", "values"}``; ``mean`` is None when n = 0, ``std`` when n < 2.
    """
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(vals)
    mean = sum(vals) / n if n else None
    std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1)) if n >= 2 else None
    return {"n": n, "mean": mean, "std": std, "values": vals}


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz's method)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularised incomplete beta function, for a, b > 0 and 0 <= x <= 1."""
    if not (a > 0 and b > 0):
        raise ValueError(f"a and b must be > 0, got {a}, {b}")
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must be in [0, 1], got {x}")
    if x in (0.0, 1.0):
        return x
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def student_t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom:
    ``I_{df / (df + t²)}(df / 2, 1 / 2)``."""
    if df <= 0:
        raise ValueError(f"df must be > 0, got {df}")
    if math.isinf(t):
        return 0.0
    return regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def paired_t_test(diffs: Sequence[float]) -> dict[str, Any]:
    """Two-sided paired t-test of H0: mean difference = 0.

    t = mean(d) / (s_d / √n), df = n − 1, with s_d the sample standard deviation.

    Returns:
        ``{"n", "mean", "std", "t", "df", "p", "note"}``; ``t``, ``df`` and ``p`` are None
        (and ``note`` says why) when n < 3 or all differences are equal.
    """
    s = mean_std(diffs)
    n, mean, std = s["n"], s["mean"], s["std"]
    out: dict[str, Any] = {
        "n": n,
        "mean": mean,
        "std": std,
        "t": None,
        "df": None,
        "p": None,
        "note": None,
    }
    if n < MIN_PAIRS:
        out["note"] = f"n = {n} < {MIN_PAIRS} paired seeds: no test possible"
        return out
    if std == 0.0:
        out["note"] = "all differences are equal: the t statistic is undefined"
        return out
    t = mean / (std / math.sqrt(n))
    out.update(t=t, df=n - 1, p=student_t_two_sided_p(t, n - 1))
    return out


def format_p(p: float | None) -> str:
    """A p-value for a table: ``0.074``, ``<0.001`` or ``–``."""
    if p is None:
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"
