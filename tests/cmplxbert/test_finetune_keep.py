"""A fine-tuned CmplxBERT is kept: ``finetune_one`` writes it as a CmplxBERT directory that
``load_cmplxbert``, ``info`` and ``cbert-predict`` read, and its predictions equal both the
in-training predictions and a forward pass per example."""

from __future__ import annotations

import json

import pytest
import torch
from torch.testing import assert_close

from complexformer.cli import main
from complexformer.cmplxbert import load_cmplxbert
from complexformer.cmplxbert.finetune import FinetuneConfig, finetune_one
from complexformer.cmplxbert.labelled import load_classification_task
from complexformer.cmplxbert.predict import Predictor
from tests.cmplxbert.lora_testlib import save_tiny_bert_dir, tiny_model
from tests.cmplxbert.test_finetune_task_types import _bio_jsonl, _pairs_csv
from tests.cmplxbert.test_lora_finetune import _task_dir

pytest.importorskip("transformers")


def _cfg(task: str, **kw) -> FinetuneConfig:
    base = dict(
        task=task,
        models=("cmplxbert",),
        seeds=(0,),
        epochs=1,
        lr=1e-3,
        batch_size=8,
        max_len=24,
        max_train_examples=32,
        max_eval_examples=24,
        num_threads=1,
        device="cpu",
        pooling="mean",
    )
    return FinetuneConfig(**{**base, **kw})


def _forward_each(model, tok, inputs, task_type, max_len):
    """The model's logits of each example alone (no padding), in eval mode."""
    out = []
    model.eval()
    with torch.no_grad():
        for x in inputs:
            kw = {"truncation": True, "max_length": max_len, "return_tensors": "pt"}
            if task_type == "pair":
                enc = tok(x[0], x[1], **kw)
            elif task_type == "token":
                enc = tok(x, is_split_into_words=True, **kw)
            else:
                enc = tok(x, **kw)
            out.append((enc, model(**enc).logits[0]))
    return out


def test_finetuned_classifier_is_kept_and_predicts_as_in_training(tmp_path, capsys):
    base = str(save_tiny_bert_dir(tmp_path / "bert", "BertModel"))
    task_path = _task_dir(tmp_path / "task")
    cfg = _cfg(task_path)
    run = finetune_one(base, cfg, tmp_path / "ft", log=None)
    d = tmp_path / "ft" / "model"
    assert run["model_dir"] == str(d)
    assert (d / "manifest.json").is_file() and (d / "adapter_model.safetensors").is_file()
    model, tok, meta = load_cmplxbert(d)
    assert model.task == "classification" and model.pooling == "mean"
    task = load_classification_task(task_path)
    assert meta["labels"] == task.labels and meta["num_labels"] == 2
    assert meta["max_len"] == 24 and meta["task_type"] == "sequence"
    # the kept model classifies the test examples as the trained model did in training
    from complexformer.cmplxbert.finetune import _subset

    texts, _ = _subset(*task.splits["test"], cfg.max_eval_examples)
    pred = Predictor(model, tok, meta)
    rows = list(pred.predict(texts, batch_size=5))
    assert [r["label_id"] for r in rows] == run["test_predictions"]
    # batched logits equal a forward of each example alone
    for row, (_, z) in zip(rows, _forward_each(model, tok, texts, "sequence", 24), strict=True):
        assert_close(torch.tensor(row["logits"]), z, atol=1e-5, rtol=1e-5)
        assert row["label"] == meta["labels"][int(z.argmax())]
        assert row["score"] == pytest.approx(float(torch.softmax(z, -1).max()), abs=1e-6)
    # info reads the kept model
    assert main(["info", "--model", str(d)]) == 0
    assert "cmplxbert" in capsys.readouterr().out
    # --no-save-models keeps results only
    rec = finetune_one(base, cfg.replace(save_models=False), tmp_path / "ft2", log=None)
    assert "model_dir" not in rec and not (tmp_path / "ft2" / "model" / "cmplxbert.json").exists()


@pytest.mark.parametrize("task_type", ["token", "pair"])
def test_kept_token_and_pair_models_predict_from_the_command_line(tmp_path, task_type):
    base = str(save_tiny_bert_dir(tmp_path / "bert", "BertModel"))
    if task_type == "token":
        data, fields = _bio_jsonl(tmp_path / "ner.jsonl", 60), ("tokens", "tags")
    else:
        data, fields = _pairs_csv(tmp_path / "pairs.csv", 60), ("text", "label")
    cfg = _cfg(str(data), task_type=task_type, text_field=fields[0], label_field=fields[1],
               pooling="cls")  # fmt: skip
    finetune_one(base, cfg, tmp_path / "ft", log=None)
    d = tmp_path / "ft" / "model"
    model, tok, meta = load_cmplxbert(d)
    task = load_classification_task(str(data), fields[0], fields[1], task_type)
    inputs = task.splits["test"][0][:7]
    if task_type == "token":
        inputs[0] = inputs[0] * 8  # longer than max_len: its last words get no tag
        records = [{"tokens": list(w), "id": i} for i, w in enumerate(inputs)]
    else:
        records = [{"text": a, "text_pair": b, "id": i} for i, (a, b) in enumerate(inputs)]
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    argv = ["cbert-predict", "--model", str(d), "--input", str(src), "--output", str(dst),
            "--batch-size", "3", "--threads", "1"]  # fmt: skip
    assert main(argv) == 0
    rows = [json.loads(line) for line in dst.read_text().splitlines()]
    assert [r["id"] for r in rows] == list(range(7))
    for row, (enc, z) in zip(rows, _forward_each(model, tok, inputs, task_type, 24), strict=True):
        if task_type == "pair":
            assert_close(torch.tensor(row["logits"]), z, atol=1e-5, rtol=1e-5)
            continue
        words = enc.word_ids(0)
        first = {w: t for t, w in reversed(list(enumerate(words))) if w is not None}
        assert len(row["tags"]) == len(row["tokens"])
        for w in range(len(row["tokens"])):
            if w not in first:
                assert row["tags"][w] is None and row["logits"][w] is None
                continue
            assert_close(torch.tensor(row["logits"][w]), z[first[w]], atol=1e-5, rtol=1e-5)
            assert row["tags"][w] == meta["labels"][int(z[first[w]].argmax())]
    if task_type == "token":
        assert rows[0]["tags"][-1] is None  # truncated


def test_predict_refuses_a_model_without_classifier_and_bad_records(tmp_path):
    from complexformer.cmplxbert import complexify

    model = complexify(tiny_model("BertForMaskedLM"), r=2)
    with pytest.raises(ValueError, match="task is 'mlm'.*classification"):
        Predictor(model, None, {})
    clf = complexify(tiny_model("BertForSequenceClassification", num_labels=3), r=2)
    pred = Predictor(clf, None, {"labels": ["a", "b", "c"]})
    with pytest.raises(ValueError, match="record 4 has no field 'text'"):
        pred.encode([{"text": "x"}, {"sentence": "y"}], first=3)
