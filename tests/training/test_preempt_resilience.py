"""Preemption and lost ranks under ``torchrun --max-restarts 1`` (gloo, CPU): a SIGTERM to one
rank checkpoints the step all ranks agree on and the restarted job ends with the metrics of an
uninterrupted run; a SIGKILL of one rank resumes from the last periodic checkpoint with the
same losses; a rank that raises or hangs ends the others with its message within the
process group's timeout."""

from __future__ import annotations

import json

import pytest
import torch
import torch.distributed as tdist

from complexformer.training.preempt import EXIT_STOPPED
from tests.training.resilience_testlib import (
    event_rows,
    launch_ranks,
    torchrun,
    training_rows,
)
from tests.training.training_testlib import REFERENCE_TRAIN

pytestmark = pytest.mark.skipif(
    not tdist.is_available() or not tdist.is_gloo_available(), reason="needs gloo"
)

STEPS = REFERENCE_TRAIN["max_steps"]  # 12; checkpoints every 4 steps, evaluation every 6


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, corpus_spec, session_cache, monkeypatch_module):
    out = tmp_path_factory.mktemp("uninterrupted") / "run"
    code, text = torchrun(2, [str(out), corpus_spec, "none", "0", "0"])
    assert code == 0, text[:300] + text[-4000:]
    return out


@pytest.fixture(scope="module")
def monkeypatch_module(session_cache):
    mp = pytest.MonkeyPatch()
    mp.setenv("COMPLEXFORMER_CACHE", str(session_cache))
    yield mp
    mp.undo()


def assert_same_training(got_dir, want_dir) -> None:
    got, want = training_rows(got_dir), training_rows(want_dir)
    assert sorted(got) == sorted(want) == list(range(1, STEPS + 1))
    for key in ("train_loss", "grad_norm", "lr", "val_loss"):
        steps = [s for s in want if key in want[s]]
        assert steps and all(key in got[s] for s in steps), key
        torch.testing.assert_close(
            torch.tensor([got[s][key] for s in steps], dtype=torch.float64),
            torch.tensor([want[s][key] for s in steps], dtype=torch.float64),
            rtol=0,
            atol=0,
            msg=key,
        )
    a = json.loads((got_dir / "summary.json").read_text())
    b = json.loads((want_dir / "summary.json").read_text())
    assert a["val_loss"] == b["val_loss"] and a["steps"] == b["steps"] == STEPS


def test_sigterm_to_one_rank_checkpoints_and_the_restart_finishes_equal(
    uninterrupted, corpus_spec, tmp_path
):
    out = tmp_path / "run"
    # rank 1 receives SIGTERM after update 5; the ranks agree at update 6, which is saved
    # (6 is not a periodic checkpoint), and torchrun restarts both from it
    code, text = torchrun(2, [str(out), corpus_spec, "term", "5", "1"])
    assert code == 0, text[:300] + text[-4000:]
    assert "stopped at step 6/12 by SIGTERM on rank 1" in text
    assert f"exit code {EXIT_STOPPED}" in text
    assert "resume: continuing from" in text and "step_0000006 (step 6)" in text
    (event,) = event_rows(out)
    assert event["step"] == 6 and event["signal"] == "SIGTERM"
    assert event["checkpoint"] == "checkpoints/step_0000006"
    assert event["exit_code"] == EXIT_STOPPED
    assert json.loads((out / "summary.json").read_text())["resumed_from"] == 6
    assert_same_training(out, uninterrupted)


@pytest.mark.slow
def test_sigkill_of_one_rank_resumes_from_the_last_periodic_checkpoint(
    uninterrupted, corpus_spec, tmp_path
):
    out = tmp_path / "run"
    code, text = torchrun(2, [str(out), corpus_spec, "kill", "6", "1"])
    assert code == 0, text[:300] + text[-4000:]
    assert "step_0000004 (step 4)" in text  # the checkpoint before the kill at step 6
    assert not event_rows(out)
    assert json.loads((out / "summary.json").read_text())["resumed_from"] == 4
    assert_same_training(out, uninterrupted)


def test_a_rank_that_raises_ends_the_others_with_its_message(corpus_spec, tmp_path):
    # a 10-minute timeout that nobody may wait out: the other rank stops at once
    extra = json.dumps({"dist_timeout": 600})
    codes, outputs, seconds = launch_ranks(
        2, [str(tmp_path / "run"), corpus_spec, "raise", "3", "1", extra], timeout=90
    )
    assert codes[0] not in (0, None) and codes[1] not in (0, None), outputs
    assert "ValueError: boom at step 3 on rank 1" in outputs[1]
    assert "rank 1 failed: ValueError: boom at step 3 on rank 1" in outputs[0], outputs[0]
    assert seconds < 60


@pytest.mark.slow
def test_a_hanging_rank_ends_the_job_within_the_timeout(corpus_spec, tmp_path):
    extra = json.dumps({"dist_timeout": 4})
    codes, outputs, seconds = launch_ranks(
        2, [str(tmp_path / "run"), corpus_spec, "hang", "3", "1", extra], timeout=90
    )
    assert codes[0] not in (0, None) and codes[1] not in (0, None), outputs
    # rank 0 times out in its next collective; rank 1, asleep, is ended with rank 0's message
    assert "rank 0 failed" in outputs[1] and "rank 1 stops too" in outputs[1], outputs[1]
    assert seconds < 60
