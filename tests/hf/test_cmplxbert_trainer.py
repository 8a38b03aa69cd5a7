"""transformers' Trainer fine-tunes a CmplxBERT with its own collators: only the adapters,
complex biases, norms and the new head change; the frozen real weights stay bit-identical.
The example script reads GLUE-format local files (pairs in JSON lines, sentences in CSV)."""

from __future__ import annotations

import csv
import importlib.util
import json
import random
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("datasets")

from complexformer.cmplxbert import complexify, load_hf_bert  # noqa: E402
from tests.cmplxbert.lora_testlib import save_tiny_bert_dir  # noqa: E402

WORDS = "alpha beta gamma delta parser reads writes file socket path".split()


def _script():
    path = Path(__file__).resolve().parents[2] / "examples" / "cbert_trainer.py"
    spec = importlib.util.spec_from_file_location("cbert_trainer", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _glue_files(d: Path, pairs: bool, n: int = 48) -> Path:
    """A learnable GLUE-format task: label 1 when "parser" occurs."""
    rng = random.Random(0)
    d.mkdir(parents=True)
    for split, size in (("train", n), ("validation", 16), ("test", 16)):
        rows = []
        for i in range(size):
            words = [rng.choice(WORDS) for _ in range(6)]
            if i % 2:
                words[rng.randrange(6)] = "parser"
            else:
                words = [w if w != "parser" else "path" for w in words]
            label = i % 2
            if pairs:
                rows.append({"sentence1": " ".join(words[:3]), "sentence2": " ".join(words[3:]),
                             "label": label, "idx": i})  # fmt: skip
            else:
                rows.append({"sentence": " ".join(words), "label": label, "idx": i})
        if pairs:
            (d / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        else:
            with open(d / f"{split}.csv", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)
    return d


def _snapshot(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("pairs", [True, False])
def test_trainer_script_on_glue_format_local_files(tmp_path, pairs):
    import transformers

    mod = _script()
    base = save_tiny_bert_dir(tmp_path / "bert", "BertModel")
    data = _glue_files(tmp_path / "glue", pairs)
    args = mod.parser().parse_args(["--base", str(base), "--data", str(data), "--out",
                                    str(tmp_path / "out"), "--epochs", "2", "--batch-size", "8",
                                    "--max-len", "16", "--rank", "2", "--lr", "5e-3"])  # fmt: skip
    start = _snapshot(mod.build_model(str(base), 2, 2, "mean", 0))
    result = mod.run(args)
    assert 0.0 <= result["test"]["test_accuracy"] <= 1.0
    loaded = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "out/model")
    trains = {n for n, p in loaded.named_parameters() if p.requires_grad}
    after = dict(loaded.named_parameters())
    changed = {n for n in start if not torch.equal(start[n], after[n])}
    assert changed and changed <= trains  # only the trainable parts moved
    assert "cmplxbert.classifier.base_layer.weight" in changed
    assert all(torch.equal(start[n], after[n]) for n in start if n not in trains)


def test_trainer_with_token_and_mlm_collators_trains_only_the_adapters(tmp_path):
    import datasets
    import transformers

    from complexformer.hf.cmplxbert import to_transformers

    base = save_tiny_bert_dir(tmp_path / "bert", "BertModel")
    tok = transformers.AutoTokenizer.from_pretrained(str(base))
    rng = random.Random(0)
    sents = [[rng.choice(WORDS) for _ in range(5)] for _ in range(16)]
    # token classification: a tag per word, on the first sub-word (the collator pads with -100)
    rows = []
    for words in sents:
        enc = tok(words, is_split_into_words=True, truncation=True, max_length=16)
        prev, labels = None, []
        for w in enc.word_ids():
            labels.append(-100 if w is None or w == prev else int(words[w] == "parser"))
            prev = w
        rows.append({**enc, "labels": labels})
    real, _ = load_hf_bert(str(base), "token_classification", 2)
    tagger = to_transformers(complexify(real, r=2))
    mlm_real, _ = load_hf_bert(str(base), "mlm")  # no MLM head in the base: a new one
    mlm = to_transformers(complexify(mlm_real, r=2, add_mlm_head=True))
    mlm_rows = [dict(tok(" ".join(w), truncation=True, max_length=16)) for w in sents]
    for model, ds, collator in (
        (tagger, rows, transformers.DataCollatorForTokenClassification(tok)),
        (mlm, mlm_rows, transformers.DataCollatorForLanguageModeling(tok, mlm_probability=0.3)),
    ):
        before = _snapshot(model)
        trainer = transformers.Trainer(
            model=model,
            args=transformers.TrainingArguments(
                output_dir=str(tmp_path / "t"),
                per_device_train_batch_size=4,
                max_steps=3,
                learning_rate=1e-2,
                report_to=[],
                save_strategy="no",
                use_cpu=True,
                disable_tqdm=True,
            ),  # fmt: skip
            train_dataset=datasets.Dataset.from_list(ds),
            data_collator=collator,
        )
        out = trainer.train()
        assert torch.isfinite(torch.tensor(out.training_loss))
        trains = {n for n, p in model.named_parameters() if p.requires_grad}
        after = dict(model.named_parameters())
        changed = {n for n in before if not torch.equal(before[n], after[n])}
        assert changed and changed <= trains
        assert any(".lora_" in n for n in changed)
    # the MLM model with an added head (complexified from a BertModel) round-trips too
    mlm.save_pretrained(tmp_path / "mlm")
    back = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "mlm").eval()
    enc = tok(["alpha parser reads", "beta"], padding=True, return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(back(**enc).logits, mlm.eval()(**enc).logits, rtol=0, atol=0)
    assert back.cmplxbert.bert.pooler is not None  # the BertModel's pooler is kept


def test_trainer_checkpoints_hold_what_trains_and_resume_to_the_same_weights(tmp_path):
    """Trainer's checkpoints are trainable-only save_pretrained folders; a run resumed from
    the step-3 checkpoint ends with the uninterrupted run's weights, and the checkpoint loads
    on its own (rebuilt on the base)."""
    import datasets
    import transformers
    from safetensors import safe_open

    from complexformer.hf.cmplxbert import to_transformers

    base = save_tiny_bert_dir(tmp_path / "bert", "BertModel")
    tok = transformers.AutoTokenizer.from_pretrained(str(base))
    rng = random.Random(0)
    rows = []
    for i in range(24):
        words = [rng.choice(WORDS) for _ in range(5)]
        rows.append({**tok(" ".join(words), truncation=True, max_length=16), "labels": i % 2})

    def trainer(out, steps):
        real, _ = load_hf_bert(str(base), "classification", 2)
        torch.manual_seed(0)
        model = to_transformers(complexify(real, r=2))
        args = transformers.TrainingArguments(
            output_dir=str(out), per_device_train_batch_size=4, max_steps=steps,
            learning_rate=1e-2, report_to=[], save_strategy="steps", save_steps=3,
            use_cpu=True, disable_tqdm=True, seed=0, data_seed=0,
        )  # fmt: skip
        return model, transformers.Trainer(
            model=model, args=args, train_dataset=datasets.Dataset.from_list(rows),
            data_collator=transformers.DataCollatorWithPadding(tok),
        )  # fmt: skip

    whole, t = trainer(tmp_path / "whole", 6)
    t.train()
    ckpt = tmp_path / "whole" / "checkpoint-3"
    with safe_open(str(ckpt / "model.safetensors"), "pt") as f:
        saved = set(f.keys())
    trains = {n for n, p in whole.named_parameters() if p.requires_grad}
    assert saved == trains
    assert json.loads((ckpt / "config.json").read_text())["saved_weights"] == "trainable"
    resumed, t = trainer(tmp_path / "resumed", 6)
    t.train(resume_from_checkpoint=str(ckpt))
    for (n, a), b in zip(whole.state_dict().items(), resumed.state_dict().values(), strict=True):
        torch.testing.assert_close(b, a, rtol=0, atol=0, msg=n)
    mid = transformers.AutoModelForSequenceClassification.from_pretrained(ckpt)
    assert {n for n, p in mid.named_parameters() if p.requires_grad} == trains
