"""The training loop end to end: metrics, plot, resume exactness, run-directory safety."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from complexformer.lm import train
from complexformer.training import CheckpointError, RunExistsError, list_checkpoints, read_metrics


class Killed(Exception):
    """Raised by a callback to simulate a crash."""


def kill_at(step):
    def callback(info):
        if info["step"] == step:
            raise Killed(f"killed at step {step}")

    return callback


def losses(run_dir):
    rows = read_metrics(run_dir / "metrics.jsonl")
    return {r["step"]: r["train_loss"] for r in rows}


def test_run_directory_metrics_and_plot(reference):
    out, summary = reference
    for name in ("config.json", "train_config.json", "metrics.jsonl", "summary.json", "loss.png"):
        assert (out / name).is_file(), name
    assert (out / "tokenizer" / "complexformer_tokenizer.json").is_file()
    assert (out / "model" / "model.safetensors").is_file()
    assert [s for s, _ in list_checkpoints(out / "checkpoints")] == [4, 8, 12]
    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(1, 13))
    for r in rows:
        for key in ("step", "train_loss", "lr", "tokens_per_s", "grad_norm", "tokens_seen"):
            assert key in r, key
        assert ("val_loss" in r) == (r["step"] in (6, 12))
        assert "pcl_loss" not in r
    assert rows[-1]["val_ppl"] == pytest.approx(torch.tensor(rows[-1]["val_loss"]).exp().item())
    assert rows[0]["lr"] == pytest.approx(3e-3 / 3)  # warm-up: 3 steps
    assert rows[-1]["lr"] == pytest.approx(3e-4)  # cosine end: lr * min_lr_ratio
    assert rows[-1]["train_loss"] < rows[0]["train_loss"]
    assert summary["steps"] == 12 and summary["tokens_seen"] == 12 * 4 * 32
    assert summary["val_loss"] == pytest.approx(rows[-1]["val_loss"])
    assert summary["val_ppl"] == pytest.approx(rows[-1]["val_ppl"])
    assert summary["run_dir"] == str(out)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["vocab_size"] == 300


def test_resume_reproduces_uninterrupted_run(reference, make_train_config, model_config, tmp_path):
    ref_out, _ = reference
    tc = make_train_config(tmp_path / "killed")
    with pytest.raises(Killed):
        train(model_config, tc, log=None, callback=kill_at(6))
    assert [s for s, _ in list_checkpoints(tmp_path / "killed" / "checkpoints")] == [4]
    assert max(losses(tmp_path / "killed")) == 6  # rows 5, 6 were logged before the kill
    msgs = []
    summary = train(model_config, tc, resume=True, log=msgs.append)
    assert summary["resumed_from"] == 4
    assert any("resume: continuing from" in m and "step_0000004" in m for m in msgs)
    got, want = losses(tmp_path / "killed"), losses(ref_out)
    assert sorted(got) == sorted(want) == list(range(1, 13))  # stale rows 5, 6 replaced
    torch.testing.assert_close(
        torch.tensor([got[s] for s in range(1, 13)], dtype=torch.float64),
        torch.tensor([want[s] for s in range(1, 13)], dtype=torch.float64),
        rtol=0,
        atol=0,
    )
    ref_rows = {r["step"]: r for r in read_metrics(ref_out / "metrics.jsonl")}
    for r in read_metrics(tmp_path / "killed" / "metrics.jsonl"):
        assert r["lr"] == ref_rows[r["step"]]["lr"]
        assert r["grad_norm"] == ref_rows[r["step"]]["grad_norm"]
        if "val_loss" in r:
            assert r["val_loss"] == ref_rows[r["step"]]["val_loss"]


def test_resume_skips_a_corrupted_checkpoint(reference, make_train_config, model_config, tmp_path):
    ref_out, _ = reference
    tc = make_train_config(tmp_path / "r")
    with pytest.raises(Killed):
        train(model_config, tc, log=None, callback=kill_at(9))
    ck8 = tmp_path / "r" / "checkpoints" / "step_0000008" / "model.safetensors"
    ck8.write_bytes(ck8.read_bytes()[:-16])  # truncated
    (tmp_path / "r" / "checkpoints" / ".tmp-step_0000012-x").mkdir()  # a crashed save
    msgs = []
    summary = train(model_config, tc, resume=True, log=msgs.append)
    assert summary["resumed_from"] == 4
    assert any("skipping bad checkpoint" in m and "step_0000008" in m for m in msgs)
    got, want = losses(tmp_path / "r"), losses(ref_out)
    assert got == want
    assert not (tmp_path / "r" / "checkpoints" / ".tmp-step_0000012-x").exists()


def test_resume_with_every_checkpoint_damaged_raises(make_train_config, model_config, tmp_path):
    tc = make_train_config(tmp_path / "r", max_steps=4, save_every=4, eval_every=4)
    with pytest.raises(Killed):
        train(model_config, tc, log=None, callback=kill_at(4))
    (tmp_path / "r" / "checkpoints" / "step_0000004" / "state.json").write_text("{}")
    with pytest.raises(CheckpointError, match="no intact checkpoint"):
        train(model_config, tc, resume=True, log=None)


def test_refuses_to_overwrite_an_existing_run(reference, make_train_config, model_config, tmp_path):
    ref_out, _ = reference
    out = tmp_path / "copy"
    shutil.copytree(ref_out, out)
    tc = make_train_config(out, max_steps=2, eval_every=2, save_every=2)
    before = (out / "model" / "model.safetensors").read_bytes()
    with pytest.raises(RunExistsError, match="resume=True"):
        train(model_config, tc, log=None)
    assert (out / "model" / "model.safetensors").read_bytes() == before
    assert [s for s, _ in list_checkpoints(out / "checkpoints")] == [4, 8, 12]
    with pytest.raises(ValueError, match="contradict"):
        train(model_config, tc, resume=True, overwrite=True, log=None)
    summary = train(model_config, tc, overwrite=True, log=None)
    assert summary["steps"] == 2
    assert [s for s, _ in list_checkpoints(out / "checkpoints")] == [2]
    assert max(losses(out)) == 2


def test_resume_without_checkpoints_starts_fresh(make_train_config, model_config, tmp_path):
    tc = make_train_config(tmp_path / "r", max_steps=2, eval_every=2, save_every=2)
    msgs = []
    summary = train(model_config, tc, resume=True, log=msgs.append)
    assert summary["resumed_from"] is None and summary["steps"] == 2
    assert any("starting a fresh run" in m for m in msgs)


def test_resume_rejects_a_changed_data_stream(make_train_config, model_config, tmp_path):
    tc = make_train_config(tmp_path / "r", max_steps=4, save_every=2, eval_every=4)
    with pytest.raises(Killed):
        train(model_config, tc, log=None, callback=kill_at(2))
    with pytest.raises(ValueError, match="batch_size"):
        train(model_config, tc.replace(batch_size=8), resume=True, log=None)
    with pytest.raises(ValueError, match="d_model"):
        train(model_config.replace(d_model=64), tc, resume=True, log=None)


def test_grad_accum_matches_one_big_batch(make_train_config, model_config, tmp_path):
    a = make_train_config(tmp_path / "a", max_steps=4, save_every=4, eval_every=4)
    b = make_train_config(tmp_path / "b", max_steps=4, save_every=4, eval_every=4, grad_accum=2)
    train(model_config, a, log=None)
    train(model_config, b, log=None)
    la, lb = losses(tmp_path / "a"), losses(tmp_path / "b")
    torch.testing.assert_close(
        torch.tensor(list(lb.values())), torch.tensor(list(la.values())), rtol=0, atol=1e-5
    )


def test_pcl_bf16_and_sparse_logging(make_train_config, model_config, tmp_path):
    tc = make_train_config(
        tmp_path / "p", max_steps=5, log_every=2, eval_every=3, save_every=5, bf16=True
    )
    summary = train(model_config.replace(pcl=True), tc, log=None)
    rows = read_metrics(tmp_path / "p" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [2, 3, 4, 5]  # log_every, plus eval steps and the end
    assert all("pcl_loss" in r and r["pcl_loss"] > 0 for r in rows)
    assert [r["step"] for r in rows if "val_loss" in r] == [3, 5]
    assert summary["val_loss"] == rows[-1]["val_loss"]


def test_optional_extras_fail_or_skip_cleanly(
    make_train_config, model_config, tmp_path, monkeypatch
):
    import sys

    from complexformer.training import plot_loss_curves

    notes = []
    for mod in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, mod, None)  # as if not installed
    assert plot_loss_curves(tmp_path / "m.jsonl", tmp_path / "x.png", log=notes.append) is None
    assert "matplotlib is not installed" in notes[0] and not (tmp_path / "x.png").exists()
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    tc = make_train_config(tmp_path / "tb", max_steps=1, tensorboard=True)
    with pytest.raises(ImportError, match="complexformer\\[tensorboard\\]"):
        train(model_config, tc, log=None)
    assert not (tmp_path / "tb" / "checkpoints").exists()


def test_num_threads_is_restored(make_train_config, model_config, tmp_path):
    before = torch.get_num_threads()
    train(model_config, make_train_config(tmp_path / "t", max_steps=1, num_threads=1), log=None)
    assert torch.get_num_threads() == before


def test_pcl_run_resumes_exactly(make_train_config, tmp_path):
    """PCL draws a dropout view every step: a PCL run killed after step 6 and resumed from its
    step-4 checkpoint (RNG state included) logs the same train and PCL losses as an
    uninterrupted one."""
    from complexformer.models import GPTConfig
    from tests.training.training_testlib import REFERENCE_MODEL

    pcl_model = GPTConfig(**{**REFERENCE_MODEL, "pcl": True, "pcl_epsilon": 0.5})
    full_cfg = make_train_config(tmp_path / "full", max_steps=8, eval_every=8)
    train(pcl_model, full_cfg, log=None)
    tc = make_train_config(tmp_path / "killed", max_steps=8, eval_every=8)
    with pytest.raises(Killed):
        train(pcl_model, tc, log=None, callback=kill_at(6))
    assert train(pcl_model, tc, resume=True, log=None)["resumed_from"] == 4
    want = {r["step"]: r for r in read_metrics(tmp_path / "full" / "metrics.jsonl")}
    got = {r["step"]: r for r in read_metrics(tmp_path / "killed" / "metrics.jsonl")}
    assert sorted(got) == sorted(want) == list(range(1, 9))
    for key in ("train_loss", "pcl_loss", "grad_norm"):
        torch.testing.assert_close(
            torch.tensor([got[s][key] for s in range(1, 9)], dtype=torch.float64),
            torch.tensor([want[s][key] for s in range(1, 9)], dtype=torch.float64),
            rtol=0,
            atol=0,
            msg=key,
        )
    assert all(r["pcl_loss"] > 0 for r in got.values())
