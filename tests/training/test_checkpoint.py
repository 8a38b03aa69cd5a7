"""Checkpoints: round trip, atomic writes, pruning, corruption detection."""

from __future__ import annotations

import json
import os
import random
import stat

import numpy as np
import pytest
import torch

import complexformer.training.checkpoint as ckpt_mod
from complexformer.lm import checkpoint_config, model_from_checkpoint
from complexformer.models import ComplexFormerLM, GPTConfig
from complexformer.storage import remove_stale_temporaries
from complexformer.training import (
    CheckpointError,
    TrainConfig,
    build_optimizer,
    build_scheduler,
    find_latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
    verify_checkpoint,
)
from complexformer.training.checkpoint import capture_rng_state, restore_rng_state


@pytest.fixture()
def parts(tmp_path):
    cfg = GPTConfig(vocab_size=40, n_layer=1, n_head=2, d_model=16, d_ff=32, max_seq_len=8)
    tc = TrainConfig(out_dir=str(tmp_path), max_steps=10)
    torch.manual_seed(0)
    model = ComplexFormerLM(cfg)
    opt = build_optimizer(model, tc)
    sched = build_scheduler(opt, tc)
    x = torch.randint(0, 40, (2, 8))
    for _ in range(2):
        model(x, labels=x).loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
    return cfg, tc, model, opt, sched


def save(root, step, parts):
    cfg, tc, model, opt, sched = parts
    return save_checkpoint(
        root,
        step,
        model=model,
        optimizer=opt,
        scheduler=sched,
        model_config=cfg,
        train_config=tc,
        rng=[capture_rng_state()],
        extra={"sampler": {"step": step}},
    )


def test_round_trip_restores_everything(tmp_path, parts):
    cfg, tc, model, opt, sched = parts
    random.seed(5)
    np.random.seed(5)
    path = save(tmp_path / "ck", 2, parts)
    assert path.name == "step_0000002"
    assert sorted(p.name for p in path.iterdir()) == [
        "manifest.json",
        "model.safetensors",
        "optimizer.safetensors",
        "rng.safetensors",
        "state.json",
    ]
    expect = (torch.rand(3), np.random.rand(), random.random())
    ck = load_checkpoint(path)
    assert ck.step == 2 and checkpoint_config(ck) == cfg and ck.train_config == tc
    model2 = model_from_checkpoint(ck)
    for (n, a), (_, b) in zip(model.state_dict().items(), model2.state_dict().items(), strict=True):
        assert torch.equal(a, b), n
    opt2 = build_optimizer(model2, tc)
    opt2.load_state_dict(ck.optimizer_state_dict())
    sd1, sd2 = opt.state_dict(), opt2.state_dict()
    assert sd1["param_groups"] == sd2["param_groups"]
    for k in sd1["state"]:
        for key, v in sd1["state"][k].items():
            assert torch.equal(v, sd2["state"][k][key])
    sched2 = build_scheduler(opt2, tc)
    sched2.load_state_dict(ck.state["scheduler"])
    assert sched2.get_last_lr() == sched.get_last_lr()
    restore_rng_state(*ck.rng_state(0))
    got = (torch.rand(3), np.random.rand(), random.random())
    assert torch.equal(got[0], expect[0]) and got[1:] == expect[1:]
    # nothing is pickled: the non-tensor state is plain JSON
    json.loads((path / "state.json").read_text())


def test_crash_mid_write_leaves_previous_checkpoint(tmp_path, parts, monkeypatch):
    root = tmp_path / "ck"
    save(root, 4, parts)

    def boom(*a, **k):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(ckpt_mod, "_write_json", boom)
    with pytest.raises(OSError, match="simulated"):
        save(root, 8, parts)
    monkeypatch.undo()
    assert [s for s, _ in list_checkpoints(root)] == [4]
    assert not any(p.name.startswith(".tmp-") for p in root.iterdir())
    assert find_latest_checkpoint(root) == root / "step_0000004"
    model_from_checkpoint(load_checkpoint(root / "step_0000004"))


def test_leftover_temporary_directory_is_ignored(tmp_path, parts):
    root = tmp_path / "ck"
    save(root, 4, parts)
    partial = root / ".tmp-step_0000008-abc"  # what a SIGKILL mid-write leaves
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"\0" * 10)
    assert find_latest_checkpoint(root) == root / "step_0000004"
    assert remove_stale_temporaries(root) == [partial]


def test_resaving_a_step_replaces_it(tmp_path, parts):
    root = tmp_path / "ck"
    save(root, 4, parts)
    save(root, 4, parts)
    verify_checkpoint(root / "step_0000004")
    assert [p.name for p in root.iterdir()] == ["step_0000004"]


def test_keep_last_pruning(tmp_path, parts):
    root = tmp_path / "ck"
    for step in (1, 2, 3, 4, 5):
        save(root, step, parts)
        prune_checkpoints(root, keep_last=2)
    assert [s for s, _ in list_checkpoints(root)] == [4, 5]


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete", "manifest"])
def test_corrupted_checkpoint_is_detected_and_skipped(tmp_path, parts, damage):
    root = tmp_path / "ck"
    save(root, 4, parts)
    bad = save(root, 8, parts)
    f = bad / "optimizer.safetensors"
    if damage == "truncate":
        f.write_bytes(f.read_bytes()[:100])
    elif damage == "flip":
        data = bytearray(f.read_bytes())
        data[-5] ^= 0xFF
        f.write_bytes(bytes(data))
    elif damage == "delete":
        f.unlink()
    else:
        (bad / "manifest.json").write_text('{"format": "complexformer-che')
    with pytest.raises(CheckpointError, match="step_0000008"):
        verify_checkpoint(bad)
    with pytest.raises(CheckpointError):
        load_checkpoint(bad)
    msgs = []
    assert find_latest_checkpoint(root, log=msgs.append) == root / "step_0000004"
    assert msgs and "skipping bad checkpoint" in msgs[0] and "step_0000008" in msgs[0]


def test_all_checkpoints_damaged_is_a_clear_error(tmp_path, parts):
    root = tmp_path / "ck"
    p = save(root, 4, parts)
    (p / "model.safetensors").write_bytes(b"junk")
    with pytest.raises(CheckpointError, match="no intact checkpoint"):
        find_latest_checkpoint(root, log=None)
    assert find_latest_checkpoint(tmp_path / "empty", log=None) is None


def test_checkpoint_files_follow_the_umask(tmp_path, parts):
    old = os.umask(0o022)
    try:
        path = save(tmp_path / "ck", 2, parts)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    for f in path.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o644, f.name
