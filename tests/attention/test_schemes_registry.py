"""The scheme registry and the behaviour the built-in scheme objects declare."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from complexformer.attention import (
    SCHEMES,
    CausalSelfAttention,
    PositionalScheme,
    describe_schemes,
    get_scheme,
    register_scheme,
    registered_scheme,
    unregister_scheme,
)
from complexformer.attention.registry import scheme_max_length
from complexformer.attention.schemes import modulus_pairs
from complexformer.models import ComplexFormerLM, GPTConfig

BUILTIN = ("cmha", "cmha_shared", "cmha_fixed", "rope", "learned", "sinusoidal", "alibi", "nope")


def test_builtin_names_and_help_text():
    assert tuple(SCHEMES)[: len(BUILTIN)] == BUILTIN
    text = describe_schemes()
    for name in BUILTIN:
        assert f"  {name}" in text and get_scheme(name).description in text


def test_unknown_name_lists_known_and_suggests_closest():
    with pytest.raises(ValueError, match=r"unknown positional scheme 'alibbi'; known: cmha.*"):
        get_scheme("alibbi")
    with pytest.raises(ValueError, match=r"\(did you mean 'alibi'\?\)"):
        get_scheme("alibbi")
    with pytest.raises(ValueError, match="unknown positional scheme 'zzz'"):
        unregister_scheme("zzz")


def test_register_decorator_unregister_and_errors():
    before = list(SCHEMES)

    @register_scheme
    class Plain(PositionalScheme):
        name = "toy_plain"

    assert isinstance(get_scheme("toy_plain"), Plain) and Plain.name == "toy_plain"
    with pytest.raises(ValueError, match="'toy_plain' is already registered"):
        register_scheme(Plain())
    assert isinstance(unregister_scheme("toy_plain"), Plain)
    assert list(SCHEMES) == before
    with pytest.raises(TypeError, match="expects a PositionalScheme"):
        register_scheme(object())
    with pytest.raises(ValueError, match="non-empty name"):
        PositionalScheme()


def test_registered_scheme_context_cleans_up_on_error():
    with pytest.raises(RuntimeError), registered_scheme(PositionalScheme("toy_ctx")):
        assert "toy_ctx" in SCHEMES
        raise RuntimeError
    assert "toy_ctx" not in SCHEMES


def test_declared_behaviour_of_builtins():
    phases = {n for n in BUILTIN if get_scheme(n).has_phases}
    rotates = {n for n in BUILTIN if get_scheme(n).rotates}
    assert phases == {"cmha", "cmha_shared", "cmha_fixed"}
    assert rotates == phases | {"rope"}
    assert {n for n in BUILTIN if get_scheme(n).biases} == {"alibi"}
    assert {n for n in BUILTIN if get_scheme(n).embeds_tokens} == {"learned", "sinusoidal"}
    assert [get_scheme(n).adapt for n in ("cmha", "cmha_shared", "cmha_fixed")] == [
        "head",
        "shared",
        "fixed",
    ]
    assert get_scheme("alibi").score_terms == ("semantic", "bias")
    assert get_scheme("nope").score_terms == ("semantic",)
    assert get_scheme("learned").score_terms == () == get_scheme("sinusoidal").score_terms
    cfg = GPTConfig(vocab_size=10, max_seq_len=48, pos_scheme="learned")
    assert [get_scheme(n).max_length(cfg) for n in BUILTIN] == [None] * 4 + [48] + [None] * 3
    assert scheme_max_length(cfg) == 48 and scheme_max_length(object()) is None
    assert get_scheme("cmha").describe_adaptation(4, 32) == "4 heads x J=16"
    assert get_scheme("cmha_shared").describe_adaptation(4, 32) == "J=16 shared"
    assert get_scheme("cmha_fixed").describe_adaptation(4, 32) is None


def test_validation_happens_in_the_scheme():
    with registered_scheme(PositionalScheme("toy_valid")) as toy:
        toy.rotates = True
        with pytest.raises(ValueError, match=r"= 3 must be even for pos_scheme 'toy_valid'"):
            GPTConfig(d_model=12, n_head=4, pos_scheme="toy_valid")
        with pytest.raises(ValueError, match=r"= 3 must be even for pos_scheme 'toy_valid'"):
            CausalSelfAttention(12, 4, "toy_valid")
        with pytest.raises(ValueError, match=r"pcl=True needs a cmha scheme.*'toy_valid'"):
            GPTConfig(pcl=True, pos_scheme="toy_valid")
    with pytest.raises(ValueError, match=r"pcl=True needs a cmha scheme.*'alibi'"):
        CausalSelfAttention(16, 2, "alibi", pcl=True)
    GPTConfig(d_model=12, n_head=4, pos_scheme="alibi")  # no rotation: odd D is fine


def test_modulus_pairs_literal():
    x = torch.randn(2, 5, 6, dtype=torch.float64)
    got = modulus_pairs(x)
    lam = torch.sqrt(x[..., :3] ** 2 + x[..., 3:] ** 2)  # pairs (x[j], x[j + J])
    assert_close(got, torch.cat((lam, torch.zeros_like(lam)), dim=-1))


def test_absolute_embeddings_at_an_offset():
    torch.manual_seed(0)
    for name in ("learned", "sinusoidal"):
        cfg = GPTConfig(vocab_size=10, d_model=6, n_head=2, max_seq_len=32, pos_scheme=name)
        model = ComplexFormerLM(cfg)
        x = torch.randn(2, 4, 6)
        got = model.scheme.embed(model, x, 7)
        p = torch.arange(7, 11, dtype=torch.float64)[:, None]
        i = torch.arange(3, dtype=torch.float64)[None, :]
        ang = p / 10000.0 ** (2 * i / 6)  # PE[p, 2i] = sin, PE[p, 2i + 1] = cos
        pe = torch.stack((torch.sin(ang), torch.cos(ang)), dim=-1).flatten(-2).float()
        want = x + model.wpe.weight[7:11] if name == "learned" else x * math.sqrt(6) + pe
        assert_close(got, want)


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_rotate_qk_equals_rotate(name):
    """The joint rotation of queries and keys (one pass for RoPE) gives exactly what rotating
    each gives, for every registered scheme, values and gradients."""
    torch.manual_seed(0)
    attn = CausalSelfAttention(32, 2, name)
    with torch.no_grad():
        for pname, p in attn.named_parameters():
            if pname.startswith("adapt_"):
                p.normal_(0.5, 0.5)  # a CMHA rotation far from RoPE's
    qk = torch.randn(2, 3, 2, 7, 16, requires_grad=True)
    q1, k1 = attn.scheme.rotate_qk(attn, qk, 5)
    (q1.sum() * 2 + k1.square().sum()).backward()
    g1 = qk.grad.clone()
    qk.grad = None
    q2, k2 = attn.scheme.rotate(attn, qk[0], qk[1], 5)
    (q2.sum() * 2 + k2.square().sum()).backward()
    torch.testing.assert_close(q1, q2, rtol=0, atol=0)
    torch.testing.assert_close(k1, k2, rtol=0, atol=0)
    torch.testing.assert_close(g1, qk.grad, rtol=0, atol=0)


def test_rope_tables_kept_on_the_layer_equal_fresh_ones():
    """The layer's cached tables (views for steps, one-row views for decoding) equal tables
    computed for the positions, across growth of the table, an in-place change of omega and a
    change of dtype."""
    from complexformer.attention.rotary import rope_tables

    attn = CausalSelfAttention(32, 2, "rope")
    scheme, x = attn.scheme, torch.zeros(1, 2, 1, 16)

    def check(offset, t, x=x):
        cos, sin = scheme.tables(attn, offset, t, x)
        want = rope_tables(offset, t, attn.omega, x.device, cos.dtype, "halves")
        assert cos.shape == (t, 16)
        assert_close(cos, want[0], rtol=0, atol=0)
        assert_close(sin, want[1], rtol=0, atol=0)

    check(0, 4)  # the table is built for 4 positions
    for pos in range(4, 40):  # decoding steps: the table grows (doubling) under them
        check(pos, 1)
    check(3, 20)
    with torch.no_grad():
        attn.omega.mul_(0.5)  # changed in place: rebuilt
    check(7, 1)
    check(2, 5)
    check(9, 1, x.double())  # another dtype: rebuilt in float64
