"""Complex LoRA layers at their edges: ranks of zero and one, distinct ranks, other dtypes
and devices, the messages and defaults, the cache policy and the adapters' initialisation.

The numbers are checked against y = (W + s·A·Bᴴ)·x + (b + b_c), or the table E + s·A·Bᴴ,
written with complex float64 tensors: the planar rows of the embedding for a rank of one,
1-D and 3-D indices and adapters wider than the base; the inference path of
planar_lora_linear with inputs of another dtype than the layers, a lone rank-0 layer and
two distinct ranks; its weights made on the input's device; the layers' repr.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from complexformer.cmplxbert import ComplexLoRAEmbedding, ComplexLoRALinear, planar


def _randomise(layer, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in (layer.lora_A, layer.lora_B, getattr(layer, "bias_c", None)):
            if p is not None:
                p.copy_(0.3 * torch.randn(p.shape, generator=g, dtype=torch.float64))


S = 1.5  # the scale s = alpha / r of the layers of _layers


def _reference(layer, z):
    """(W + s·A·Bᴴ)·z + b + b_c in complex float64 (s = S, as _layers makes it)."""
    w = layer.base_layer.weight.detach().to(torch.complex128)
    if layer.r > 0:
        a = torch.view_as_complex(layer.lora_A.detach().double())
        b = torch.view_as_complex(layer.lora_B.detach().double())
        w = w + S * a @ b.conj().T
    y = z.to(torch.complex128) @ w.T
    if layer.base_layer.bias is not None:
        y = y + layer.base_layer.bias.detach().double()
    if layer.bias_c is not None:
        y = y + torch.view_as_complex(layer.bias_c.detach().double())
    return y


def _rows(z):
    """complex (..., n) -> planar rows (..., 2, n)."""
    return torch.stack((z.real, z.imag), -2)


def _layers(ranks, n_in=6, dtype=torch.float32):
    layers = []
    for i, r in enumerate(ranks):
        torch.manual_seed(20 + i)
        base = nn.Linear(n_in, 3 + i, bias=i != 1)
        m = ComplexLoRALinear(base, r=r, alpha=S * (r or 1), complex_bias=i != 2)
        if r:
            _randomise(m, seed=30 + i)
        elif m.bias_c is not None:
            with torch.no_grad():
                m.bias_c.copy_(
                    torch.randn(m.bias_c.shape, generator=torch.Generator().manual_seed(i))
                )
        layers.append(m.to(dtype))
    return layers


def _input(n_in=6, seed=5):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, n_in, dtype=torch.complex128, generator=g)


def test_linear_extra_repr_names_every_setting():
    layer = ComplexLoRALinear(nn.Linear(3, 4), r=2, alpha=3.0)
    assert layer.extra_repr() == (
        "in_features=3, out_features=4, r=2, alpha=3, init='zero_b', merged=False, "
        "complex_bias=True"
    )
    bare = ComplexLoRALinear(nn.Linear(3, 4), r=0, complex_bias=False, init="zero_a")
    assert bare.extra_repr().endswith("init='zero_a', merged=False, complex_bias=False")


def _naive_table(layer, s):
    """E + s·A·Bᴴ as a complex float64 table."""
    e = layer.base_layer.weight.detach().to(torch.complex128)
    a = torch.view_as_complex(layer.lora_A.detach().double())
    b = torch.view_as_complex(layer.lora_B.detach().double())
    return e + s * a @ b.conj().T


def test_embedding_planar_forward_rank_one_and_any_index_shape():
    """Rank 1 has an adapter; 1-D and 3-D indices (where dimension 2 is not dimension -2 of
    the merged rows) give (..., 2, dim) rows, merged and unmerged."""
    torch.manual_seed(3)
    layer = ComplexLoRAEmbedding(nn.Embedding(9, 5, padding_idx=0), r=1, alpha=2.0)
    _randomise(layer, seed=6)
    table = _naive_table(layer, 2.0)  # s = alpha / r = 2 / 1
    for idx in (torch.tensor([3, 0, 8, 3]), torch.tensor([[[1, 2], [7, 0]], [[4, 4], [5, 6]]])):
        want = _rows(table[idx])
        for merged in (False, True):
            if merged:
                layer.merge()
            rows = layer.planar_forward(idx)
            assert rows.shape == idx.shape + (2, 5) and rows.dtype == torch.float32
            assert_close(rows.double(), want, atol=1e-6, rtol=1e-6)
            layer.unmerge()


@pytest.mark.parametrize("grad", [True, False])
def test_embedding_planar_forward_in_the_base_dtype(grad):
    """Adapters kept wider (float64) than the frozen base (float32): the rows are in the
    base's dtype, the adapter part cast to it."""
    torch.manual_seed(4)
    layer = ComplexLoRAEmbedding(nn.Embedding(7, 4), r=2, alpha=3.0).double()
    layer.base_layer.float()
    _randomise(layer, seed=8)
    idx = torch.tensor([[1, 6, 2], [0, 0, 5]])
    with torch.set_grad_enabled(grad):
        rows = layer.planar_forward(idx)
    assert rows.dtype == torch.float32 and rows.shape == (2, 3, 2, 4)
    assert_close(rows.double(), _rows(_naive_table(layer, 1.5)[idx]), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize(
    "x_dtype,layer_dtype", [(torch.float64, torch.float32), (torch.float32, torch.float64)]
)
def test_planar_inference_casts_the_weights_to_the_input_dtype(x_dtype, layer_dtype):
    """Without autograd, layers of one dtype on planar rows of another: the result is in the
    input's dtype and equals the formula (the layers' parameters cast to it)."""
    layers = _layers((2, 0, 1), dtype=layer_dtype)
    z = _input()
    x = _rows(z).to(x_dtype)
    with torch.no_grad():
        y = planar.planar_lora_linear(layers, x)
    assert y.dtype == x_dtype and y.shape == (2, 3, 2, 3 + 4 + 5)
    want = _rows(torch.cat([_reference(m, x[..., 0, :] + 1j * x[..., 1, :]) for m in layers], -1))
    tol = 1e-12 if x_dtype == torch.float64 else 1e-5
    assert_close(y.double(), want, atol=tol, rtol=tol)


@pytest.mark.parametrize("ranks", [(0,), (3,), (2, 1), (1, 2, 2), (0, 0)])
def test_planar_inference_of_one_layer_and_of_two_distinct_ranks(ranks):
    """A lone layer (rank 0: the base weight alone; rank 3) and groups with two distinct
    ranks (built one layer at a time) equal the formula, in float64."""
    layers = _layers(ranks, dtype=torch.float64)
    z = _input(seed=len(ranks))
    with torch.no_grad():
        y = planar.planar_lora_linear(layers, _rows(z))
    want = _rows(torch.cat([_reference(m, z) for m in layers], -1))
    assert_close(y, want, atol=1e-12, rtol=1e-12)


def test_planar_inference_weights_are_made_on_the_input_device():
    """The meta device stands in for an accelerator: the extended weight, the blocks and
    the identity of the bias columns are made on the input's device (a CPU identity would
    be copied to the device at every call)."""
    meta = torch.device("meta")
    layers = [m.to(meta) for m in _layers((2, 0, 1))]
    x = torch.zeros(2, 3, 2, 6, device=meta)
    with torch.no_grad():
        y = planar.planar_lora_linear(layers, x)
    assert y.device == meta and y.shape == (2, 3, 2, 12)
    w, blocks, eye = layers[0]._planar_cache["inference"][1]
    assert w.device == meta and eye.device == meta and eye.dtype == torch.float32
    assert all(blk[4].device == meta for blk in blocks)
    w, blocks, eye = planar._ext_weights(layers, torch.float64, meta)
    assert eye.device == meta and eye.dtype == torch.float64 and eye.shape == (2, 1, 2)


def test_embedding_forward_masks_the_padding_row_of_a():
    """The complex forward (not only planar_forward) gives A's padding row no gradient,
    and the other rows theirs: E + s·A·Bᴴ looked up, then the gradient of a fixed linear
    function of the output."""
    torch.manual_seed(5)
    layer = ComplexLoRAEmbedding(nn.Embedding(8, 4, padding_idx=3), r=2, alpha=5.0)
    _randomise(layer, seed=9)
    idx = torch.tensor([[3, 1, 3], [6, 1, 0]])
    y = layer(idx)
    assert_close(y.to(torch.complex128), _naive_table(layer, 2.5)[idx], atol=1e-6, rtol=1e-6)
    g = torch.randn(y.shape, dtype=y.dtype, generator=torch.Generator().manual_seed(3))
    (y * g).real.sum().backward()
    assert torch.equal(layer.lora_A.grad[3], torch.zeros(2, 2))
    assert all(layer.lora_A.grad[i].abs().sum() > 0 for i in (0, 1, 6))


def test_embedding_rank_zero_names_a_table_it_cannot_lift():
    """A rank-0 wrapper lifts the base lookup to complex; an integer table cannot be, and
    the message names the layer and the embedding."""
    base = nn.Embedding.from_pretrained(torch.arange(6).view(3, 2))
    with pytest.raises(ValueError) as err:
        ComplexLoRAEmbedding(base, r=0)(torch.tensor([0, 2]))
    assert str(err.value) == (
        "ComplexLoRAEmbedding: embedding must be a complex (complex64/complex128) or real "
        "floating tensor, got dtype torch.int64"
    )


def test_defaults_of_both_layers():
    """r = 8, alpha = r (s = 1), no dropout, B = 0 at init, a complex bias on the linear."""
    lin = ComplexLoRALinear(nn.Linear(5, 3))
    assert (lin.r, lin.alpha, lin.scaling, lin.dropout, lin.init) == (8, 8.0, 1.0, 0.0, "zero_b")
    assert lin.lora_A.shape == (3, 8, 2) and lin.lora_B.shape == (5, 8, 2)
    assert lin.bias_c.shape == (3, 2) and not lin.merged
    emb = ComplexLoRAEmbedding(nn.Embedding(6, 4))
    assert (emb.r, emb.alpha, emb.scaling, emb.init) == (8, 8.0, 1.0, "zero_b")
    assert emb.lora_A.shape == (6, 8, 2) and emb.lora_B.shape == (4, 8, 2)
    assert emb.bias_c is None and torch.equal(emb.lora_B, torch.zeros(4, 8, 2))


@pytest.mark.parametrize("kind", ["linear", "embedding"])
def test_constructor_messages_name_the_layer(kind):
    """Every check of the arguments, with the layer's name and the value in the message."""
    cls = ComplexLoRALinear if kind == "linear" else ComplexLoRAEmbedding
    where = cls.__name__
    base = nn.Linear(3, 4) if kind == "linear" else nn.Embedding(3, 4)
    other = nn.Embedding(3, 4) if kind == "linear" else nn.Linear(3, 4)
    want = (
        "torch.nn.Linear, got Embedding" if kind == "linear" else "torch.nn.Embedding, got Linear"
    )
    cases = [
        ((other,), {}, f"{where}: base_layer must be a {want}"),
        ((base,), {"r": -1}, f"{where}: r must be an integer >= 0 (0 = no adapter), got -1"),
        ((base,), {"r": True}, f"{where}: r must be an integer >= 0 (0 = no adapter), got True"),
        ((base,), {"r": 2.0}, f"{where}: r must be an integer >= 0 (0 = no adapter), got 2.0"),
        ((base,), {"alpha": 0.0}, f"{where}: alpha must be > 0 or None, got 0.0"),
        ((base,), {"alpha": -1}, f"{where}: alpha must be > 0 or None, got -1"),
        (
            (base,),
            {"init": "zeros"},
            f"{where}: unknown init 'zeros'; allowed: 'zero_b', 'zero_a'",
        ),
    ]
    if kind == "linear":
        cases += [
            ((base,), {"dropout": 1.0}, f"{where}: dropout must be in [0, 1), got 1.0"),
            ((base,), {"dropout": -0.1}, f"{where}: dropout must be in [0, 1), got -0.1"),
        ]
    for args, kw, message in cases:
        with pytest.raises(ValueError) as err:
            cls(*args, **kw)
        assert str(err.value) == message
    # the bounds themselves are allowed
    cls(base, r=0)
    cls(base, r=1, alpha=1e-9)
    if kind == "linear":
        assert cls(base, dropout=0.0).dropout == 0.0 and cls(base, dropout=0.99).dropout == 0.99


def test_linear_forward_messages():
    layer = ComplexLoRALinear(nn.Linear(3, 4), r=2)
    with pytest.raises(ValueError) as err:
        layer(torch.zeros(2, 3, dtype=torch.int64))
    assert str(err.value) == (
        "ComplexLoRALinear: input must be a complex (complex64/complex128) or real floating "
        "tensor, got dtype torch.int64"
    )
    with pytest.raises(ValueError) as err:
        layer(torch.zeros(2, 4, 5, dtype=torch.complex64))
    assert str(err.value) == (
        "ComplexLoRALinear: last dimension of the input is 5, expected in_features=3"
    )


@pytest.mark.parametrize(
    "x_dtype,layer_dtype", [(torch.complex128, torch.float32), (torch.complex64, torch.float64)]
)
@pytest.mark.parametrize("merged", [False, True])
def test_linear_forward_is_in_the_input_dtype(x_dtype, layer_dtype, merged):
    """A layer of one dtype on a complex input of the other: the output is in the input's
    dtype, merged or not, and equals the formula."""
    (layer,) = _layers((2,), dtype=layer_dtype)
    if merged:
        layer.merge()
    z = _input(seed=11)
    y = layer(z.to(x_dtype))
    assert y.dtype == x_dtype and y.shape == (2, 3, 3)
    tol = 1e-6 if torch.float32 in (layer_dtype, x_dtype.to_real()) else 1e-12
    assert_close(y.to(torch.complex128), _reference(layer, z.to(x_dtype)), atol=tol, rtol=tol)


@pytest.mark.parametrize("r", [1, 2])
def test_linear_adapter_dropout_in_training(r):
    """Training with dropout p: the adapter sees x with one mask per complex entry, drawn as
    planar_dropout draws it (Bernoulli(1 - p) / (1 - p)); the base and the biases see x."""
    (layer,) = _layers((r,), dtype=torch.float64)
    layer.dropout = 0.5
    layer.train()
    z = _input(seed=12)
    torch.manual_seed(7)
    y = layer(z)
    torch.manual_seed(7)
    mask = torch.empty(2, 3, 1, 6, dtype=torch.float64).bernoulli_(0.5).div_(0.5)[..., 0, :]
    a = torch.view_as_complex(layer.lora_A.detach())
    b = torch.view_as_complex(layer.lora_B.detach())
    base = layer.base_layer
    want = z @ base.weight.detach().T.to(z.dtype) + base.bias.detach()
    want = want + S * (z * mask) @ (a @ b.conj().T).T
    want = want + torch.view_as_complex(layer.bias_c.detach())
    assert_close(y.detach(), want, atol=1e-12, rtol=1e-12)
    assert not torch.allclose(mask, torch.ones_like(mask))  # some entries were dropped
    layer.eval()
    assert_close(layer(z).detach(), _reference(layer, z), atol=1e-12, rtol=1e-12)


def test_inference_weights_follow_an_update_of_any_layer():
    """Without autograd the stacked weights of several layers are cached; an in-place update
    of the first layer (not only of the last) is seen at the next call."""
    layers = _layers((2, 1), dtype=torch.float64)
    z = _input(seed=13)
    with torch.no_grad():
        planar.planar_lora_linear(layers, _rows(z))
        layers[0].lora_A.mul_(-2.0)
        layers[0].base_layer.bias.add_(1.0)
        y = planar.planar_lora_linear(layers, _rows(z))
    want = _rows(torch.cat([_reference(m, z) for m in layers], -1))
    assert_close(y, want, atol=1e-12, rtol=1e-12)


def test_cached_keeps_a_value_only_while_no_gradient_can_flow():
    """_cached's policy: without autograd (or with every parameter frozen or absent) a value
    is built once and kept until a parameter changes in place or ``extra`` changes; with a
    trainable parameter under autograd it is built at every call and nothing is kept (a
    value kept before is dropped, so the next call without autograd builds again)."""
    layers = _layers((2,))
    p = layers[0].lora_A
    builds = []

    def build():
        builds.append(1)
        return len(builds)

    def cached(params, extra=(1,)):
        return planar._cached(layers, "test", params, extra, build)

    with torch.no_grad():
        assert cached([p, None]) == 1 and cached([p, None]) == 1  # built once, then kept
        assert cached([p, None], extra=(2,)) == 2  # another key
        p.add_(1.0)  # an in-place update: a new version
        assert cached([p, None], extra=(2,)) == 3 and cached([p, None], extra=(2,)) == 3
    assert cached([p, None], extra=(2,)) == 4  # autograd and a trainable parameter
    assert cached([p, None], extra=(2,)) == 5  # built at every call
    with torch.no_grad():
        assert cached([p, None], extra=(2,)) == 6  # the value kept before was dropped
    frozen = layers[0].base_layer.weight  # requires_grad False
    assert cached([frozen, None]) == 7 and cached([frozen, None]) == 7  # under autograd too


@pytest.mark.parametrize("where", ["dtype", "device"])
def test_adapters_are_made_like_the_base_weight(where):
    """Every adapter parameter (A, B, the complex bias) has the base weight's dtype and
    device (the meta device stands in for an accelerator)."""
    kw = {"dtype": torch.float64} if where == "dtype" else {"device": torch.device("meta")}
    lin = ComplexLoRALinear(nn.Linear(5, 3, **kw), r=2)
    emb = ComplexLoRAEmbedding(nn.Embedding(6, 4, **kw), r=2)
    for p in (lin.lora_A, lin.lora_B, lin.bias_c, emb.lora_A, emb.lora_B):
        assert getattr(p, where) == getattr(lin.base_layer.weight, where)
    assert lin.bias_c.shape == (3, 2)


def test_rank_zero_has_no_factors_and_no_scale():
    for layer in (
        ComplexLoRALinear(nn.Linear(5, 3), r=0, alpha=4.0),
        ComplexLoRAEmbedding(nn.Embedding(6, 4), r=0, alpha=4.0),
    ):
        assert layer.lora_A is None and layer.lora_B is None
        assert layer.complex_A is None and layer.delta_weight() is None
        assert (layer.r, layer.alpha, layer.scaling) == (0, 4.0, 0.0)
        assert [n for n, p in layer.named_parameters() if p.requires_grad] == (
            ["bias_c"] if isinstance(layer, ComplexLoRALinear) else []
        )


@pytest.mark.parametrize("r", [1, 4])
@pytest.mark.parametrize("init", ["zero_b", "zero_a"])
def test_reset_adapter_draws_the_documented_init(r, init):
    """``zero_b``: B = 0, A ~ CN(0, 1/r); ``zero_a``: A = 0, B ~ CN(0, 1/in) (E|a|² is the
    variance, here estimated from 400·r draws), also for r = 1; the complex bias is 0."""
    torch.manual_seed(r)
    layer = ComplexLoRALinear(nn.Linear(400, 400), r=r, init=init)
    zero, drawn = (layer.lora_B, layer.lora_A) if init == "zero_b" else (layer.lora_A, layer.lora_B)
    assert torch.equal(zero, torch.zeros_like(zero))
    var = 1.0 / r if init == "zero_b" else 1.0 / 400
    power = drawn.detach().pow(2).sum(-1).mean().item()  # mean |a|²
    assert abs(power / var - 1.0) < 0.15
    assert torch.equal(layer.bias_c, torch.zeros(400, 2))


def test_merged_weight_is_a_non_persistent_buffer():
    """While merged, W + s·A·Bᴴ is the buffer ``merged_weight``: moved and cast with the
    module, never saved in the state dict."""
    (layer,) = _layers((2,))
    layer.merge()
    assert "merged_weight" in dict(layer.named_buffers())
    assert "merged_weight" not in layer.state_dict()
    layer.to(torch.float64)
    assert layer.merged_weight.dtype == torch.float64
    z = _input(seed=14)
    assert_close(layer(z), _reference(layer, z), atol=1e-6, rtol=1e-6)


def test_reset_adapter_after_training_and_merging():
    """reset_adapter on a trained, merged layer: the complex bias back to 0, B = 0, the
    layer unmerged (``merged`` is False again, also in its repr) and equal to its base."""
    (layer,) = _layers((2,))
    layer.merge()
    assert layer.merged is True and "merged=True" in layer.extra_repr()
    layer.reset_adapter()
    assert layer.merged is False and layer.merged_weight is None
    assert "merged=False" in layer.extra_repr()
    assert torch.equal(layer.bias_c, torch.zeros(3, 2))
    assert torch.equal(layer.lora_B, torch.zeros(6, 2, 2))
    z = _input(seed=15)
    assert_close(layer(z), _reference(layer, z), atol=1e-6, rtol=1e-6)
    base = layer.base_layer
    assert_close(layer(z), z @ base.weight.detach().T.to(z.dtype) + base.bias.detach().double())
