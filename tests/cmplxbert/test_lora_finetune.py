"""Fine-tuning: metrics against scikit-learn, the real LoRA baseline, one run on the shared
loop, the shuffled epochs and the trainable parameters of each model kind (the comparison of
the kinds over seeds is tests/lab/cmplxbert/test_finetune_comparison.py)."""

from __future__ import annotations

import json
import random

import pytest
from torch import nn

from complexformer.cmplxbert.finetune import FinetuneConfig, build_classifier, finetune_one
from complexformer.cmplxbert.metrics import classification_metrics, macro_f1, mean_std
from complexformer.cmplxbert.real import RealLoRALinear, add_real_lora
from tests.cmplxbert.lora_testlib import save_tiny_bert_dir

pytest.importorskip("transformers")


def test_macro_f1_and_accuracy_match_sklearn():
    from sklearn.metrics import accuracy_score, f1_score

    rng = random.Random(0)
    for _ in range(20):
        n = rng.randint(1, 40)
        y = [rng.randrange(5) for _ in range(n)]
        p = [rng.randrange(6) for _ in range(n)]
        m = classification_metrics(y, p)
        assert m["accuracy"] == pytest.approx(accuracy_score(y, p))
        assert m["macro_f1"] == pytest.approx(f1_score(y, p, average="macro"))
    assert macro_f1([0, 0, 1], [0, 0, 1]) == 1.0
    assert mean_std([1.0, 2.0, 3.0]) == pytest.approx((2.0, 1.0))
    assert mean_std([0.5]) == (0.5, 0.0)
    with pytest.raises(ValueError, match="equal length"):
        classification_metrics([1, 2], [1])


def test_add_real_lora_replaces_the_targeted_linears():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    names = add_real_lora(model, 2, ["0"])
    assert names == ["0"] and isinstance(model[0], RealLoRALinear)
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == 2 * (4 + 4)
    with pytest.raises(ValueError, match="match no Linear"):
        add_real_lora(nn.Sequential(nn.Linear(2, 2)), 2, ["nothing"])


def _task_dir(root):
    """A small, learnable, real-text task: docstrings of two stdlib modules."""
    import inspect
    import json as js
    import os
    import string

    rows = []
    for label, mod in ((0, os), (1, string)):
        for name in sorted(dir(mod)):
            doc = inspect.getdoc(getattr(mod, name))
            if doc and not name.startswith("_"):
                rows.append({"text": doc[:200], "label": label})
    root.mkdir(parents=True, exist_ok=True)
    path = root / "task.jsonl"
    path.write_text("\n".join(js.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return str(path)


def test_finetune_runs_on_the_shared_loop_with_its_weight_decay_rule(tmp_path):
    """Fine-tuning is a TrainTask of the shared training loop: per-step metrics in the run
    folder, the result written by the task, checkpoints removed once done; its optimizer's
    decay groups are the loop's (only the new classifier's nn.Linear weight decays, never the
    complex biases, complex LayerNorm affines or LoRA factors)."""
    from complexformer.training.optim import decay_split, param_groups

    base = str(save_tiny_bert_dir(tmp_path / "bert", "BertModel"))
    cfg = FinetuneConfig(
        task=_task_dir(tmp_path / "task"),
        models=("cmplxbert",),
        seeds=(0,),
        epochs=2,
        lr=1e-3,
        batch_size=8,
        max_len=24,
        max_train_examples=40,
        num_threads=1,
        device="cpu",
        pooling="cls",
    )
    run = tmp_path / "ft"
    rec = finetune_one(base, cfg, run, log=None)
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 11))  # 2 epochs of ceil(40 / 8) updates
    assert not (run / "checkpoints").exists()
    result = json.loads((run / "model" / "result.json").read_text())
    assert result["test"] == rec["test"]
    assert rec["train_loss_first"] == rows[0]["train_loss"]

    model = build_classifier("cmplxbert", base, 2, cfg)
    decay, no_decay = decay_split(model)
    assert decay == ["classifier.base_layer.weight"]
    assert any(n.endswith("bias_c") for n in no_decay)
    assert any("LayerNorm" in n for n in no_decay)
    assert any(n.endswith("lora_A") for n in no_decay)
    groups = {g["name"]: g for g in param_groups(model, cfg.weight_decay)}
    assert groups["decay"]["weight_decay"] == cfg.weight_decay
    assert groups["no_decay"]["weight_decay"] == 0.0


def test_finetune_batches_are_shuffled_epochs():
    """The examples of update s are the (s-1)-th batch of the epochs' shuffles of
    random.Random(seed), each epoch visiting every example once (the last batch smaller)."""
    from complexformer.cmplxbert.finetune_task import FinetuneTask

    n, bs, seed = 23, 5, 7
    data = {s: ([[1]] * n, [0] * n) for s in ("train", "validation", "test")}
    task = FinetuneTask("x", lambda: None, data, {}, seed, bs, 0)
    assert task.steps_per_epoch == 5
    rng, expect = random.Random(seed), []
    for _ in range(3):
        order = list(range(n))
        rng.shuffle(order)
        expect += [order[i : i + bs] for i in range(0, n, bs)]
    got = [task.batch_rows(step, 0) for step in range(1, 16)]
    assert got == expect


def test_build_classifier_trains_only_the_documented_parameters(tmp_path):
    base = str(save_tiny_bert_dir(tmp_path / "bert", "BertModel"))
    cfg = FinetuneConfig(task="x", num_threads=1)
    cb = build_classifier("cmplxbert", base, 3, cfg)
    trainable = [n for n, p in cb.named_parameters() if p.requires_grad]
    assert "classifier.base_layer.weight" in trainable  # the new head learns
    assert all(
        ("lora_" in n or "bias_c" in n or "norm" in n.lower() or n.startswith("classifier."))
        for n in trainable
    ), trainable
    rl = build_classifier("real-lora", base, 3, cfg, real_lora_rank=4)
    names = [n for n, p in rl.named_parameters() if p.requires_grad]
    assert all("lora_" in n or "LayerNorm" in n or n.startswith("classifier.") for n in names)
    with pytest.raises(ValueError, match="unknown model kind"):
        FinetuneConfig(models=("cmplx",))
