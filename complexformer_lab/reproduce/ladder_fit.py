"""Fitting a compute ladder: power laws of loss against compute, with confidence bands.

A variant's validation loss (nats per token) at training compute C is modelled as the power law
of Kaplan et al., "Scaling Laws for Neural Language Models" (2020), without an irreducible
term (a ladder of a few CPU-sized rungs cannot pin one down)::

    L(C) = a · C^(−α)    ⇔    log L = log a − α · log C,

fitted by ordinary least squares on (log C, log L) with every seed of every rung as a point.
The band of the fitted mean at C is log L̂ ± t_{0.975, n−2} · s · sqrt(1/n + (x − x̄)² / Sxx)
(the textbook confidence interval of a regression line), mapped back with exp. Beyond the
ladder's range this is an extrapolation: the band covers the uncertainty of the fitted line
only, not the chance that the law bends.

The gap between two variants at C is the difference of their fitted means, with the standard
error sqrt(se₁² + se₂²) (the two fits are treated as independent, which overstates the error
of a paired design) and Welch-Satterthwaite degrees of freedom. The trend of the paired gap,
per seed, against log C (:func:`gap_trend`) says whether the gap grows or shrinks with compute
inside the ladder, without the power-law form.

Pure functions on numbers; no torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from complexformer.results import student_t_two_sided_p

__all__ = ["PowerLawFit", "fit_power_law", "gap_at", "gap_trend", "linear_fit", "t_quantile"]


def t_quantile(q: float, df: float) -> float:
    """The q-quantile (q in (0.5, 1)) of Student's t with ``df`` degrees of freedom, by
    bisection on the two-sided p-value (:func:`complexformer.results.student_t_two_sided_p`)."""
    if not 0.5 < q < 1.0:
        raise ValueError(f"q must be in (0.5, 1), got {q}")
    if not df > 0:
        raise ValueError(f"df must be > 0, got {df}")
    target = 2.0 * (1.0 - q)  # two-sided p at the quantile
    lo, hi = 0.0, 1.0
    while student_t_two_sided_p(hi, df) > target:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if student_t_two_sided_p(mid, df) > target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class LinearFit:
    """y = intercept + slope · x by least squares.

    Attributes:
        intercept, slope: the coefficients.
        n: points.
        x_mean: mean of x.
        sxx: Σ (x − x̄)².
        s: residual standard deviation (n − 2 degrees of freedom).
        slope_se: standard error of the slope.
        slope_p: two-sided p-value of slope = 0.
    """

    intercept: float
    slope: float
    n: int
    x_mean: float
    sxx: float
    s: float
    slope_se: float
    slope_p: float

    @property
    def dof(self) -> int:
        return self.n - 2

    def mean_se(self, x: float) -> float:
        """Standard error of the fitted mean at ``x``."""
        return self.s * math.sqrt(1.0 / self.n + (x - self.x_mean) ** 2 / self.sxx)


def linear_fit(x: Sequence[float], y: Sequence[float]) -> LinearFit:
    """Ordinary least squares of y on x.

    Raises:
        ValueError: fewer than 3 points, lengths that differ, or a single distinct x.
    """
    if len(x) != len(y):
        raise ValueError(f"x and y differ in length: {len(x)} vs {len(y)}")
    n = len(x)
    if n < 3:
        raise ValueError(f"a fit with a band needs at least 3 points, got {n}")
    xm, ym = sum(x) / n, sum(y) / n
    sxx = sum((xi - xm) ** 2 for xi in x)
    if sxx == 0.0:
        raise ValueError("every x is the same; a slope cannot be fitted")
    sxy = sum((xi - xm) * (yi - ym) for xi, yi in zip(x, y, strict=True))
    slope = sxy / sxx
    intercept = ym - slope * xm
    rss = sum((yi - intercept - slope * xi) ** 2 for xi, yi in zip(x, y, strict=True))
    s = math.sqrt(rss / (n - 2))
    se = s / math.sqrt(sxx)
    p = (
        1.0
        if se == 0.0 and slope == 0.0
        else (0.0 if se == 0.0 else student_t_two_sided_p(abs(slope) / se, n - 2))
    )
    return LinearFit(intercept, slope, n, xm, sxx, s, se, p)


@dataclass(frozen=True)
class PowerLawFit:
    """L(C) = a · C^(−α) fitted on logs (see the module docstring).

    Attributes:
        a, alpha: the law's coefficient and exponent.
        alpha_se: standard error of α.
        line: the underlying :class:`LinearFit` of log L on log C.
        c_min, c_max: the compute range of the points.
    """

    a: float
    alpha: float
    alpha_se: float
    line: LinearFit
    c_min: float
    c_max: float

    def predict(self, c: float, level: float = 0.95) -> dict[str, float]:
        """The fitted loss at compute ``c`` with its ``level`` confidence band.

        Returns:
            ``loss``, ``lo``, ``hi`` (the band), ``log_se`` (the standard error of log L̂)
            and ``extrapolated`` (1.0 outside [c_min, c_max], else 0.0).
        """
        x = math.log(c)
        mean = self.line.intercept + self.line.slope * x
        se = self.line.mean_se(x)
        t = t_quantile(0.5 + level / 2.0, self.line.dof)
        return {
            "loss": math.exp(mean),
            "lo": math.exp(mean - t * se),
            "hi": math.exp(mean + t * se),
            "log_se": se,
            "extrapolated": float(not self.c_min <= c <= self.c_max),
        }

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "line": asdict(self.line)}


def fit_power_law(compute: Sequence[float], loss: Sequence[float]) -> PowerLawFit:
    """Fit L = a · C^(−α) to (compute, loss) points (losses > 0, compute > 0)."""
    if any(c <= 0 for c in compute) or any(v <= 0 for v in loss):
        raise ValueError("compute and loss must be > 0 for a power law")
    line = linear_fit([math.log(c) for c in compute], [math.log(v) for v in loss])
    return PowerLawFit(
        a=math.exp(line.intercept),
        alpha=-line.slope,
        alpha_se=line.slope_se,
        line=line,
        c_min=min(compute),
        c_max=max(compute),
    )


def gap_at(fit: PowerLawFit, reference: PowerLawFit, c: float, level: float = 0.95) -> dict:
    """The fitted loss of ``fit`` minus that of ``reference`` at compute ``c``.

    The error of each fitted mean is taken on the loss scale by the delta method
    (se(L̂) ≈ L̂ · se(log L̂)); the two are combined as independent, with Welch-Satterthwaite
    degrees of freedom.

    Returns:
        ``gap`` (nats), ``lo``, ``hi`` (its ``level`` interval), ``se``, ``dof``, ``p`` (two-
        sided, gap = 0), ``ppl_ratio`` (exp(gap): the perplexity ratio) and ``extrapolated``.
    """
    pa, pb = fit.predict(c, level), reference.predict(c, level)
    sa, sb = pa["loss"] * pa["log_se"], pb["loss"] * pb["log_se"]
    se = math.sqrt(sa**2 + sb**2)
    gap = pa["loss"] - pb["loss"]
    da, db = fit.line.dof, reference.line.dof
    dof = se**4 / (sa**4 / da + sb**4 / db) if se > 0 else float(min(da, db))
    t = t_quantile(0.5 + level / 2.0, dof)
    p = student_t_two_sided_p(abs(gap) / se, dof) if se > 0 else float(gap == 0)
    return {
        "gap": gap,
        "lo": gap - t * se,
        "hi": gap + t * se,
        "se": se,
        "dof": dof,
        "p": p,
        "ppl_ratio": math.exp(gap),
        "extrapolated": max(pa["extrapolated"], pb["extrapolated"]),
    }


def gap_trend(compute: Sequence[float], gaps: Sequence[float]) -> dict[str, float]:
    """The paired gap (variant − reference, per seed and rung) regressed on log10 C.

    Returns:
        ``slope`` (gap change per tenfold compute), ``slope_se``, ``p`` (slope = 0) and
        ``n``.
    """
    line = linear_fit([math.log10(c) for c in compute], list(gaps))
    return {"slope": line.slope, "slope_se": line.slope_se, "p": line.slope_p, "n": line.n}
