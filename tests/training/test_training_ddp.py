"""Two-process gloo DDP (``complexformer train`` under torchrun's environment): same losses as
one process with the same global batch; its checkpoints resume in a single process."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest
import torch
import torch.distributed as tdist

from complexformer.lm import load_run, train
from complexformer.models import GPTConfig
from complexformer.training import TrainConfig, read_metrics
from tests.training.training_testlib import REFERENCE_MODEL, REFERENCE_TRAIN

pytestmark = pytest.mark.skipif(
    not tdist.is_available() or not tdist.is_gloo_available(), reason="needs gloo"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_command(model: dict, train: dict, out, data: str) -> list[str]:
    """``python -m complexformer train`` with the tiny preset set to ``model`` and ``train``."""
    sets = [f"model.{k}={json.dumps(v)}" for k, v in model.items()]
    sets += [f"train.{k}={json.dumps(v)}" for k, v in train.items()]
    cmd = [sys.executable, "-m", "complexformer", "train", "--preset", "tiny", "--out", str(out)]
    return cmd + ["--data", data, "--sample-tokens", "0", "--set", *sets]


def launch(world: int, cmd: list[str], timeout=240):
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(
            os.environ,
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_WORLD_SIZE=str(world),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            OMP_NUM_THREADS="1",
            GLOO_SOCKET_IFNAME="lo",
        )
        procs.append(
            subprocess.Popen(
                cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        )
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=timeout)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for rank, (p, text) in enumerate(zip(procs, outputs, strict=True)):
        assert p.returncode == 0, f"rank {rank} failed:\n{text[-4000:]}"
    return outputs


def step_losses(run_dir):
    return {r["step"]: r for r in read_metrics(run_dir / "metrics.jsonl")}


def test_two_process_gloo_matches_one_process(reference, corpus_spec, tmp_path):
    ref_out, ref_summary = reference
    out = tmp_path / "ddp"
    outputs = launch(2, train_command(REFERENCE_MODEL, REFERENCE_TRAIN, out, corpus_spec))
    assert "done: 12 steps" in outputs[0]
    assert "done:" not in outputs[1]  # only rank 0 logs

    got, want = step_losses(out), step_losses(ref_out)
    assert sorted(got) == sorted(want) == list(range(1, 13))
    for key in ("train_loss", "grad_norm", "lr"):
        torch.testing.assert_close(
            torch.tensor([got[s][key] for s in range(1, 13)]),
            torch.tensor([want[s][key] for s in range(1, 13)]),
            rtol=0,
            atol=1e-5,
            msg=key,
        )
    for s in (6, 12):  # eval sums all-reduced before dividing: same blocks, same mean
        assert got[s]["val_loss"] == pytest.approx(want[s]["val_loss"], abs=1e-5)

    state = json.loads((out / "checkpoints" / "step_0000008" / "state.json").read_text())
    assert state["world_size"] == 2 and len(state["rng"]) == 2

    # the 2-process checkpoint of step 8 resumes in one process and finishes like the reference
    shutil.rmtree(out / "checkpoints" / "step_0000012")
    shutil.rmtree(out / "model")
    msgs = []
    tcfg = TrainConfig(out_dir=str(out), data=corpus_spec, **REFERENCE_TRAIN)
    summary = train(GPTConfig(**REFERENCE_MODEL), tcfg, resume=True, log=msgs.append)
    assert summary["resumed_from"] == 8
    assert any("world size changed" in m for m in msgs)
    got = step_losses(out)
    torch.testing.assert_close(
        torch.tensor([got[s]["train_loss"] for s in range(1, 13)]),
        torch.tensor([want[s]["train_loss"] for s in range(1, 13)]),
        rtol=0,
        atol=1e-5,
    )
    assert summary["val_loss"] == pytest.approx(ref_summary["val_loss"], abs=1e-5)
    assert load_run(out).step == 12


def test_two_process_gloo_pcl_matches_one_process(corpus_spec, tmp_path):
    """PCL under DDP: the per-rank PCL terms and pcl_weight gradients combine to the
    one-process values. The view dropout is 0 here: with p > 0 each rank draws its own masks
    (seeded by rank), so only the deterministic part can equal a single process."""
    model = {**REFERENCE_MODEL, "pcl": True, "pcl_epsilon": 0.5, "pcl_dropout": 0.0}
    short = {**REFERENCE_TRAIN, "max_steps": 4, "eval_every": 4, "save_every": 4}
    one = tmp_path / "one"
    train(GPTConfig(**model), TrainConfig(out_dir=str(one), data=corpus_spec, **short), log=None)
    out = tmp_path / "ddp"
    launch(2, train_command(model, short, out, corpus_spec))
    got, want = step_losses(out), step_losses(one)
    assert sorted(got) == sorted(want) == [1, 2, 3, 4]
    for key in ("train_loss", "pcl_loss", "grad_norm"):
        torch.testing.assert_close(
            torch.tensor([got[s][key] for s in range(1, 5)]),
            torch.tensor([want[s][key] for s in range(1, 5)]),
            rtol=0,
            atol=1e-5,
            msg=key,
        )
    assert all(r["pcl_loss"] > 0 for r in got.values())


def test_batch_must_divide_over_ranks(make_train_config, model_config, monkeypatch):
    import complexformer.training.loop as loop_mod
    from complexformer.training import DistInfo

    # the check runs before any collective, so a pretend world of 2 is enough
    monkeypatch.setattr(loop_mod, "setup_distributed", lambda device: DistInfo(0, 2, 0))
    with pytest.raises(ValueError, match="divisible by world_size"):
        train(model_config, make_train_config(batch_size=3), log=None)
    with pytest.raises(ValueError, match="divisible by world_size"):
        train(model_config, make_train_config(batch_size=4, grad_accum=4), log=None)
