"""Two-process gloo DDP (``complexformer train`` under torchrun's environment): same losses as
one process with the same global batch; its checkpoints resume in a single process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
import torch
import torch.distributed as tdist

from complexformer.lm import load_run, train
from complexformer.models import GPTConfig
from complexformer.training import TrainConfig, read_metrics
from complexformer.training.dist import free_local_port
from tests.training.training_testlib import REFERENCE_MODEL, REFERENCE_TRAIN

pytestmark = pytest.mark.skipif(
    not tdist.is_available() or not tdist.is_gloo_available(), reason="needs gloo"
)


def train_command(model: dict, train: dict, out, data: str) -> list[str]:
    """``python -m complexformer train`` with the tiny preset set to ``model`` and ``train``."""
    sets = [f"model.{k}={json.dumps(v)}" for k, v in model.items()]
    sets += [f"train.{k}={json.dumps(v)}" for k, v in train.items()]
    cmd = [sys.executable, "-m", "complexformer", "train", "--preset", "tiny", "--out", str(out)]
    return cmd + ["--data", data, "--sample-tokens", "0", "--set", *sets]


def launch(world: int, cmd: list[str], timeout=240, grace=20):
    """Start ``cmd`` as ``world`` ranks with torchrun's environment; every rank's output.

    A rank that fails ends the others after a grace period (they would wait at a collective
    for it until the process group's 30-minute timeout); a failure shows every rank's output.
    """
    port = free_local_port()
    procs, files = [], []
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
        log = tempfile.TemporaryFile(mode="w+")  # a pipe left unread could fill and block a rank
        files.append(log)
        procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT))
    why, end, failed_at = None, time.monotonic() + timeout, None
    try:
        while any(p.poll() is None for p in procs):
            now = time.monotonic()
            if failed_at is None and any(p.poll() not in (None, 0) for p in procs):
                failed_at = now
            if failed_at is not None and now > failed_at + grace:
                why = f"a rank failed and the others did not stop within {grace} s"
                break
            if now > end:
                why = f"the ranks did not finish within {timeout} s"
                break
            time.sleep(0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    outputs = []
    for f in files:
        f.seek(0)
        outputs.append(f.read())
        f.close()
    codes = [p.returncode for p in procs]
    if why is not None or any(codes):
        shown = "\n".join(
            f"--- rank {r} (exit {c}):\n{t[-3000:]}"
            for r, (c, t) in enumerate(zip(codes, outputs, strict=True))
        )
        pytest.fail(f"{why or 'a rank failed'}:\n{shown}")
    return outputs


def test_launch_ends_the_waiting_ranks_when_one_fails():
    # rank 1 fails at once; rank 0 would wait (as at a collective) far beyond the test
    script = "import os, sys, time; r = os.environ['RANK']; print('rank', r, flush=True); "
    script += "sys.exit(3) if r == '1' else time.sleep(600)"
    t0 = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as err:
        launch(2, [sys.executable, "-c", script], timeout=60, grace=1)
    assert time.monotonic() - t0 < 30
    text = str(err.value)
    assert "a rank failed" in text and "rank 1 (exit 3)" in text and "rank 0 (exit -9)" in text


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
    monkeypatch.setattr(
        loop_mod, "setup_distributed", lambda device, timeout_s=None: DistInfo(0, 2, 0)
    )
    with pytest.raises(ValueError, match="divisible by world_size"):
        train(model_config, make_train_config(batch_size=3), log=None)
    with pytest.raises(ValueError, match="divisible by world_size"):
        train(model_config, make_train_config(batch_size=4, grad_accum=4), log=None)
