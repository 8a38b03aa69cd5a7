"""The heads suite: δ/b statistics, semantic share against the literal eq. 8, attention maps."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from complexformer.attention import SCHEMES, causal_mask, cmha_reference, rope_frequencies
from complexformer.lm import load_run
from complexformer.models import ComplexFormerLM, GPTConfig
from complexformer_lab.evaluation.heads import (
    HeadsConfig,
    adaptation_stats,
    attention_probabilities,
    head_score_measures,
    run_heads_suite,
    score_variants,
)
from tests.attention import toy_schemes_testlib as toys

V = 40


def make(scheme: str, seed: int = 0, n_layer: int = 2, spread: float = 0.8) -> ComplexFormerLM:
    torch.manual_seed(seed)
    cfg = GPTConfig(
        vocab_size=V,
        n_layer=n_layer,
        n_head=2,
        d_model=16,
        d_ff=32,
        max_seq_len=32,
        pos_scheme=scheme,
    )
    model = ComplexFormerLM(cfg).double().eval()
    with torch.no_grad():  # non-trivial adaptation, so that both terms matter
        for name, p in model.named_parameters():
            if name.endswith(("adapt_delta", "adapt_bias")):
                p.normal_(0.0, spread)
    return model


def t64(x) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64)


def ids(b: int = 2, t: int = 10, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (b, t), generator=torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------- the literal eq. 8
def capture_qkv(model, x_ids):
    """(q, k, v) per layer, from forward pre-hooks and the raw qkv projection."""
    inputs = []
    hooks = [
        b.attn.register_forward_pre_hook(lambda m, a: inputs.append(a[0])) for b in model.blocks
    ]
    with torch.no_grad():
        model(x_ids)
    for h in hooks:
        h.remove()
    out = []
    for block, x in zip(model.blocks, inputs, strict=True):
        a = block.attn
        bsz, t, _ = x.shape
        qkv = a.qkv(x).detach().reshape(bsz, t, 3, a.n_head, a.head_dim).permute(2, 0, 3, 1, 4)
        out.append((qkv[0], qkv[1], qkv[2]))
    return out


def literal_score(q, k, delta, bias, omega):
    """Eq. 1-8 with the (B, H, T, T, J) tensor; pairs (x[j], x[j + J]) ("halves")."""
    j = q.shape[-1] // 2
    lq, tq = torch.hypot(q[..., :j], q[..., j:]), torch.atan2(q[..., j:], q[..., :j])
    lk, tk = torch.hypot(k[..., :j], k[..., j:]), torch.atan2(k[..., j:], k[..., :j])
    as_mn = tq[:, :, :, None, :] - tk[:, :, None, :, :]  # eq. 5
    if delta.dim() == 1:
        delta, bias = delta.expand(q.shape[1], j), bias.expand(q.shape[1], j)
    adapt = delta[:, None, None, :] * as_mn + bias[:, None, None, :]  # eq. 7
    pos = torch.arange(q.shape[-2], dtype=q.dtype)
    dp = (pos[:, None] - pos[None, :])[..., None] * omega  # eq. 6
    return (lq[:, :, :, None] * lk[:, :, None] * torch.cos(adapt + dp)).sum(-1) / math.sqrt(2 * j)


def reference_measures(s, s_pos, s_sem):
    """The documented measures with explicit loops over heads and rows (numpy, float64)."""
    s, s_pos, s_sem = (x.numpy() for x in (s, s_pos, s_sem))
    bsz, h, t, _ = s.shape
    out = {k: np.zeros(h) for k in ("n", "np", "ns", "klp", "kls", "dist", "ent")}

    def softmax(r):
        e = np.exp(r - r.max())
        return e / e.sum()

    for hi in range(h):
        for b in range(bsz):
            for m in range(t):
                r, rp, rs = s[b, hi, m, : m + 1], s_pos[b, hi, m, : m + 1], s_sem[b, hi, m, : m + 1]
                out["n"][hi] += ((r - r.mean()) ** 2).sum()
                out["np"][hi] += (((r - rp) - (r - rp).mean()) ** 2).sum()
                out["ns"][hi] += (((r - rs) - (r - rs).mean()) ** 2).sum()
                if m == 0:
                    continue
                p, pp, ps = softmax(r), softmax(rp), softmax(rs)
                out["klp"][hi] += (p * np.log(p / pp)).sum()
                out["kls"][hi] += (p * np.log(p / ps)).sum()
                out["dist"][hi] += (p * (m - np.arange(m + 1))).sum()
                out["ent"][hi] += -(p * np.log(p)).sum()
    rows = bsz * (t - 1)
    return {
        "semantic_share": out["np"] / (out["np"] + out["ns"]),
        "rel_l2_no_semantic": np.sqrt(out["np"] / out["n"]),
        "rel_l2_no_position": np.sqrt(out["ns"] / out["n"]),
        "kl_no_semantic": out["klp"] / rows,
        "kl_no_position": out["kls"] / rows,
        "attention_distance": out["dist"] / rows,
        "attention_entropy": out["ent"] / rows,
    }


@pytest.mark.parametrize("scheme", ["cmha", "cmha_shared"])
def test_measures_match_literal_formula(scheme):
    model = make(scheme)
    x = ids()
    got = head_score_measures(model, x, batch_size=1)  # two batches: sums over blocks
    for layer, (q, k, v) in enumerate(capture_qkv(model, x)):
        a = model.blocks[layer].attn
        d, b = a.adapt_delta.detach(), a.adapt_bias.detach()
        omega = rope_frequencies(a.head_dim).double()
        s = literal_score(q, k, d, b, omega)
        # the literal score is the model's: its softmax reproduces cmha_reference
        mask = torch.ones(10, 10, dtype=torch.bool).tril()
        probs = torch.softmax(s.masked_fill(~mask, -math.inf), -1)
        ref_out = cmha_reference(q, k, v, d, b, omega=omega, layout="halves")
        assert_close(probs @ v, ref_out, rtol=1e-10, atol=1e-12)
        assert_close(score_variants(a, q, k)["full"], s, rtol=1e-10, atol=1e-12)
        s_pos = literal_score(q, k, torch.zeros_like(d), b, omega)  # δ = 0
        s_sem = literal_score(q, k, d, b, torch.zeros_like(omega))  # ω = 0
        ref = reference_measures(s, s_pos, s_sem)
        for key, val in ref.items():
            assert_close(
                t64(got[key][layer]), torch.from_numpy(val), rtol=1e-9, atol=1e-12, msg=key
            )
        share = np.array(got["semantic_share"][layer])
        assert np.all((share > 0.01) & (share < 0.99))  # both terms matter here


def test_closed_forms_delta_zero_and_omega_zero():
    model = make("cmha")
    x = ids()
    with torch.no_grad():
        for blk in model.blocks:
            blk.attn.adapt_delta.zero_()  # δ = 0: S is S_pos exactly
    got = head_score_measures(model, x)
    assert np.all(np.array(got["semantic_share"]) == 0.0)
    assert np.all(np.array(got["rel_l2_no_semantic"]) == 0.0)
    assert np.all(np.abs(np.array(got["kl_no_semantic"])) < 1e-15)
    assert np.all(np.array(got["rel_l2_no_position"]) > 0.05)

    model = make("cmha")
    for blk in model.blocks:
        blk.attn.omega.zero_()  # ω = 0: S is S_sem exactly
    got = head_score_measures(model, x)
    assert np.all(np.array(got["semantic_share"]) == 1.0)
    assert np.all(np.array(got["rel_l2_no_position"]) == 0.0)
    assert np.all(np.array(got["rel_l2_no_semantic"]) > 0.05)


def test_delta_and_bias_zero_is_pure_position():
    """δ = b = 0: S = Σ λq λk cos((m − n) ω), the share is 0 and S_pos = S."""
    model = make("cmha")
    with torch.no_grad():
        for blk in model.blocks:
            blk.attn.adapt_delta.zero_()
            blk.attn.adapt_bias.zero_()
    x = ids(1, 6)
    (q, k, _), *_ = capture_qkv(model, x)
    j = q.shape[-1] // 2
    lam = torch.hypot(q[..., :j], q[..., j:])[0, 0]
    lamk = torch.hypot(k[..., :j], k[..., j:])[0, 0]
    omega = rope_frequencies(2 * j).double()
    m = torch.arange(6.0, dtype=torch.float64)
    ref = (lam[:, None] * lamk[None] * torch.cos((m[:, None] - m)[..., None] * omega)).sum(-1)
    got = score_variants(model.blocks[0].attn, q, k)
    assert_close(got["full"][0, 0], ref / math.sqrt(2 * j), rtol=1e-10, atol=1e-12)
    assert_close(got["no_semantic"], got["full"], rtol=0, atol=0)
    assert np.all(np.array(head_score_measures(model, x)["semantic_share"]) == 0.0)


def test_cmha_fixed_equals_rope():
    rope = make("rope")
    fixed = make("cmha_fixed")
    fixed.load_state_dict(rope.state_dict())
    x = ids()
    a, b = head_score_measures(rope, x), head_score_measures(fixed, x)
    for key in a:
        assert_close(t64(a[key]), t64(b[key]), rtol=1e-8, atol=1e-12)
    assert np.all(np.array(a["semantic_share"]) > 0.0)


def test_other_schemes():
    x = ids()
    nope = head_score_measures(make("nope"), x)
    assert np.all(np.array(nope["semantic_share"]) == 1.0)
    for scheme in ("learned", "sinusoidal"):
        got = head_score_measures(make(scheme), x)
        assert got["semantic_share"] == [[None, None], [None, None]]
        assert all(v is not None for r in got["attention_entropy"] for v in r)
    alibi = make("alibi")
    (q, k, _), *_ = capture_qkv(alibi, x)
    sv = score_variants(alibi.blocks[0].attn, q, k)
    assert_close(sv["full"], sv["no_semantic"] + sv["no_position"], rtol=1e-12, atol=1e-12)
    dist = torch.arange(10.0)[:, None] - torch.arange(10.0)
    slopes = alibi.blocks[0].attn.slopes.double()
    assert_close(sv["no_semantic"][0], -slopes[:, None, None] * dist, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_attention_probabilities_are_the_models(scheme):
    model = make(scheme, n_layer=2)
    x = ids(2, 9)
    probs = attention_probabilities(model, x)
    assert sorted(probs) == [0, 1]
    outputs = []
    hooks = [
        b.attn.register_forward_hook(lambda m, a, o: outputs.append(o[0])) for b in model.blocks
    ]
    inputs = []
    hooks += [
        b.attn.register_forward_pre_hook(lambda m, a: inputs.append(a[0])) for b in model.blocks
    ]
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    for layer, p in probs.items():
        assert p.shape == (2, 2, 9, 9)
        assert_close(p.sum(-1), torch.ones(2, 2, 9, dtype=p.dtype), rtol=0, atol=1e-12)
        assert torch.all(p.triu(1) == 0)
        attn = model.blocks[layer].attn
        v = attn.qkv(inputs[layer]).reshape(2, 9, 3, 2, 8)[:, :, 2].transpose(1, 2)
        y = attn.proj((p @ v).transpose(1, 2).reshape(2, 9, 16))
        assert_close(y, outputs[layer], rtol=1e-9, atol=1e-11)  # P @ v is the layer's output
    assert list(attention_probabilities(model, x, layers=[1])) == [1]
    with pytest.raises(ValueError, match="out of range"):
        attention_probabilities(model, x, layers=[2])


# -------------------------------------------------------------------------- parameters
def test_adaptation_stats_match_parameters():
    model = make("cmha", n_layer=2)
    st = adaptation_stats(model, delta_threshold=0.5, bias_threshold=1.0)
    assert st["scheme"] == "cmha" and not st["shared"] and not st["fixed"]
    for layer, blk in enumerate(model.blocks):
        for key, p, thr in (
            ("delta", blk.attn.adapt_delta, 0.5),
            ("bias", blk.attn.adapt_bias, 1.0),
        ):
            a = p.detach().numpy()
            for h in range(2):
                row = a[h]
                ref = {
                    "mean": row.mean(),
                    "std": row.std(ddof=0),
                    "mean_abs": np.abs(row).mean(),
                    "min": row.min(),
                    "max": row.max(),
                    "frac_abs_gt": np.mean(np.abs(row) > thr),
                }
                for stat, val in ref.items():
                    assert_close(st[key][stat][layer][h], float(val), rtol=1e-12, atol=1e-15)
    assert 0 < st["delta"]["frac_abs_gt"][0][0] < 1  # the threshold splits N(0, 0.8²) values

    shared = adaptation_stats(make("cmha_shared"))
    assert shared["shared"]
    for stat in shared["delta"].values():
        assert all(r[0] == r[1] for r in stat)  # one vector per layer: the heads agree
    fixed = adaptation_stats(make("cmha_fixed"))
    assert fixed["fixed"] and fixed["delta"]["mean"] == [[1.0, 1.0]] * 2
    assert fixed["bias"]["max"] == [[0.0, 0.0]] * 2
    assert adaptation_stats(make("rope")) is None


# -------------------------------------------------------------------------- the suite
@pytest.fixture(scope="module")
def heads_out(tiny_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("heads")
    cfg = HeadsConfig(num_blocks=3, prompt="the cat sat on a mat", show_progress=False)
    return run_heads_suite(tiny_run, cfg, out), out


def test_suite_files_and_values(heads_out, tiny_run):
    payload, out = heads_out
    for name in (
        "heads_delta.png",
        "heads_bias.png",
        "heads_semantic_share.png",
        "attention_maps.png",
    ):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 3000, name
    disk = json.loads((out / "heads.json").read_text())
    assert disk["run"]["pos_scheme"] == "cmha" and disk["data"]["blocks"] == 3
    md = (out / "heads.md").read_text()
    assert "semantic share" in md and r"mean \|δ\|" in md
    run = load_run(tiny_run)
    assert payload["adaptation"] == adaptation_stats(run.model, 0.1, 0.1)
    # the measures are those of the chosen blocks
    from complexformer.data import load_corpus, load_token_splits

    toks = load_token_splits(
        load_corpus(run.train_config.data), run.tokenizer, splits=("val",), show_progress=False
    )["val"]
    starts = payload["data"]["starts"]
    assert len(set(starts)) == 3 and all(s % 64 == 0 for s in starts)
    blocks = torch.as_tensor(np.stack([toks[s : s + 64] for s in starts]).astype(np.int64))
    ref = head_score_measures(run.model, blocks)
    for key, val in ref.items():
        assert_close(t64(payload["scores"][key]), t64(val), rtol=1e-9, atol=1e-12)
    am = np.load(out / "attention_maps.npz")
    assert am["ids"].tolist() == run.tokenizer.encode("the cat sat on a mat")
    p = am["probs"]  # (layers, H, T, T)
    assert_close(torch.from_numpy(p.sum(-1)), torch.ones(p.shape[:-1]), rtol=0, atol=1e-5)
    assert np.all(np.triu(p, 1) == 0)


def test_suite_reproducible_and_non_cmha(heads_out, tiny_run, make_tiny_run, tmp_path):
    payload, _ = heads_out
    again = run_heads_suite(
        tiny_run, HeadsConfig(num_blocks=3, show_progress=False, prompt="the cat sat on a mat")
    )
    assert again["data"]["starts"] == payload["data"]["starts"]
    assert again["scores"] == payload["scores"] and again["files"] == {}
    rope = run_heads_suite(
        make_tiny_run("rope"), HeadsConfig(num_blocks=2, layers=(0,), show_progress=False), tmp_path
    )
    assert rope["adaptation"] is None
    assert not (tmp_path / "heads_delta.png").exists()
    assert (tmp_path / "attention_maps.png").is_file()
    assert rope["attention_maps"]["source"].startswith("data block")
    assert all(0 < v < 1 for r in rope["scores"]["semantic_share"] for v in r)


@pytest.mark.parametrize(
    "kw", [dict(num_blocks=0), dict(split="dev"), dict(block_len=1), dict(delta_threshold=-1.0)]
)
def test_config_validation(kw):
    with pytest.raises(ValueError):
        HeadsConfig(**kw)


# ------------------------------------------------- a scheme added by a user is analysed too
@pytest.fixture
def registered_toys():
    with toys.registered_toys():
        yield
    assert not set(toys.TOYS) & set(SCHEMES)


@pytest.mark.parametrize("scheme", toys.TOYS)
def test_the_analysis_separates_the_terms_of_a_toy_scheme(registered_toys, scheme):
    model = toys.make(scheme)
    torch.manual_seed(1)
    q, k = torch.randn(2, 2, 2, 9, 8, dtype=torch.float64).unbind(0)
    got = score_variants(model.blocks[0].attn, q, k)
    for key, want in toys.literal_scores(scheme, q, k).items():
        assert_close(got[key], want, msg=key)
    meas = head_score_measures(model, torch.randint(0, toys.V, (3, 16)))
    for row in meas["semantic_share"]:
        assert all(v is not None and 0.0 <= v <= 1.0 for v in row), meas["semantic_share"]


@pytest.mark.parametrize("scheme", toys.TOYS)
def test_attention_probabilities_of_a_toy_scheme_are_the_literal_ones(registered_toys, scheme):
    model = toys.make(scheme)
    x = torch.randint(0, toys.V, (1, 12))
    probs = attention_probabilities(model, x, layers=[0])[0]
    h = model.blocks[0].ln1(model.wte(x))  # layer 0's input (pre-norm, no absolute positions)
    q, k, _ = model.blocks[0].attn.project_qkv(h)
    s = toys.literal_scores(scheme, q, k)["full"]
    mask = causal_mask(12, 12)
    assert_close(probs, torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1))
