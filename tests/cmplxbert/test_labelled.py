"""Labelled classification data: local JSONL / CSV files and folders, label numbering, the
docstring task, and clear errors."""

from __future__ import annotations

import csv
import json

import pytest

from complexformer.cmplxbert.labelled import load_classification_task


def _jsonl(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_single_jsonl_file_is_split_by_text_hash_and_labels_numbered(tmp_path):
    rows = [
        {"text": f"sentence number {i}", "label": ["neg", "pos", "mid"][i % 3]} for i in range(300)
    ]
    task = load_classification_task(str(_jsonl(tmp_path / "d.jsonl", rows)))
    assert task.labels == ["mid", "neg", "pos"]  # sorted names
    sizes = task.stats()
    assert sum(sizes.values()) == 300
    assert 200 < sizes["train"] < 280 and sizes["validation"] > 10 and sizes["test"] > 10
    # every text keeps its label, and splits are disjoint
    seen = {}
    for texts, labels in task.splits.values():
        for t, y in zip(texts, labels, strict=True):
            assert t not in seen
            seen[t] = task.labels[y]
    assert all(seen[f"sentence number {i}"] == ["neg", "pos", "mid"][i % 3] for i in range(300))
    again = load_classification_task(str(tmp_path / "d.jsonl"))
    assert again.splits == task.splits  # deterministic


def test_folder_of_csv_files_with_integer_labels(tmp_path):
    for split, n in (("train", 20), ("val", 6), ("test", 8)):
        with open(tmp_path / f"{split}.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=["sentence", "y"])
            w.writeheader()
            for i in range(n):
                w.writerow({"sentence": f"{split} {i}", "y": i % 2})
    task = load_classification_task(str(tmp_path), text_field="sentence", label_field="y")
    assert task.labels == ["0", "1"] and task.stats() == {"train": 20, "validation": 6, "test": 8}
    assert task.splits["test"][1] == [i % 2 for i in range(8)]
    maj = task.majority_baseline()
    assert maj["label"] == "0" and maj["accuracy"] == pytest.approx(0.5)


def test_bad_inputs_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        load_classification_task(str(tmp_path / "missing.jsonl"))
    bad = _jsonl(tmp_path / "b.jsonl", [{"txt": "a", "label": 0}])
    with pytest.raises(ValueError, match="lacks the field 'text'"):
        load_classification_task(str(bad))
    one = _jsonl(tmp_path / "one.jsonl", [{"text": f"t{i}", "label": 1} for i in range(30)])
    with pytest.raises(ValueError, match="need at least 2"):
        load_classification_task(str(one))
    (tmp_path / "x.txt").write_text("a")
    with pytest.raises(ValueError, match="unsupported file type"):
        load_classification_task(str(tmp_path / "x.txt"))


def test_docstring_task_spec():
    task = load_classification_task("docstrings")
    assert task.num_labels == 10
    assert min(task.stats().values()) > 100
    assert task.majority_baseline("test")["accuracy"] < 0.2
