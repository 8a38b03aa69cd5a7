"""``hf:`` task specs without the network: ``datasets.load_dataset`` is replaced by in-memory
datasets with the features of the Hugging Face datasets users name (class labels with names,
sequences of tag labels, unlabelled test splits), and the loaded task is compared with the
rows themselves."""

from __future__ import annotations

import pytest

datasets = pytest.importorskip("datasets")

from complexformer.cmplxbert.labelled import load_classification_task  # noqa: E402
from complexformer.cmplxbert.metrics import is_bio  # noqa: E402

List = getattr(datasets, "List", None) or datasets.Sequence
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def _serve(monkeypatch, splits: dict, features) -> list:
    calls = []

    def load_dataset(name, config=None, **kw):
        calls.append((name, config))
        return datasets.DatasetDict(
            {s: datasets.Dataset.from_dict(rows, features=features) for s, rows in splits.items()}
        )

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


def test_hf_token_task_with_named_tag_sequences(monkeypatch):
    feats = datasets.Features(
        {
            "tokens": List(datasets.Value("string")),
            "ner_tags": List(datasets.ClassLabel(names=TAGS)),
        }
    )
    train = {
        "tokens": [["Ada", "Lovelace", "lived", "in", "London"], ["Paris", "is", "big"]],
        "ner_tags": [[1, 2, 0, 0, 3], [3, 0, 0]],
    }
    test = {"tokens": [["Alan", "Turing"]], "ner_tags": [[1, 2]]}
    calls = _serve(monkeypatch, {"train": train, "validation": test, "test": test}, feats)
    task = load_classification_task(
        "hf:conll2003:v1", text_field="tokens", label_field="ner_tags", task_type="token"
    )
    assert calls == [("conll2003", "v1")]
    assert task.labels == TAGS and is_bio(task.labels)  # the ClassLabel names, in their order
    words, tags = task.splits["train"]
    assert words == train["tokens"] and tags == train["ner_tags"]
    assert task.splits["test"] == (test["tokens"], test["ner_tags"])


def test_hf_pair_task_with_an_unlabelled_test_split_scores_on_validation(monkeypatch):
    names = ["entailment", "neutral", "contradiction"]
    feats = datasets.Features(
        {
            "premise": datasets.Value("string"),
            "hypothesis": datasets.Value("string"),
            "label": datasets.ClassLabel(names=names),
        }
    )
    train = {
        "premise": [f"premise {i}" for i in range(60)],
        "hypothesis": [f"hypothesis {i}" for i in range(60)],
        "label": [i % 3 for i in range(60)],
    }
    val = {"premise": ["e", "f"], "hypothesis": ["u", "v"], "label": [2, 0]}
    test = {"premise": ["g"], "hypothesis": ["t"], "label": [-1]}  # GLUE-style hidden labels
    _serve(monkeypatch, {"train": train, "validation": val, "test": test}, feats)
    task = load_classification_task(
        "hf:glue-like", text_field="premise", pair_field="hypothesis", task_type="pair"
    )
    assert task.task_type == "pair" and task.labels == names
    assert task.splits["test"] == ([("e", "u"), ("f", "v")], [2, 0])
    # the validation split became the test split: a held-out part of train validates
    rows = {p: i % 3 for i, p in enumerate(zip(train["premise"], train["hypothesis"], strict=True))}
    got = {}
    for s in ("train", "validation"):
        assert task.splits[s][0]
        got.update(zip(*task.splits[s], strict=True))
    assert got == rows


def test_hf_pair_task_names_a_missing_field(monkeypatch):
    feats = datasets.Features(
        {"premise": datasets.Value("string"), "label": datasets.Value("int64")}
    )
    _serve(monkeypatch, {"train": {"premise": ["a"], "label": [0]}}, feats)
    with pytest.raises(ValueError, match=r"lacks the field 'hypothesis'.*pair_field"):
        load_classification_task(
            "hf:x", text_field="premise", pair_field="hypothesis", task_type="pair"
        )
