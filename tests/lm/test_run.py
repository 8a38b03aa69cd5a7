"""load_run on run / checkpoint / model directories, its errors, and evaluate_perplexity."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
import torch

from complexformer.data import Tokenizer
from complexformer.lm import find_run_dir, load_run, train
from complexformer.models import ComplexFormerLM, GPTConfig
from complexformer.training import CheckpointError, TrainConfig, evaluate_perplexity, read_metrics


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, corpus_spec, session_cache):
    mp = pytest.MonkeyPatch()
    mp.setenv("COMPLEXFORMER_CACHE", str(session_cache))
    out = tmp_path_factory.mktemp("runs") / "run"
    mcfg = GPTConfig(vocab_size=999, n_layer=1, n_head=2, d_model=32, d_ff=64, max_seq_len=32)
    tcfg = TrainConfig(
        out_dir=str(out),
        data=corpus_spec,
        vocab_size=300,
        max_steps=6,
        batch_size=4,
        lr=3e-3,
        eval_every=3,
        eval_blocks=8,
        log_every=1,
        save_every=3,
        seed=1,
        device="cpu",
        num_threads=1,
    )
    try:
        train(mcfg, tcfg, log=None)
    finally:
        mp.undo()
    return out


def same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_load_run_from_run_checkpoint_and_model_dirs(run_dir):
    final = load_run(run_dir)
    assert final.kind == "model" and final.source == run_dir / "model"
    assert final.run_dir == run_dir and final.step == 6
    assert final.model_config.vocab_size == 300  # set from the tokenizer
    assert isinstance(final.tokenizer, Tokenizer) and final.tokenizer.vocab_size == 300
    assert final.train_config.max_steps == 6 and not final.model.training
    assert final.summary["steps"] == 6

    ck = load_run(run_dir / "checkpoints" / "step_0000006")
    assert ck.kind == "checkpoint" and ck.step == 6 and ck.run_dir == run_dir
    assert same_weights(ck.model, final.model)
    ck3 = load_run(run_dir / "checkpoints" / "step_0000003")
    assert ck3.step == 3 and not same_weights(ck3.model, final.model)

    md = load_run(run_dir / "model")
    assert md.kind == "model" and md.run_dir == run_dir and md.step == 6
    assert same_weights(md.model, final.model)
    meta = md.metadata()
    assert meta["model_config"]["d_model"] == 32 and meta["train_config"]["seed"] == 1
    ids = torch.tensor([md.tokenizer.encode("the cat sat")])
    assert md.model.generate(ids, 5, temperature=0).shape == (1, ids.shape[1] + 5)


def test_load_run_falls_back_to_newest_good_checkpoint(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    shutil.rmtree(copy / "model")
    r = load_run(copy)
    assert r.kind == "checkpoint" and r.step == 6
    (copy / "checkpoints" / "step_0000006" / "model.safetensors").write_bytes(b"broken")
    r = load_run(copy)
    assert r.step == 3
    with pytest.raises(CheckpointError, match="step_0000006"):
        load_run(copy / "checkpoints" / "step_0000006")


def test_load_run_errors_name_the_path(run_dir, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_run(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="is not a run directory"):
        load_run(tmp_path / "empty")
    model_only = tmp_path / "bare"
    shutil.copytree(run_dir / "model", model_only)
    with pytest.raises(FileNotFoundError, match="tokenizer"):
        load_run(model_only)
    assert load_run(model_only, require_tokenizer=False).tokenizer is None
    (model_only / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json"):
        load_run(model_only, require_tokenizer=False)
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (copy / "model" / "model.safetensors").write_bytes(b"\0" * 20)
    with pytest.raises(ValueError, match="model.safetensors"):
        load_run(copy)
    assert find_run_dir(copy / "checkpoints" / "step_0000003") == copy


def test_evaluate_perplexity_matches_training_eval(run_dir, corpus_spec):
    from complexformer.data import load_corpus, load_token_splits

    r = load_run(run_dir)
    corpus = load_corpus(corpus_spec)
    val = load_token_splits(corpus, r.tokenizer, ("val",), show_progress=False)["val"]
    res = evaluate_perplexity(r.model, val, batch_size=3, max_blocks=8)
    last = read_metrics(run_dir / "metrics.jsonl")[-1]
    assert res["tokens"] == 8 * 31 and res["blocks"] == 8
    assert res["loss"] == pytest.approx(last["val_loss"], abs=1e-5)
    assert res["ppl"] == pytest.approx(math.exp(res["loss"]))


def test_evaluate_perplexity_by_hand():
    torch.manual_seed(0)
    model = ComplexFormerLM(
        GPTConfig(vocab_size=20, n_layer=1, n_head=2, d_model=16, d_ff=16, max_seq_len=6)
    )
    tokens = np.arange(23, dtype=np.uint16) % 20  # 4 blocks of 5 predictions + tail
    res = evaluate_perplexity(model, tokens, block_size=5, batch_size=3)
    blocks = torch.stack(
        [torch.from_numpy(tokens[i * 5 : i * 5 + 6].astype(np.int64)) for i in range(4)]
    )
    with torch.no_grad():
        want = model(blocks, labels=blocks).lm_loss.item()
    assert res["tokens"] == 20 and res["loss"] == pytest.approx(want, rel=1e-5)
    with pytest.raises(ValueError, match="do not fill one block"):
        evaluate_perplexity(model, tokens[:5], block_size=5)
