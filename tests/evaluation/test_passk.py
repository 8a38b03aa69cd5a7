"""The unbiased pass@k estimator (Chen et al. 2021) against brute-force enumeration."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
import torch

from complexformer.evaluation.passk import estimate_pass_at_k, mean_pass_at_k, pass_at_k


def _brute_force(n: int, c: int, k: int) -> float:
    """Fraction of the k-subsets of n samples (the first c correct) with a correct one."""
    subsets = list(itertools.combinations(range(n), k))
    hits = sum(any(i < c for i in s) for s in subsets)
    return hits / len(subsets)


@pytest.mark.parametrize("n", range(1, 9))
def test_matches_enumeration_of_all_k_subsets(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            torch.testing.assert_close(
                pass_at_k(n, c, k),
                _brute_force(n, c, k),
                rtol=0,
                atol=1e-12,
                msg=f"n={n} c={c} k={k}",
            )


def test_closed_form_edge_cases():
    for n in (1, 5, 100, 200):
        for k in (1, 10, 100):
            if k > n:
                continue
            assert pass_at_k(n, 0, k) == 0.0
            assert pass_at_k(n, n, k) == 1.0
            for c in range(max(0, n - k + 1), n + 1):  # n - c < k: every subset hits
                assert pass_at_k(n, c, k) == 1.0
        for c in range(n + 1):  # pass@1 is the fraction correct
            torch.testing.assert_close(pass_at_k(n, c, 1), c / n, rtol=0, atol=1e-12)


def test_stable_for_large_n():
    # 1 - C(n-c, k)/C(n, k) with exact integers vs the product form, where the binomials
    # overflow floats (C(1000, 500) ~ 1e299)
    for n, c, k in [(200, 3, 100), (1000, 1, 500), (1000, 17, 10), (1000, 990, 5)]:
        exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
        torch.testing.assert_close(pass_at_k(n, c, k), float(exact), rtol=1e-12, atol=1e-12)


def test_vector_and_mean():
    got = estimate_pass_at_k(4, [0, 1, 4], 2)
    want = [0.0, 0.5, 1.0]  # C(3,2)/C(4,2) = 1/2
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    assert estimate_pass_at_k([4, 2], [1, 1], 1) == [0.25, 0.5]
    m = mean_pass_at_k([(4, 1), (2, 1)], (1, 2, 10))
    assert set(m) == {"pass@1", "pass@2"}  # k=10 > n: not reported
    torch.testing.assert_close(m["pass@1"], (0.25 + 0.5) / 2, rtol=0, atol=1e-12)
    torch.testing.assert_close(m["pass@2"], (0.5 + 1.0) / 2, rtol=0, atol=1e-12)
    assert mean_pass_at_k([], (1,)) == {}


@pytest.mark.parametrize(
    ("n", "c", "k", "match"),
    [
        (4, 1, 5, "k=5"),
        (4, 1, 0, "k=0"),
        (4, 5, 1, "c .*got 5"),
        (0, 0, 1, "n .*got 0"),
        (4, -1, 1, "got -1"),
        (4.0, 1, 1, "n must be an int"),
    ],
)
def test_bad_arguments(n, c, k, match):
    with pytest.raises(ValueError, match=match):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError, match="entries"):
        estimate_pass_at_k([4, 4], [1], 1)


@pytest.mark.parametrize("name", ["n", "c", "k"])
def test_non_int_arguments_are_named(name):
    good = {"n": 4, "c": 1, "k": 2}
    for bad in (True, 2.0, "2"):  # a bool is an int to isinstance, but not a sample count
        with pytest.raises(ValueError, match=f"^{name} must be an int, got {bad!r}$"):
            pass_at_k(**{**good, name: bad})
    with pytest.raises(ValueError, match="^k must be an int, got 1.0$"):
        mean_pass_at_k([(4, 1)], (1.0,))


def test_messages_name_the_bound():
    with pytest.raises(ValueError, match=r"^n \(samples\) must be >= 1, got 0$"):
        pass_at_k(0, 0, 1)
    with pytest.raises(ValueError, match=r"^c \(correct samples\) must be in \[0, n=4\], got 5$"):
        pass_at_k(4, 5, 1)
    with pytest.raises(
        ValueError, match=r"^k must be in \[1, n=4\] \(pass@k needs at least k samples\), got k=5$"
    ):
        pass_at_k(4, 1, 5)
    with pytest.raises(ValueError, match="^num_samples has 2 entries for 1 num_correct entries$"):
        estimate_pass_at_k([4, 4], [1], 1)
