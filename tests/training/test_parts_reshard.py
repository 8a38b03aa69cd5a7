"""Sharded checkpoints on another number of ranks: parts written by 2 sharded ranks resume in
one process, on 4 sharded ranks; an unsharded checkpoint resumes sharded; a damaged part is
named and the resume falls back to the previous complete checkpoint."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import torch.distributed as tdist

from complexformer.lm import train
from complexformer.models import GPTConfig
from complexformer.training import CheckpointError, TrainConfig, find_latest_checkpoint
from complexformer.training.checkpoint import verify_checkpoint
from tests.training.resilience_testlib import training_rows
from tests.training.test_loop_ddp import launch, train_command
from tests.training.training_testlib import REFERENCE_TRAIN

pytestmark = pytest.mark.skipif(
    not tdist.is_available() or not tdist.is_gloo_available(), reason="needs gloo"
)

#: 2 layers (two shard units below the root); checkpoints at 4, 8 and 12
MODEL = dict(vocab_size=300, n_layer=2, n_head=2, d_model=32, d_ff=64, max_seq_len=32)
TRAIN = {**REFERENCE_TRAIN}
STEPS = TRAIN["max_steps"]


def column(run_dir, key="train_loss") -> torch.Tensor:
    rows = training_rows(run_dir)
    assert sorted(rows) == list(range(1, STEPS + 1))
    return torch.tensor([rows[s][key] for s in range(1, STEPS + 1)], dtype=torch.float64)


@pytest.fixture(scope="module")
def sharded_run(tmp_path_factory, corpus_spec, session_cache):
    """A 2-rank sharded run of 12 steps; its folder is copied by each test."""
    mp = pytest.MonkeyPatch()
    mp.setenv("COMPLEXFORMER_CACHE", str(session_cache))
    try:
        out = tmp_path_factory.mktemp("sharded") / "run"
        launch(2, train_command(MODEL, TRAIN, out, corpus_spec) + ["--shard"])
    finally:
        mp.undo()
    return out


def rewind(src, dst, keep: int):
    """A copy of the run ``src`` whose checkpoints after ``keep`` and final model are gone."""
    shutil.copytree(src, dst)
    for p in (dst / "checkpoints").iterdir():
        if int(p.name.split("_")[1]) > keep:
            shutil.rmtree(p)
    shutil.rmtree(dst / "model")
    return dst


def test_a_damaged_part_is_named_and_resume_falls_back(sharded_run, corpus_spec, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(sharded_run, out)
    shutil.rmtree(out / "model")
    step12 = out / "checkpoints" / "step_0000012"
    part = step12 / "parts" / "shard-00002-model-00001-of-00001.safetensors"
    data = bytearray(part.read_bytes())
    data[-10] ^= 0xFF  # one flipped byte inside rank 1's tensors
    part.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="shard-00002-model-00001-of-00001.safetensors"):
        verify_checkpoint(step12)
    msgs: list[str] = []
    assert find_latest_checkpoint(out / "checkpoints", log=msgs.append).name == "step_0000008"
    assert any("skipping bad checkpoint" in m and "shard-00002" in m for m in msgs)

    # the resume names the file, falls back to step 8 and, in one unsharded process, reads
    # the parts of both ranks whole: the losses of the 2-rank run (another reduction order)
    msgs.clear()
    tc = TrainConfig(out_dir=str(out), data=corpus_spec, **TRAIN)
    summary = train(GPTConfig(**MODEL), tc, resume=True, log=msgs.append)
    assert summary["resumed_from"] == 8
    assert any("shard-00002-model-00001-of-00001.safetensors" in m for m in msgs)
    for key in ("train_loss", "grad_norm", "lr"):
        torch.testing.assert_close(
            column(out, key), column(sharded_run, key), rtol=1e-5, atol=0, msg=key
        )
    # the rewritten step 12 is unsharded and complete
    state = json.loads((step12 / "state.json").read_text())
    assert "sharded" not in state and (step12 / "model.safetensors").is_file()
    verify_checkpoint(step12)


@pytest.mark.slow
def test_parts_of_two_ranks_resume_on_four_sharded_ranks(sharded_run, corpus_spec, tmp_path):
    out = rewind(sharded_run, tmp_path / "run", keep=8)
    outputs = launch(4, train_command(MODEL, TRAIN, out, corpus_spec) + ["--shard", "--resume"])
    assert "step_0000008 (step 8)" in outputs[0] and "world size changed" in outputs[0]
    for key in ("train_loss", "grad_norm", "lr"):
        torch.testing.assert_close(
            column(out, key), column(sharded_run, key), rtol=1e-5, atol=0, msg=key
        )
    parts = sorted(p.name for p in (out / "checkpoints" / "step_0000012" / "parts").iterdir())
    assert len(parts) == 4  # written again by the four ranks


@pytest.mark.slow
def test_an_unsharded_checkpoint_resumes_sharded(corpus_spec, tmp_path):
    one = tmp_path / "one"
    train(GPTConfig(**MODEL), TrainConfig(out_dir=str(one), data=corpus_spec, **TRAIN), log=None)
    out = rewind(one, tmp_path / "run", keep=8)
    outputs = launch(2, train_command(MODEL, TRAIN, out, corpus_spec) + ["--shard", "--resume"])
    assert "step_0000008 (step 8)" in outputs[0]
    for key in ("train_loss", "grad_norm", "lr"):
        torch.testing.assert_close(column(out, key), column(one, key), rtol=1e-5, atol=0, msg=key)
    assert (out / "checkpoints" / "step_0000012" / "parts").is_dir()


@pytest.mark.slow
def test_async_checkpoints_equal_the_synchronous_ones(sharded_run, corpus_spec, tmp_path):
    from complexformer.training.parts import read_full

    out = tmp_path / "async"
    cmd = train_command(MODEL, {**TRAIN, "async_checkpoint": True}, out, corpus_spec)
    launch(2, cmd + ["--shard"])
    for key in ("train_loss", "grad_norm", "lr"):
        torch.testing.assert_close(column(out, key), column(sharded_run, key), rtol=0, atol=0)
    for step in ("step_0000008", "step_0000012"):
        verify_checkpoint(out / "checkpoints" / step)
        got = read_full(out / "checkpoints" / step / "parts")
        want = read_full(sharded_run / "checkpoints" / step / "parts")
        assert sorted(got) == sorted(want)
        for name in want:
            torch.testing.assert_close(got[name], want[name], rtol=0, atol=0, msg=name)
    assert not list((out / "checkpoints").glob(".tmp-*"))


@pytest.mark.slow
def test_activation_checkpointing_under_shard_gives_the_same_losses(
    sharded_run, corpus_spec, tmp_path
):
    out = tmp_path / "ac"
    cmd = train_command(MODEL, {**TRAIN, "activation_checkpointing": True}, out, corpus_spec)
    outputs = launch(2, cmd + ["--shard"])
    assert "activation checkpointing: 2 block(s)" in outputs[0]
    for key in ("train_loss", "grad_norm", "lr"):
        torch.testing.assert_close(column(out, key), column(sharded_run, key), rtol=0, atol=0)
