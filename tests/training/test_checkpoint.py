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
    first, second = list(opt.state)[:2]
    opt.state[first]["n_updates"] = 2  # state that is not a tensor goes into the JSON
    opt.state[second]["lbfgs"] = {"history": [0.5, 0.25]}
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
    assert ck.state["sampler"] == {"step": 2} and ck.state["world_size"] == 1  # the extra state
    assert json.loads((path / "manifest.json").read_text())["step"] == 2
    model2 = model_from_checkpoint(ck)
    for (n, a), (_, b) in zip(model.state_dict().items(), model2.state_dict().items(), strict=True):
        assert torch.equal(a, b), n
    opt2 = build_optimizer(model2, tc)
    opt2.load_state_dict(ck.optimizer_state_dict())
    sd1, sd2 = opt.state_dict(), opt2.state_dict()
    assert sd1["param_groups"] == sd2["param_groups"]
    assert sd1["state"].keys() == sd2["state"].keys()
    for k in sd1["state"]:
        assert sd1["state"][k].keys() == sd2["state"][k].keys(), k
        for key, v in sd1["state"][k].items():
            same = (
                torch.equal(v, sd2["state"][k][key])
                if torch.is_tensor(v)
                else v == sd2["state"][k][key]
            )
            assert same, (k, key)
    assert sd2["state"][0]["n_updates"] == 2 and sd2["state"][1]["lbfgs"]["history"] == [0.5, 0.25]
    sched2 = build_scheduler(opt2, tc)
    sched2.load_state_dict(ck.state["scheduler"])
    assert sched2.get_last_lr() == sched.get_last_lr()
    assert ck.rng_state(1) is None  # one rank saved its state
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
    q = save(root, 8, parts)
    (q / "state.json").unlink()
    with pytest.raises(CheckpointError, match="no intact checkpoint") as e:
        find_latest_checkpoint(root, log=None)
    head, *each = str(e.value).split("\n  ")
    assert head == f"no intact checkpoint under {root}; every one is damaged:"
    assert len(each) == 2, each
    for error, step in zip(each, ("step_0000008", "step_0000004"), strict=True):
        assert error.startswith(str(root / step)), error  # newest first, each named
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


def test_the_files_are_safetensors_of_format_pt(tmp_path, parts):
    from safetensors import safe_open

    path = save(tmp_path / "ck", 2, parts)
    for name in ("model.safetensors", "optimizer.safetensors", "rng.safetensors"):
        with safe_open(str(path / name), "pt") as f:
            assert f.metadata()["format"] == "pt", name  # (save_model adds the tied names)


def test_a_subset_of_the_model_tensors_is_saved_when_given(tmp_path, parts):
    from safetensors.torch import load_file

    cfg, tc, model, opt, sched = parts
    trained = {k: v for k, v in model.state_dict().items() if k.endswith("delta")}
    assert trained  # CMHA's adaptation, what a frozen base would train
    path = save_checkpoint(tmp_path / "ck", 1, model=model, optimizer=opt, scheduler=sched,
                           model_config=cfg, train_config=tc, rng=[capture_rng_state()],
                           model_tensors=trained)  # fmt: skip
    got = load_file(str(path / "model.safetensors"))
    assert got.keys() == trained.keys()
    for k, v in trained.items():
        assert torch.equal(got[k], v), k


def test_weights_of_another_model_are_refused_by_name(tmp_path, parts):
    cfg = parts[0]
    path = save(tmp_path / "ck", 2, parts)
    other = ComplexFormerLM(GPTConfig(**{**cfg.to_dict(), "n_layer": 2}))
    with pytest.raises(
        CheckpointError, match=r"cannot load model weights from .*model.safetensors"
    ):
        load_checkpoint(path).load_model_into(other)


def test_an_incomplete_checkpoint_is_refused_with_what_is_wrong(tmp_path, parts):
    with pytest.raises(CheckpointError, match=r"checkpoint directory .*nowhere does not exist"):
        load_checkpoint(tmp_path / "nowhere")
    path = save(tmp_path / "ck", 2, parts)
    state = path / "state.json"
    text = state.read_text()
    state.write_text(text.replace('"format": "', '"format": "x'))
    with pytest.raises(CheckpointError, match="state.json: unknown checkpoint format"):
        load_checkpoint(path, verify=False)
    state.write_text(text[:40])
    with pytest.raises(CheckpointError, match=r"state.json is corrupted \(not valid JSON"):
        load_checkpoint(path, verify=False)
    state.unlink()
    with pytest.raises(
        CheckpointError, match="state.json is missing: .* is not a complete checkpoint"
    ):
        load_checkpoint(path, verify=False)


def test_a_manifest_that_leaves_a_file_out_is_refused(tmp_path, parts):
    path = save(tmp_path / "ck", 2, parts)
    manifest = json.loads((path / "manifest.json").read_text())
    files = manifest["files"]
    del files[next(k for k in files if k == "model.safetensors")]
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="model.safetensors"):
        verify_checkpoint(path)


def test_an_optimizer_state_of_scalars_only_round_trips(tmp_path, parts):
    cfg, tc, model, _, sched = parts
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    sgd.state[next(model.parameters())] = {"frozen_since": 1}
    kw = dict(model=model, optimizer=sgd, scheduler=sched, model_config=cfg, train_config=tc)
    path = save_checkpoint(tmp_path / "ck", 1, rng=[capture_rng_state()], **kw)
    got = load_checkpoint(path).optimizer_state_dict()
    assert got["state"] == {0: {"frozen_since": 1}}
    assert got["param_groups"] == sgd.state_dict()["param_groups"]


def test_state_that_is_not_json_is_refused_before_anything_is_written(tmp_path, parts):
    cfg, tc, model, opt, _ = parts
    kw = dict(model=model, optimizer=opt, model_config=cfg, train_config=tc)
    with pytest.raises(TypeError, match="checkpoint state is not JSON-serialisable"):
        save_checkpoint(tmp_path / "ck", 1, scheduler=None, rng=[], extra={"x": object()}, **kw)
    assert not (tmp_path / "ck" / "step_0000001").exists()
    path = save_checkpoint(tmp_path / "ck", 1, scheduler=None, rng=[], **kw)  # no scheduler
    ck = load_checkpoint(path)
    assert ck.state["scheduler"] is None and ck.state["world_size"] == 0 and ck.rng_state(0) is None
