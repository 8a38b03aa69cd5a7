"""Two gloo ranks on a prepared corpus: the one-process losses, with the source gone; a
failure while rank 0 prepares the data ends every rank with rank 0's message."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import torch.distributed as tdist

from complexformer.data.prepare import prepare_corpus
from tests.training.test_loop_ddp import launch, step_losses, train_command
from tests.training.training_testlib import REFERENCE_MODEL, REFERENCE_TRAIN, write_corpus

pytestmark = pytest.mark.skipif(
    not tdist.is_available() or not tdist.is_gloo_available(), reason="needs gloo"
)


def test_two_ranks_on_a_prepared_folder_match_one_process(reference, tmp_path, monkeypatch):
    ref_out, _ = reference
    source = write_corpus(tmp_path / "src")  # the reference corpus, written again
    folder = prepare_corpus(source, tmp_path / "prepared", vocab_size=300, workers=2)
    shutil.rmtree(tmp_path / "src")
    out = tmp_path / "ddp"
    outputs = launch(2, train_command(REFERENCE_MODEL, REFERENCE_TRAIN, out, f"prepared:{folder}"))
    assert "done: 12 steps" in outputs[0]
    got, want = step_losses(out), step_losses(ref_out)
    assert sorted(got) == sorted(want) == list(range(1, 13))
    for key in ("train_loss", "grad_norm"):
        torch.testing.assert_close(
            torch.tensor([got[s][key] for s in range(1, 13)]),
            torch.tensor([want[s][key] for s in range(1, 13)]),
            rtol=0,
            atol=1e-5,
            msg=key,
        )
    assert got[12]["val_loss"] == pytest.approx(want[12]["val_loss"], abs=1e-5)


def test_a_rank0_preparation_failure_ends_every_rank_with_its_message(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    rows = [json.dumps({"text": f"document {i} " * 5}) for i in range(40)]
    rows[6] = '{"text": broken'
    (src / "corpus.jsonl").write_text("\n".join(rows) + "\n")
    cmd = train_command(REFERENCE_MODEL, REFERENCE_TRAIN, tmp_path / "run", f"text:{src}")
    with pytest.raises(pytest.fail.Exception) as err:
        launch(2, cmd, timeout=120, grace=30)
    text = str(err.value)
    assert "a rank failed" in text  # not a timeout: both ranks ended by themselves
    rank0, rank1 = text.split("--- rank 1")
    assert "corpus.jsonl:7: invalid JSON" in rank0 and "(exit 2)" in rank0
    assert "rank 0 failed to prepare the data" in rank1
    assert "corpus.jsonl:7: invalid JSON" in rank1


def test_data_caches_go_to_the_run_folder_when_ranks_span_machines(tmp_path, monkeypatch):
    from complexformer.training import DistInfo
    from complexformer.training.data_start import data_cache_dir

    dist = DistInfo(rank=3, world_size=4, local_rank=1)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # two machines of two ranks
    assert data_cache_dir(None, tmp_path, dist) == str(tmp_path / "cache")
    assert data_cache_dir("/shared/cache", tmp_path, dist) == "/shared/cache"
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")  # one machine: the user's cache
    assert data_cache_dir(None, tmp_path, dist) is None


def test_data_settings_are_checked(tmp_path):
    from complexformer.training import TrainConfig

    with pytest.raises(ValueError, match="data_timeout must be > 0"):
        TrainConfig(out_dir=str(tmp_path), data_timeout=0)
    with pytest.raises(ValueError, match="tokenizer_sample_bytes must be an integer >= 1"):
        TrainConfig(out_dir=str(tmp_path), tokenizer_sample_bytes=0)
