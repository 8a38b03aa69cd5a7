"""``--shard`` (FSDP2) for the retrofit and the CmplxBERT MLM under two gloo processes: the
first 20 losses equal those of the same command in one process (same global batch, float32).

The retrofit shards a small random Llama with GQA (4 query heads, 2 KV heads) whose base
parameters are frozen; the MLM shards a tiny random BERT without dropout (each rank draws its
own dropout masks) whose masks are drawn for the global batch under ``--shard``."""

from __future__ import annotations

import json
import sys

import pytest
import torch
import torch.distributed as tdist

from complexformer.cli import main
from tests.cmplxbert.lora_testlib import save_tiny_bert_dir, write_docstring_corpus
from tests.retrofit.retrofit_testlib import build_tiny_base
from tests.training.test_loop_ddp import launch, step_losses
from tests.training.training_testlib import write_corpus

pytestmark = pytest.mark.skipif(
    not tdist.is_available() or not tdist.is_gloo_available(), reason="needs gloo"
)

STEPS = 20
TRAIN = dict(
    max_steps=STEPS,
    batch_size=4,
    eval_every=10,
    eval_blocks=4,
    save_every=10,
    log_every=1,
    seed=0,
    device="cpu",
    num_threads=1,
    grad_clip=0.5,
)


def losses(run_dir, key="train_loss") -> torch.Tensor:
    rows = step_losses(run_dir)
    assert sorted(rows) == list(range(1, STEPS + 1))
    return torch.tensor([rows[s][key] for s in range(1, STEPS + 1)], dtype=torch.float64)


def compare(one, shard, clip: float) -> None:
    for key in ("train_loss", "grad_norm", "lr"):
        torch.testing.assert_close(losses(shard, key), losses(one, key), rtol=1e-5, atol=0, msg=key)
    assert (losses(one, "grad_norm") > clip).any()  # clipping changes the run
    got = json.loads((shard / "summary.json").read_text())
    want = json.loads((one / "summary.json").read_text())
    assert got["val_loss"] == pytest.approx(want["val_loss"], rel=1e-5)


def run_both(args: list[str], tmp_path, monkeypatch):
    """``args`` (without --out) in this process, then under two ranks with --shard."""
    monkeypatch.setenv("COMPLEXFORMER_CACHE", str(tmp_path / "cache"))
    one, shard = tmp_path / "one", tmp_path / "shard"
    assert main([*args, "--out", str(one)]) == 0
    cmd = [sys.executable, "-m", "complexformer", *args, "--out", str(shard), "--shard"]
    outputs = launch(2, cmd)
    assert "sharded" in outputs[0]
    return one, shard


def test_sharded_retrofit_of_a_gqa_llama_matches_one_process(tmp_path, monkeypatch):
    base = build_tiny_base(tmp_path / "llama", "llama", kv_heads=2)
    corpus = write_corpus(tmp_path / "corpus", n_lines=800)
    train = {**TRAIN, "lr": 0.05, "weight_decay": 0.1, "grad_clip": 3e-4}
    args = ["retrofit", "--base", str(base), "--data", corpus, "--seq-len", "32"]
    args += ["--set", *(f"train.{k}={json.dumps(v)}" for k, v in train.items())]
    one, shard = run_both(args, tmp_path, monkeypatch)
    compare(one, shard, train["grad_clip"])
    # the adaptation (δ and b of every layer) is written as a single process writes it
    from safetensors.torch import load_file

    got = load_file(shard / "model" / "adaptation.safetensors")
    want = load_file(one / "model" / "adaptation.safetensors")
    assert sorted(got) == sorted(want) and any("cmha_delta" in k for k in want)
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-4, atol=1e-6)


def test_sharded_cmplxbert_mlm_matches_one_process(tmp_path, monkeypatch):
    base = save_tiny_bert_dir(
        tmp_path / "bert", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    corpus = write_docstring_corpus(tmp_path / "corpus.jsonl")
    train = {**TRAIN, "lr": 1e-3, "warmup_frac": 0.25}
    args = ["cbert-complexify", "--base", str(base), "--data", corpus, "--seq-len", "32"]
    args += ["--rank", "2", "--lora-dropout", "0"]
    args += ["--set", *(f"train.{k}={json.dumps(v)}" for k, v in train.items())]
    one, shard = run_both(args, tmp_path, monkeypatch)
    compare(one, shard, train["grad_clip"])
