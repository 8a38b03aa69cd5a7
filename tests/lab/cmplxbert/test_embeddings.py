"""The complex word embeddings in the complex plane (Tamburini 2024, Figure 1): the sampled
components against the effective complex weight, the imaginary energy share in closed form,
and the scatter plot."""

from __future__ import annotations

import pytest
import torch

from complexformer.cmplxbert import ComplexLoRAConfig, complexify
from complexformer_lab.cmplxbert.embeddings import (
    embedding_components,
    imaginary_energy_share,
    plot_embedding_scatter,
)
from tests.cmplxbert.lora_testlib import tiny_model

pytest.importorskip("transformers")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _cmplx(**kw):
    return complexify(tiny_model("BertModel"), ComplexLoRAConfig(r=4), **kw)


def _set_adapter(model, seed: int = 3) -> None:
    emb = model.bert.embeddings.word_embeddings
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # both factors non-zero (a fresh adapter has A = 0)
        emb.lora_A.copy_(0.3 * torch.randn(emb.lora_A.shape, generator=g))
        emb.lora_B.copy_(0.3 * torch.randn(emb.lora_B.shape, generator=g))


def test_fresh_model_has_zero_imaginary_share():
    z = embedding_components(_cmplx(), n=500, seed=0)
    assert z.is_complex() and z.shape == (500,)
    assert torch.equal(z.imag, torch.zeros_like(z.imag))
    assert imaginary_energy_share(z) == 0.0


def test_components_match_the_effective_complex_weight():
    model = _cmplx(alpha=8.0)  # s = 2
    _set_adapter(model)
    emb = model.bert.embeddings.word_embeddings
    w = emb.base_layer.weight
    full = torch.complex(w, torch.zeros_like(w)) + emb.delta_weight()  # E + s·A·Bᴴ
    n = full.numel()
    z = embedding_components(model, n=n, seed=1)  # every entry, in a random order
    for part in (torch.real, torch.imag):  # the same multiset of values
        torch.testing.assert_close(
            torch.sort(part(z)).values,
            torch.sort(part(full).flatten()).values,
            rtol=1e-5,
            atol=1e-6,
        )
    # and entry by entry for a sample, with the same flat indices as the function
    idx = torch.randperm(n, generator=torch.Generator().manual_seed(5))[:300]
    torch.testing.assert_close(
        embedding_components(model, n=300, seed=5), full.flatten()[idx], rtol=1e-5, atol=1e-6
    )


def test_share_grows_with_the_adapter():
    model = _cmplx()
    assert imaginary_energy_share(embedding_components(model, n=1000)) == 0.0
    _set_adapter(model)
    s1 = imaginary_energy_share(embedding_components(model, n=1000))
    assert 0.0 < s1 < 1.0
    with torch.no_grad():
        model.bert.embeddings.word_embeddings.lora_B.mul_(3.0)
    s2 = imaginary_energy_share(embedding_components(model, n=1000))
    assert s2 > s1


def test_share_closed_form():
    z = torch.tensor([3 + 4j, 1 - 2j, -2 + 0j, 0 + 1j], dtype=torch.complex64)
    # Im²: 16 + 4 + 0 + 1 = 21; |z|²: 25 + 5 + 4 + 1 = 35
    assert imaginary_energy_share(z) == pytest.approx(21 / 35, rel=1e-12)
    assert imaginary_energy_share(z.reshape(2, 2)) == pytest.approx(0.6)
    assert imaginary_energy_share(torch.tensor([2j, -1j])) == pytest.approx(1.0)
    assert imaginary_energy_share(torch.tensor([1.0, -2.0])) == 0.0
    assert imaginary_energy_share(torch.zeros(3, dtype=torch.complex64)) == 0.0


def test_sampling_is_deterministic_for_a_seed():
    model = _cmplx()
    _set_adapter(model)
    a = embedding_components(model, n=200, seed=7)
    b = embedding_components(model, n=200, seed=7)
    c = embedding_components(model, n=200, seed=8)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    # also accepts the embedding layer itself; n above num·dim returns every entry
    emb = model.bert.embeddings.word_embeddings
    assert torch.equal(embedding_components(emb, n=200, seed=7), a)
    assert embedding_components(emb, n=10**6).numel() == 99 * 32


def test_bad_arguments():
    with pytest.raises(ValueError, match="n must be"):
        embedding_components(_cmplx(), n=0)
    with pytest.raises(ValueError, match="ComplexLoRAEmbedding"):
        embedding_components(torch.nn.Linear(2, 2))


def test_scatter_png_is_written(tmp_path):
    model = _cmplx()
    _set_adapter(model)
    z = embedding_components(model, n=300)
    out = plot_embedding_scatter(z, tmp_path / "sub" / "fig1.png", title="CmplxBERTLoRA_4")
    assert out == tmp_path / "sub" / "fig1.png"
    data = out.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 1000
    assert [p.name for p in out.parent.iterdir()] == ["fig1.png"]  # no temp file left
    # overwriting works (atomic replace) and a real tensor is accepted
    plot_embedding_scatter(torch.randn(50), out)
    assert out.read_bytes()[:8] == PNG_SIGNATURE
