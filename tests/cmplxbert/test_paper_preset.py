"""The paper preset (Tamburini 2024): its whitening against an eigen-decomposition C^(-1/2)
in float64, the single-linear heads against the Hugging Face layers they wrap, and
``--preset paper`` on the command line."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from complexformer.cmplxbert import CmplxBertConfig, ComplexLoRAConfig
from complexformer.cmplxbert.config import TRAINING
from complexformer.nn import functional as CF
from tests.cmplxbert.lora_testlib import batch, tiny_model

F64 = torch.float64


def eigen_whiten(z: torch.Tensor, eps: float) -> torch.Tensor:
    """(Re, Im) of z - mean times C^(-1/2), C the 2x2 covariance over the last dim plus eps·I,
    from torch.linalg.eigh: V diag(λ^(-1/2)) Vᵀ, token by token."""
    c = z - z.mean(-1, keepdim=True)
    u = torch.stack((c.real, c.imag), -2)  # (..., 2, F)
    cov = u @ u.transpose(-2, -1) / z.shape[-1] + eps * torch.eye(2, dtype=F64)
    lam, vec = torch.linalg.eigh(cov)
    inv_sqrt = vec @ torch.diag_embed(lam.rsqrt()) @ vec.transpose(-2, -1)
    return inv_sqrt @ u  # (..., 2, F)


def test_paper_configs_state_the_papers_choices():
    c = CmplxBertConfig.paper()
    assert (c.attention_score, c.head_output, c.whiten, c.heads) == (
        "modulus",
        "modulus",
        "full",
        "linear",
    )
    assert CmplxBertConfig.paper(whiten="scalar").whiten == "scalar"
    a = ComplexLoRAConfig.paper(16)
    assert (a.r, a.scaling, a.complex_bias, a.init) == (16, 1.0, True, "zero_b")
    assert CmplxBertConfig.paper().start == "paper"
    assert CmplxBertConfig.paper().activation == "split" and CmplxBertConfig().activation == "gated"
    paper = TRAINING["paper"]
    assert paper["mlm"]["batch_size"] == 512 and paper["mlm"]["lr"] == 1e-4
    assert paper["mlm"]["schedule"] == "linear" and paper["mlm"]["warmup_frac"] == 0.01
    assert paper["finetune"] == {"lr": 1e-4, "epochs": 2, "base_lr_ratio": 1.0}
    with pytest.raises(ValueError, match="heads.*'bert', 'linear'"):
        CmplxBertConfig(heads="pooler")


@pytest.mark.parametrize("eps", [1e-12, 1e-5])
def test_paper_whitening_equals_an_eigendecomposition_inverse_square_root(eps):
    g = torch.Generator().manual_seed(0)
    re = torch.randn(4, 6, 16, generator=g, dtype=F64)
    im = 0.3 * re + 0.5 * torch.randn(4, 6, 16, generator=g, dtype=F64)  # correlated
    z = torch.complex(re, im) + 0.7
    w = torch.randn(16, 2, 2, generator=g, dtype=F64)
    b = torch.randn(16, 2, generator=g, dtype=F64)
    ref = eigen_whiten(z, eps)
    whiten = CmplxBertConfig.paper().whiten
    planar = CF.planar_layer_norm(
        torch.stack((re, im), -2) + torch.tensor([[0.7], [0.0]]), None, None, eps, whiten
    )
    assert_close(planar, ref, atol=1e-10, rtol=1e-10)
    cov = ref @ ref.transpose(-2, -1) / 16  # whitened: I - eps·C⁻¹, the identity up to eps
    assert_close(cov, torch.eye(2, dtype=F64).expand_as(cov), atol=1e-8 + 50 * eps, rtol=0)
    out = CF.layer_norm(z, (16,), w, b, eps, whiten)  # the complex form, with the affine
    want = torch.einsum("frs,...sf->...rf", w, ref) + b.t()
    assert_close(torch.stack((out.real, out.imag), -2), want, atol=1e-10, rtol=1e-10)


def test_complexify_with_the_paper_config_uses_full_whitening_everywhere():
    pytest.importorskip("transformers")
    from complexformer.cmplxbert import complexify
    from complexformer.nn import LayerNorm

    cb = complexify(
        tiny_model("BertForMaskedLM"), ComplexLoRAConfig.paper(4), CmplxBertConfig.paper()
    )
    norms = [m for m in cb.modules() if isinstance(m, LayerNorm)]
    assert len(norms) == 1 + 2 * 2 and all(m.whiten == "full" for m in norms)  # no head norm
    assert cb.cls.predictions.transform is None and cb.bert.pooler is None


def test_linear_mlm_head_in_real_mode_equals_the_hf_decoder_on_the_hidden_states():
    pytest.importorskip("transformers")
    from complexformer.cmplxbert import complexify

    hf = tiny_model("BertForMaskedLM")
    ids, mask, tt = batch()
    with torch.no_grad():
        h = hf.bert(ids, attention_mask=mask, token_type_ids=tt).last_hidden_state
        want = hf.cls.predictions.decoder(h)  # the tied decoder and its bias, no transform
        cb = complexify(hf, attention_score="real", head_output="real", heads="linear")
        got = cb(ids, attention_mask=mask, token_type_ids=tt).logits
    assert_close(got, want, atol=2e-5, rtol=1e-4)
    cb = complexify(
        tiny_model("BertForMaskedLM"), attention_score="real", heads="linear", start="paper"
    )
    with torch.no_grad():  # the paper's modulus head: |decoder(h)| on the real model's h
        got = cb(ids, attention_mask=mask, token_type_ids=tt).logits
    assert_close(got, want.abs(), atol=2e-5, rtol=1e-4)


def test_linear_classification_head_reads_the_first_tokens_hidden_state():
    pytest.importorskip("transformers")
    from complexformer.cmplxbert import complexify

    hf = tiny_model("BertForSequenceClassification", num_labels=3)
    ids, mask, tt = batch()
    with torch.no_grad():
        h = hf.bert(ids, attention_mask=mask, token_type_ids=tt).last_hidden_state
        want = hf.classifier(h[:, 0])  # no pooler
        cb = complexify(hf, attention_score="real", head_output="real", heads="linear").eval()
        out = cb(ids, attention_mask=mask, token_type_ids=tt)
    assert out.pooler_output is None
    assert_close(out.logits, want, atol=2e-5, rtol=1e-4)


def _parse(*argv: str):
    from complexformer.cli import build_parser

    return build_parser().parse_args(list(argv))


def test_cli_paper_recipe_fills_what_is_unset_and_a_given_option_wins():
    from complexformer.cmplxbert.cli import complexify_configs, finetune_config

    base = ["cbert-complexify", "--base", "minilm", "--data", "stdlib", "--out", "o"]
    lora, model, tc = complexify_configs(_parse(*base, "--recipe", "paper"))
    assert (model.whiten, model.heads, model.attention_score, model.head_output) == (
        "full",
        "linear",
        "modulus",
        "modulus",
    )
    assert (tc.lr, tc.warmup_frac, tc.batch_size, tc.schedule) == (1e-4, 0.01, 512, "linear")
    assert lora.init == "zero_b"
    argv = [*base, "--recipe", "paper", "--whiten", "scalar", "--batch-size", "64"]
    lora, model, tc = complexify_configs(_parse(*argv, "--set", "lora.alpha=16", "eval_every=7"))
    assert (model.whiten, model.heads, tc.batch_size) == ("scalar", "linear", 64)
    assert (lora.alpha, tc.eval_every) == (16, 7)
    lora, model, tc = complexify_configs(_parse(*base))
    assert (model.whiten, model.heads, tc.lr, tc.warmup_frac, tc.batch_size) == (
        "scalar",
        "bert",
        1e-4,
        0.1,
        32,
    )
    assert (lora.init, model.start, model.activation) == ("zero_a", "keep", "gated")
    ft = finetune_config(_parse("cbert-finetune", "--base", "minilm", "--recipe", "paper"))
    assert (ft.epochs, ft.lr, ft.model.whiten, ft.model.heads) == (2, 1e-4, "full", "linear")
    ft = finetune_config(_parse("cbert-finetune", "--base", "minilm", "--rank", "4"))
    assert (ft.lr, ft.base_lr_ratio, ft.lora.r) == (1e-3, 0.3, 4)


def test_library_defaults_are_the_python_defaults():
    """The command line without options builds what the Python API builds by default."""
    from complexformer.cmplxbert.cli import finetune_config
    from complexformer.cmplxbert.finetune import FinetuneConfig

    assert finetune_config(_parse("cbert-finetune", "--base", "minilm")) == FinetuneConfig()


def test_set_names_the_config_when_a_key_is_shared_or_unknown():
    from complexformer.cmplxbert.cli import complexify_configs

    base = ["cbert-complexify", "--base", "minilm", "--data", "stdlib", "--out", "o"]
    with pytest.raises(ValueError, match="dropout"):
        complexify_configs(_parse(*base, "--set", "dropuot=0.1"))
    with pytest.raises(ValueError, match="lora.*train|train.*lora"):
        complexify_configs(_parse(*base, "--set", "seed=1", "bogus.x=1"))
