"""Continued MLM pre-training: BERT masking, the MLM task in the shared training loop (exact
resume), the saved CmplxBERT directory, and the loss going down on the real MiniLM."""

from __future__ import annotations

import json

import pytest
import torch
from torch.testing import assert_close

from complexformer.cmplxbert import CmplxBertConfig, ComplexLoRAConfig
from complexformer.cmplxbert.loading import is_cmplxbert_dir, load_cmplxbert
from complexformer.cmplxbert.mlm import MLMTask, mask_tokens, masking_generator
from complexformer.training import TrainConfig, train_task
from tests.cmplxbert.lora_testlib import save_tiny_bert_dir, write_docstring_corpus

pytest.importorskip("transformers")


def test_mask_tokens_rates_specials_and_labels():
    g = masking_generator(0, 1)
    ids = torch.randint(5, 1000, (64, 256), generator=g)
    ids[:, 0], ids[:, -1] = 1, 2  # specials
    masked, labels = mask_tokens(
        ids, mask_token_id=3, vocab_size=1000, special_ids=[1, 2], generator=masking_generator(0, 2)
    )
    sel = labels != -100
    n = ids[:, 1:-1].numel()
    assert abs(sel.sum().item() / n - 0.15) < 0.01  # 15% of the non-special tokens
    assert not sel[:, 0].any() and not sel[:, -1].any()
    assert torch.equal(labels[sel], ids[sel])  # labels are the original tokens
    assert torch.equal(masked[~sel], ids[~sel])  # unselected positions untouched
    k = sel.sum().item()
    to_mask = (masked == 3) & sel
    kept = (masked == ids) & sel
    assert abs(to_mask.sum().item() / k - 0.8) < 0.02
    # random replacements: 10%, plus the ~0.1% that draw the original token by chance
    assert abs(kept.sum().item() / k - 0.1) < 0.02
    changed = sel & ~to_mask & ~kept
    assert abs(changed.sum().item() / k - 0.1) < 0.02
    again = mask_tokens(
        ids, mask_token_id=3, vocab_size=1000, special_ids=[1, 2], generator=masking_generator(0, 2)
    )
    assert torch.equal(again[0], masked) and torch.equal(again[1], labels)


def test_mask_tokens_rejects_bad_rates():
    ids = torch.zeros(2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="mlm_probability"):
        mask_tokens(ids, mask_token_id=3, vocab_size=10, special_ids=[], mlm_probability=0)
    with pytest.raises(ValueError, match="sum <= 1"):
        mask_tokens(
            ids, mask_token_id=3, vocab_size=10, special_ids=[], mask_ratio=0.9, random_ratio=0.2
        )


@pytest.fixture(scope="module")
def mlm_setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlm")
    spec = write_docstring_corpus(root / "corpus.jsonl")
    base = save_tiny_bert_dir(root / "tiny_bert", "BertModel")  # no MLM head
    return root, spec, str(base)


def _tc(out, spec, **kw):
    base = dict(
        out_dir=str(out),
        data=spec,
        max_steps=8,
        batch_size=4,
        lr=1e-3,
        warmup_frac=0.25,
        schedule="linear",
        min_lr_ratio=0.0,
        eval_every=4,
        eval_blocks=4,
        log_every=1,
        save_every=2,
        keep_last=5,
        seed=0,
        device="cpu",
        num_threads=1,
    )
    return TrainConfig(**{**base, **kw})


def test_mlm_run_resumes_exactly_and_saves_a_loadable_cmplxbert(mlm_setup, tmp_path, monkeypatch):
    root, spec, base = mlm_setup
    monkeypatch.setenv("COMPLEXFORMER_CACHE", str(root / "cache"))
    cfg = ComplexLoRAConfig(r=2)
    full = train_task(MLMTask(base, cfg, max_len=32), _tc(tmp_path / "a", spec), log=None)

    class Crash(Exception):
        pass

    def crash(info):
        if info["step"] == 5:
            raise Crash

    with pytest.raises(Crash):
        train_task(
            MLMTask(base, cfg, max_len=32), _tc(tmp_path / "b", spec), log=None, callback=crash
        )
    resumed = train_task(
        MLMTask(base, cfg, max_len=32), _tc(tmp_path / "b", spec), log=None, resume=True
    )
    assert resumed["resumed_from"] == 4
    assert resumed["val_loss"] == pytest.approx(full["val_loss"], rel=1e-6)

    def rows(d):
        return [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]

    a = {r["step"]: r["train_loss"] for r in rows(tmp_path / "a")}
    b = {r["step"]: r["train_loss"] for r in rows(tmp_path / "b")}
    for step in range(5, 9):
        assert b[step] == pytest.approx(a[step], rel=1e-6)

    model_dir = tmp_path / "a" / "model"
    assert is_cmplxbert_dir(model_dir)
    meta = json.loads((model_dir / "cmplxbert.json").read_text())
    assert meta["hf_class"] == "BertModel" and meta["task"] == "mlm"  # a new head was added
    model, tok, _ = load_cmplxbert(model_dir)
    model.eval()
    enc = tok(["The quick brown fox jumps over the lazy dog."], return_tensors="pt")
    out1 = model(enc["input_ids"], attention_mask=enc["attention_mask"])
    again, _, _ = load_cmplxbert(model_dir)
    out2 = again.eval()(enc["input_ids"], attention_mask=enc["attention_mask"])
    assert_close(out1.logits, out2.logits)
    # the new head and the adapters trained: they differ from a fresh complexification
    assert model.cls.predictions.decoder.lora_B.abs().sum() > 0
    # loaded for classification: same encoder (hidden states), a new classifier
    clf, _, _ = load_cmplxbert(model_dir, "classification", num_labels=3)
    h = clf.eval()(enc["input_ids"], attention_mask=enc["attention_mask"])
    assert_close(h.last_hidden_state, out1.last_hidden_state)
    assert h.logits.shape == (1, 3)


def test_mlm_loss_goes_down_on_minilm_in_modulus_mode(mlm_setup, tmp_path, monkeypatch):
    """The real pre-trained MiniLM, complexified in the paper's modulus mode: a few updates of
    continued MLM pre-training lower the held-out MLM loss (same masked positions)."""
    root, spec, _ = mlm_setup
    monkeypatch.setenv("COMPLEXFORMER_CACHE", str(root / "cache"))
    cfg = ComplexLoRAConfig(r=4)
    mc = CmplxBertConfig(attention_score="modulus", head_output="modulus")
    tc = _tc(
        tmp_path / "m",
        spec,
        max_steps=12,
        batch_size=8,
        lr=2e-3,
        eval_every=12,
        save_every=12,
        eval_blocks=8,
    )
    losses = []
    task = MLMTask("minilm", cfg, mc, max_len=32)
    summary = train_task(
        task, tc, log=None, callback=lambda info: losses.append(info["train_loss"])
    )
    # validation loss of the untrained complexified model on the same masked blocks
    torch.manual_seed(0)
    fresh = MLMTask("minilm", cfg, mc, max_len=32)
    fresh.tokenizer, fresh.val_tokens, fresh.special_ids = (
        task.tokenizer,
        task.val_tokens,
        task.special_ids,
    )
    fresh.seed, fresh.rank = task.seed, task.rank
    torch.manual_seed(0)
    before = fresh.evaluate(fresh.build_model(), 4, torch.device("cpu"), False, 0, 1, 8)
    assert summary["val_loss"] < before["loss"] - 0.5, (before, summary)
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3


def test_unigram_baseline_equals_mlm_loss_of_a_context_free_model(mlm_setup, tmp_path, monkeypatch):
    """evaluate_unigram scores the same masked tokens as evaluate: a fake model whose logits
    are the add-one smoothed unigram log-probabilities at every position gets the same loss
    through mlm_loss; set_validation_texts packs documents with [SEP]."""
    from types import SimpleNamespace

    import numpy as np

    from complexformer.cmplxbert.mlm import masking_generator, mlm_loss
    from complexformer.data import EvalBlocks

    root, spec, base = mlm_setup
    monkeypatch.setenv("COMPLEXFORMER_CACHE", str(root / "cache"))
    task = MLMTask(base, ComplexLoRAConfig(r=2), max_len=32)
    train_task(task, _tc(tmp_path / "u", spec, max_steps=1, eval_every=1), log=None)
    texts = [f"Return the sum of a and b, then open file {i} for reading." for i in range(12)]
    n = task.set_validation_texts(texts)
    assert n == len(task.val_tokens) and int(task.val_tokens[-1]) == task.tokenizer.eos_token_id
    got = task.evaluate_unigram(4)
    v = len(task.tokenizer.backend)
    counts = np.bincount(np.asarray(task.train_tokens, dtype=np.int64), minlength=v)
    logp = torch.log(torch.from_numpy((counts + 1.0) / (counts.sum() + v))).float()

    class Prior(torch.nn.Module):
        def forward(self, ids):
            return SimpleNamespace(logits=logp.expand(*ids.shape, v))

    blocks = EvalBlocks(task.val_tokens, task.seq_tokens - 1, 4)
    g = masking_generator(task.seed, 0x5EED, 0)
    want = mlm_loss(Prior(), blocks, task._wrap, task._mask, g, torch.device("cpu"))
    assert got["tokens"] == want["tokens"] > 0
    assert got["loss"] == pytest.approx(want["loss"], rel=1e-5)  # mlm_loss scores in float32
