"""The CmplxBERT MLM on a prepared corpus (``prepared:DIR``) with its source deleted, and its
distributed start: a failure while rank 0 prepares the data ends every rank with its message.

A folder prepared with the base's own WordPiece tokenizer (``prepare --tokenizer BASE``) is
read as it is; one prepared with the byte-level BPE has its text decoded and tokenized again.
Both give the losses of the run on the source itself."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
import torch
import torch.distributed as tdist

from complexformer.cmplxbert import ComplexLoRAConfig
from complexformer.cmplxbert.mlm import MLMTask
from complexformer.data.prepare import prepare_corpus
from complexformer.training import TrainConfig, read_metrics, train_task
from tests.cmplxbert.lora_testlib import save_tiny_bert_dir, write_docstring_corpus

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> str:
    return str(save_tiny_bert_dir(tmp_path_factory.mktemp("mlm_prepared") / "bert"))


def _tc(out, data, cache, **kw) -> TrainConfig:
    settings = dict(max_steps=4, batch_size=4, lr=1e-3, warmup_frac=0.25, eval_every=4)
    settings |= dict(eval_blocks=4, log_every=1, save_every=4, seed=0, device="cpu")
    settings |= dict(num_threads=1, cache_dir=str(cache))
    return TrainConfig(out_dir=str(out), data=data, **{**settings, **kw})


def test_mlm_on_a_prepared_folder_without_its_source_has_the_direct_losses(base, tmp_path):
    spec = write_docstring_corpus(tmp_path / "src" / "corpus.jsonl", n_docs=150)
    lora = ComplexLoRAConfig(r=2)
    direct = train_task(
        MLMTask(base, lora, max_len=32), _tc(tmp_path / "direct", spec, tmp_path / "c0"), log=None
    )
    folders = {
        "wordpiece": prepare_corpus(
            spec, tmp_path / "prep-wp", tokenizer=base, workers=1, show_progress=False
        ),
        "bpe": prepare_corpus(spec, tmp_path / "prep-bpe", vocab_size=300, workers=1),
    }
    shutil.rmtree(tmp_path / "src")  # the source is gone
    want = [r["train_loss"] for r in read_metrics(tmp_path / "direct" / "metrics.jsonl")]
    assert len(want) == 4
    for name, folder in folders.items():
        msgs: list[str] = []
        got = train_task(
            MLMTask(base, lora, max_len=32),
            _tc(tmp_path / f"run-{name}", f"prepared:{folder}", tmp_path / f"c-{name}"),
            log=msgs.append,
        )
        have = [r["train_loss"] for r in read_metrics(tmp_path / f"run-{name}" / "metrics.jsonl")]
        torch.testing.assert_close(torch.tensor(have), torch.tensor(want), rtol=0, atol=0)
        assert got["val_loss"] == direct["val_loss"]
        decoded = [m for m in msgs if "decoded and tokenized again" in m]
        if name == "wordpiece":  # the shards are the tokens: nothing is tokenized or cached
            assert sum("tokens (prepared" in m for m in msgs) == 2 and not decoded
            assert not (tmp_path / f"c-{name}").exists()
        else:
            assert len(decoded) == 2


@pytest.mark.slow  # two ranks that import transformers: about 30 s on two shared cores
@pytest.mark.skipif(not tdist.is_available() or not tdist.is_gloo_available(), reason="needs gloo")
def test_a_rank0_preparation_failure_ends_every_mlm_rank_with_its_message(base, tmp_path):
    from tests.training.test_loop_ddp import launch

    src = tmp_path / "src"
    src.mkdir()
    rows = [json.dumps({"text": f"document {i} " * 5}) for i in range(40)]
    rows[4] = '{"text": broken'
    (src / "corpus.jsonl").write_text("\n".join(rows) + "\n")
    cmd = [sys.executable, "-m", "complexformer", "cbert-complexify", "--base", base]
    cmd += ["--data", f"text:{src}", "--out", str(tmp_path / "run"), "--seq-len", "32"]
    cmd += ["--max-steps", "2", "--device", "cpu", "--threads", "1"]
    with pytest.raises(pytest.fail.Exception) as err:
        launch(2, cmd, timeout=120, grace=30)
    text = str(err.value)
    assert "a rank failed" in text  # not a timeout: both ranks ended by themselves
    rank0, rank1 = text.split("--- rank 1")
    assert "corpus.jsonl:5: invalid JSON" in rank0
    assert "rank 0 failed to prepare the data" in rank1
    assert "corpus.jsonl:5: invalid JSON" in rank1
