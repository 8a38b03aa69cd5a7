"""The plot of complex word embeddings in the complex plane (Tamburini 2024, Figure 1)."""

from __future__ import annotations

import pytest
import torch

from complexformer.cmplxbert.analysis import embedding_components
from complexformer_lab.cmplxbert.embeddings import plot_embedding_scatter
from tests.cmplxbert.test_lora_analysis import _cmplx, _set_adapter

pytest.importorskip("transformers")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


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
