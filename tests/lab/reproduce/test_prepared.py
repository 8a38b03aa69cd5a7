"""``reproduce`` and its ladder with ``--data prepared:DIR`` and the source deleted: the runs
train on the prepared shards and are evaluated on them (perplexity, the text suite's prompts,
extrapolation) with the numbers of the same reproduction on the source itself."""

from __future__ import annotations

import json
import shutil

import torch

from complexformer.data.prepare import prepare_corpus
from complexformer.training import read_metrics
from complexformer_lab.reproduce import ReproduceConfig, reproduce
from complexformer_lab.reproduce.ladder import LadderConfig, run_ladder
from tests.common_testlib import write_corpus

VOCAB = 300  # the micro scale's and the micro ladder's


def _prepared_without_source(tmp_path) -> tuple[str, str]:
    """The spec of a new source corpus and the ``prepared:`` spec of its prepared folder."""
    source = write_corpus(tmp_path / "src", n_lines=800)
    folder = prepare_corpus(source, tmp_path / "prep", vocab_size=VOCAB, workers=1)
    return source, f"prepared:{folder}"


def _trained_on(out) -> list[str]:
    return [json.loads(f.read_text())["data"] for f in sorted(out.rglob("train_config.json"))]


def _train_losses(run_dir) -> torch.Tensor:
    return torch.tensor([r["train_loss"] for r in read_metrics(run_dir / "metrics.jsonl")])


def test_reproduce_on_a_prepared_folder_without_its_source(micro_scale, tmp_path, monkeypatch):
    monkeypatch.setenv("COMPLEXFORMER_CACHE", str(tmp_path / "cache"))
    source, prepared = _prepared_without_source(tmp_path)

    def run(out, data):
        config = ReproduceConfig(
            out=str(out),
            tables=("4",),
            scale=micro_scale,
            seeds=(0,),
            data=data,
            evaluator="none",
            threads=1,
            device="cpu",
            only=("rope/seed0",),
        )
        (res,) = reproduce(config, log=None)["runs"]
        return res

    want = run(tmp_path / "direct", source)
    shutil.rmtree(tmp_path / "src")  # the source is gone
    got = run(tmp_path / "prepared", prepared)
    torch.testing.assert_close(
        _train_losses(tmp_path / "prepared" / "runs" / "rope" / "seed0"),
        _train_losses(tmp_path / "direct" / "runs" / "rope" / "seed0"),
        rtol=0,
        atol=0,
    )
    for key in ("val_loss", "test_loss", "num_prompts", "dist_1", "dist_2", "rep_4"):
        assert got[key] == want[key], key
    assert got["num_prompts"] > 0
    assert _trained_on(tmp_path / "prepared") == [prepared]


def test_the_ladder_on_a_prepared_folder_without_its_source(micro_ladder, tmp_path, monkeypatch):
    monkeypatch.setenv("COMPLEXFORMER_CACHE", str(tmp_path / "cache"))
    source, prepared = _prepared_without_source(tmp_path)

    def run(out, data):
        config = LadderConfig(
            out=out, scale=micro_ladder, seeds=(0,), data=data, only=("a/rope",), threads=1
        )
        (res,) = run_ladder(config, log=None)["results"]
        return res

    want = run(tmp_path / "direct", source)
    shutil.rmtree(tmp_path / "src")  # the source is gone
    got = run(tmp_path / "prepared", prepared)
    assert _trained_on(tmp_path / "prepared") == [prepared]
    assert got["steps"] == want["steps"] > 0
    assert got["val_loss"] == want["val_loss"] and got["val_ppl"] == want["val_ppl"]
    assert got["extrapolation"] == want["extrapolation"] and set(got["extrapolation"]) == {"1", "2"}
