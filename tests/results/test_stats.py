"""Statistics of repeated runs (``complexformer.results.stats``): mean and sample standard
deviation over seeds, the paired t-test and the Student t distribution against closed forms,
hand computations and scipy."""

from __future__ import annotations

import math

import pytest

from complexformer.results import (
    mean_std,
    paired_t_test,
    regularized_incomplete_beta,
    student_t_two_sided_p,
)


def test_mean_and_sample_std():
    s = mean_std([1.0, 2.0, 3.0, 4.0])
    assert s["n"] == 4 and s["mean"] == 2.5
    assert s["std"] == pytest.approx(math.sqrt(5.0 / 3.0))  # sum of squares 5, n - 1 = 3
    one = mean_std([7.0])
    assert one == {"n": 1, "mean": 7.0, "std": None, "values": [7.0]}
    assert mean_std([None, float("nan")])["mean"] is None


def test_paired_t_test_hand_computed():
    # d = [1, 2, 3]: mean 2, s = 1, t = 2 / (1 / sqrt 3) = 3.4641, df 2.
    r = paired_t_test([1.0, 2.0, 3.0])
    assert r["n"] == 3 and r["mean"] == 2.0 and r["std"] == 1.0 and r["df"] == 2
    assert r["t"] == pytest.approx(2.0 * math.sqrt(3.0))
    # df = 2 has the closed form P(|T| >= t) = 1 - t / sqrt(2 + t^2) = 1 - sqrt(12/14).
    assert r["p"] == pytest.approx(1.0 - math.sqrt(12.0 / 14.0), abs=1e-12)
    assert round(r["p"], 4) == 0.0742
    assert r["note"] is None


@pytest.mark.parametrize("t", [0.3, 1.0, 2.5, 12.0])
def test_t_distribution_closed_forms(t):
    # df = 1 (Cauchy): p = 1 - 2 atan(t) / pi; df = 2: p = 1 - t / sqrt(2 + t^2).
    assert student_t_two_sided_p(t, 1) == pytest.approx(1 - 2 * math.atan(t) / math.pi, abs=1e-12)
    assert student_t_two_sided_p(-t, 2) == pytest.approx(1 - t / math.sqrt(2 + t * t), abs=1e-12)
    # df = 4: p = 1 - (t / sqrt(4 + t^2)) (1 + 2 / (4 + t^2)) ... via I_x(2, 1/2).
    x = 4 / (4 + t * t)
    closed = 1 - math.sqrt(1 - x) * (1 + x / 2)  # I_x(2, 1/2) = 1 - sqrt(1-x)(1 + x/2)
    assert regularized_incomplete_beta(2.0, 0.5, x) == pytest.approx(closed, abs=1e-12)
    assert student_t_two_sided_p(0.0, 5) == 1.0


def test_t_distribution_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    for t, df in [(3.4641, 2), (2.1, 7), (0.01, 30), (1.7, 4.5), (8.0, 3)]:
        assert student_t_two_sided_p(t, df) == pytest.approx(2 * stats.t.sf(t, df), rel=1e-9)


def test_paired_t_test_few_seeds_or_equal_differences():
    r = paired_t_test([1.0, 2.0])
    assert r["p"] is None and r["t"] is None and "no test" in r["note"]
    assert r["mean"] == 1.5
    r = paired_t_test([0.5, 0.5, 0.5])
    assert r["p"] is None and "equal" in r["note"]
