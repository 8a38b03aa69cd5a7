"""The extrapolation suite: perplexity against evaluation length, checked by hand."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

from complexformer.data import load_corpus, load_token_splits
from complexformer.evaluation.extrapolation import (
    ExtrapolationConfig,
    extrapolation_curve,
    run_extrapolation_suite,
    score_blocks,
)
from complexformer.lm import load_run
from complexformer.training import evaluate_perplexity

T = 64  # max_seq_len of the tiny runs


def _val_tokens(run, split="val") -> np.ndarray:
    corpus = load_corpus(run.train_config.data)
    return load_token_splits(corpus, run.tokenizer, splits=(split,), show_progress=False)[split]


@pytest.fixture(scope="module")
def suite(make_tiny_run, tmp_path_factory):
    """One suite call over four schemes (multipliers 1, 2, 4 on the val split)."""
    dirs = [make_tiny_run(s) for s in ("cmha", "rope", "alibi", "learned")]
    out = tmp_path_factory.mktemp("extrap")
    cfg = ExtrapolationConfig(
        multipliers=(4, 1, 2), max_tokens=441, batch_size=4, show_progress=False
    )
    return run_extrapolation_suite(dirs, cfg, out), out


def _by_scheme(payload):
    return {r["pos_scheme"]: {x["multiplier"]: x for x in r["results"]} for r in payload["runs"]}


def test_multiplier_one_equals_evaluate_perplexity(tiny_run):
    run = load_run(tiny_run)
    tokens = _val_tokens(run)
    p = 63 * 7  # (T - 1) divides P: the m = 1 blocks are exactly evaluate_perplexity's
    res = extrapolation_curve(run.model, tokens, (1,), max_tokens=p, batch_size=3)
    ref = evaluate_perplexity(run.model, tokens[: p + 1], T - 1, 3)
    row = res["results"][0]
    assert row["tokens"] == ref["tokens"] == p and row["blocks"] == ref["blocks"] == 7
    assert_close(row["loss"], ref["loss"], rtol=1e-12, atol=0)
    assert_close(row["ppl"], ref["ppl"], rtol=1e-12, atol=0)


@pytest.mark.parametrize("length", [64, 128, 256])
def test_mean_nll_equals_independent_block_loop(tiny_run, length):
    run = load_run(tiny_run)
    model, tokens = run.model, _val_tokens(run)
    p = 440
    res = score_blocks(model, tokens, length, p, batch_size=2)
    nll, count, seen = 0.0, 0, []
    with torch.no_grad():
        for s in range(0, p, length - 1):  # one block at a time, the last one shorter
            seg = torch.as_tensor(tokens[s : min(s + length, p + 1)].astype(np.int64))
            logits = model(seg[None]).logits[0, :-1].double()
            nll += float(F.cross_entropy(logits, seg[1:], reduction="sum"))
            count += len(seg) - 1
            seen += list(range(s + 1, s + len(seg)))
    assert seen == list(range(1, p + 1))  # every target scored once, whatever the length
    assert res["tokens"] == count == p
    assert_close(res["loss"], nll / count, rtol=1e-6, atol=0)
    assert_close(res["ppl"], math.exp(nll / count), rtol=1e-6, atol=0)


class _Bigram(nn.Module):
    """A context-free model: the logits at i depend on token i only."""

    def __init__(self, vocab: int, max_seq_len: int = 16) -> None:
        super().__init__()
        self.config = SimpleNamespace(max_seq_len=max_seq_len, pos_scheme="nope")
        self.emb = nn.Embedding(vocab, vocab)

    def forward(self, ids):
        return SimpleNamespace(logits=self.emb(ids))


@pytest.mark.parametrize("protocol", ["blocks", "last_window"])
def test_same_tokens_at_every_length(protocol):
    """With a context-free model the loss depends only on which targets are scored, so it
    must be identical at every length when the protocol scores the same tokens."""
    torch.manual_seed(0)
    model = _Bigram(50)
    tokens = np.random.default_rng(0).integers(0, 50, size=1000)
    res = extrapolation_curve(
        model, tokens, (1, 2, 4, 8), max_tokens=700, batch_size=3, protocol=protocol
    )
    losses = [r["loss"] for r in res["results"]]
    counts = {r["tokens"] for r in res["results"]}
    assert counts == {res["scored_tokens"]}
    assert res["scored_tokens"] == (700 if protocol == "blocks" else (700 // 128) * 15)
    assert_close(
        torch.tensor(losses, dtype=torch.float64),
        torch.full((4,), losses[0], dtype=torch.float64),
        rtol=1e-6,
        atol=0,
    )
    # independent value: mean NLL of the scored targets under the bigram table
    with torch.no_grad():
        logp = torch.log_softmax(model.emb.weight.double(), -1)
    if protocol == "blocks":
        targets = np.arange(1, 701)
    else:
        targets = np.concatenate([np.arange(e - 15, e) for e in (np.arange(5) + 1) * 128])
    ref = -logp[tokens[targets - 1], tokens[targets]].mean().item()
    assert_close(losses[0], ref, rtol=1e-6, atol=0)


def test_last_window_hand_check(tiny_run):
    run = load_run(tiny_run)
    model, tokens = run.model, _val_tokens(run)
    res = extrapolation_curve(model, tokens, (1, 2), max_tokens=400, protocol="last_window")
    assert res["windows"] == 3 and res["scored_tokens"] == 3 * 63
    for row, length in zip(res["results"], (64, 128), strict=True):
        nll = 0.0
        with torch.no_grad():
            for e in (128, 256, 384):
                seg = torch.as_tensor(tokens[e - length : e].astype(np.int64))
                logits = model(seg[None]).logits[0].double()
                nll += float(F.cross_entropy(logits[-64:-1], seg[-63:], reduction="sum"))
        assert_close(row["loss"], nll / (3 * 63), rtol=1e-6, atol=0)


def test_suite_schemes_and_learned(suite):
    payload, _ = suite
    assert payload["multipliers"] == [1, 2, 4]
    res = _by_scheme(payload)
    for scheme in ("cmha", "rope", "alibi"):
        for m in (1, 2, 4):
            r = res[scheme][m]
            assert r["length"] == m * T and r["tokens"] == 441 and r["reason"] is None
            assert math.isfinite(r["loss"]) and r["ppl"] > 1
            assert_close(r["ppl"], math.exp(r["loss"]), rtol=1e-12, atol=0)
    learned = res["learned"]
    assert math.isfinite(learned[1]["ppl"]) and learned[1]["tokens"] == 441
    for m in (2, 4):
        assert learned[m]["ppl"] is None and learned[m]["loss"] is None
        assert "learned" in learned[m]["reason"]


def test_suite_matches_direct_call(suite, make_tiny_run):
    payload, _ = suite
    run = load_run(make_tiny_run("rope"))
    direct = extrapolation_curve(run.model, _val_tokens(run), (1, 2, 4), 441, 4)
    got = _by_scheme(payload)["rope"]
    for row in direct["results"]:
        assert_close(got[row["multiplier"]]["loss"], row["loss"], rtol=1e-12, atol=0)


def test_suite_files(suite):
    payload, out = suite
    data = json.loads((out / "extrapolation.json").read_text())
    assert data["suite"] == "extrapolation" and len(data["runs"]) == 4
    assert data["runs"][3]["results"][1]["ppl"] is None  # learned at 2T
    assert len({r["name"] for r in data["runs"]}) == 4
    md = (out / "extrapolation.md").read_text()
    assert "| 1×T | 2×T | 4×T |" in md and "n/a" in md and "learned" in md
    png = (out / "extrapolation.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert set(payload["files"]) == {"json", "markdown", "png"}


def test_too_short_split_reports_reason(tiny_run):
    run = load_run(tiny_run)
    tokens = _val_tokens(run)[:150]
    res = extrapolation_curve(run.model, tokens, (1, 2, 4), max_tokens=10_000)
    rows = {r["multiplier"]: r for r in res["results"]}
    assert res["scored_tokens"] == 149
    assert rows[2]["loss"] is not None and rows[4]["loss"] is None
    assert "too few" in rows[4]["reason"]


@pytest.mark.parametrize(
    "kw",
    [
        dict(multipliers=()),
        dict(multipliers=(0, 1)),
        dict(multipliers=(1.5,)),
        dict(split="dev"),
        dict(protocol="sliding"),
        dict(max_tokens=0),
    ],
)
def test_config_validation(kw):
    with pytest.raises(ValueError):
        ExtrapolationConfig(**kw)
