"""``trabelsi_`` draws Trabelsi et al.'s law: Rayleigh modulus, uniform phase, independent.

Checked by moments against the closed forms (Re and Im: mean 0, variance sigma^2,
uncorrelated; E|W|^4 = 8 sigma^4), by the Kolmogorov-Smirnov distance of the modulus to the
Rayleigh CDF and of the phase to the uniform one, by the independence of modulus and phase,
and against complextorch's own polar sampler (two-sample KS distance of the moduli).
"""

from __future__ import annotations

import math

import pytest
import torch

from complexformer.nn.init import rayleigh_sigma, trabelsi_


def _ks(sample: torch.Tensor, cdf) -> float:
    """sup |F_n - F| of a 1-D float64 sample against ``cdf``."""
    x, _ = sample.sort()
    n = len(x)
    f = cdf(x)
    i = torch.arange(1, n + 1, dtype=torch.float64)
    return float(torch.maximum(i / n - f, f - (i - 1) / n).max())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", ["glorot", "he"])
def test_trabelsi_moments_and_laws(kind, dtype):
    g = torch.Generator().manual_seed(0)
    w = trabelsi_(torch.empty(600, 400, 2, dtype=dtype), kind, generator=g)
    assert w.dtype == dtype
    sigma = rayleigh_sigma(400, 600, kind)
    re, im = w[..., 0].double().flatten(), w[..., 1].double().flatten()
    n = re.numel()
    se = sigma / math.sqrt(n)  # standard error of a mean
    assert abs(float(re.mean())) < 5 * se and abs(float(im.mean())) < 5 * se
    for part in (re, im):  # variance sigma^2 (se of the variance: sigma^2 sqrt(2/n))
        assert abs(float((part**2).mean()) / sigma**2 - 1) < 5 * math.sqrt(2 / n)
    assert abs(float((re * im).mean())) / sigma**2 < 5 / math.sqrt(n)
    r2 = re**2 + im**2
    assert abs(float(r2.mean()) / (2 * sigma**2) - 1) < 0.01  # E|W|^2 = 2 sigma^2
    assert abs(float((r2**2).mean()) / (8 * sigma**4) - 1) < 0.02  # E|W|^4 = 8 sigma^4
    # the laws: Rayleigh modulus, uniform phase (KS distance; 1.63/sqrt(n) is p = 0.01)
    sub = torch.randperm(n, generator=torch.Generator().manual_seed(1))[:50_000]
    mod, phase = r2[sub].sqrt(), torch.atan2(im[sub], re[sub])
    crit = 1.63 / math.sqrt(len(sub))
    assert _ks(mod, lambda r: 1 - torch.exp(-(r**2) / (2 * sigma**2))) < crit
    assert _ks(phase, lambda t: (t + math.pi) / (2 * math.pi)) < crit
    # independence: the modulus does not change with the phase's half-plane
    upper = phase > 0
    assert abs(float(mod[upper].mean() / mod[~upper].mean()) - 1) < 0.02


def test_trabelsi_is_reproducible_and_matches_complextorch_in_law():
    ct_init = pytest.importorskip("complextorch.nn.init")
    a = trabelsi_(torch.empty(300, 200, 2), generator=torch.Generator().manual_seed(3))
    b = trabelsi_(torch.empty(300, 200, 2), generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    torch.manual_seed(0)
    theirs = ct_init.trabelsi_standard_(torch.empty(300, 200, dtype=torch.complex64))
    mine = torch.view_as_complex(a).abs().double().flatten().sort().values
    other = theirs.abs().double().flatten().sort().values
    # two-sample KS distance of the moduli (1.63 sqrt(2/n) is p = 0.01)
    both = torch.cat([mine, other]).sort().values
    fa = torch.searchsorted(mine, both, right=True) / len(mine)
    fb = torch.searchsorted(other, both, right=True) / len(other)
    assert float((fa - fb).abs().max()) < 1.63 * math.sqrt(2 / len(mine))
