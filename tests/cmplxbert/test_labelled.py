"""Labelled classification data: local JSONL / CSV files and folders, label numbering, tasks
registered by name (the lab's offline ones and one a test registers), and clear errors."""

from __future__ import annotations

import csv
import json
from importlib.metadata import EntryPoint

import pytest

import complexformer.cmplxbert.labelled as labelled
from complexformer.cli import main
from complexformer.cmplxbert.finetune import FinetuneConfig
from complexformer.cmplxbert.labelled import (
    TASKS_GROUP,
    ClassificationTask,
    NamedTask,
    describe_tasks,
    load_classification_task,
    named_task,
    task_names,
)


def _toy_task() -> ClassificationTask:
    splits = {s: ([("a b", "c"), ("d", "e f")], [0, 1]) for s in ("train", "validation", "test")}
    return ClassificationTask("toy-pairs", ["no", "yes"], splits, "pair")


#: a task registered below by a test, as another package would in its pyproject.toml
TOY_TASK = NamedTask("pair", _toy_task, "a toy pair task")
NOT_A_TASK = {"task_type": "pair"}


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


@pytest.fixture
def toy_registered(monkeypatch):
    """The installed entry points plus ``toy-pairs`` and ``broken`` in TASKS_GROUP."""
    original = labelled.entry_points
    installed = list(original(group=TASKS_GROUP))
    extra = [
        EntryPoint("toy-pairs", f"{__name__}:TOY_TASK", TASKS_GROUP),
        EntryPoint("broken", f"{__name__}:NOT_A_TASK", TASKS_GROUP),
    ]

    def fake(group):
        return [*installed, *extra] if group == TASKS_GROUP else original(group=group)

    monkeypatch.setattr(labelled, "entry_points", fake)


def test_the_lab_registers_its_three_offline_tasks_with_their_types():
    assert {"docstrings", "docstring-pairs", "code-tags"} <= set(task_names())
    types = {n: named_task(n).task_type for n in ("docstrings", "docstring-pairs", "code-tags")}
    assert types == {"docstrings": "sequence", "docstring-pairs": "pair", "code-tags": "token"}
    assert named_task("no-such-task") is None


def test_a_task_another_package_registers_is_found_by_name(toy_registered, tmp_path):
    assert "toy-pairs" in task_names()
    task = load_classification_task("toy-pairs", task_type="pair")
    assert (task.name, task.labels, task.task_type) == ("toy-pairs", ["no", "yes"], "pair")
    assert task.splits["test"] == _toy_task().splits["test"]
    assert FinetuneConfig(task="toy-pairs").task_type == "pair"  # the type comes with the name
    assert FinetuneConfig(task=str(tmp_path / "d.jsonl")).task_type == "sequence"
    with pytest.raises(ValueError, match="'toy-pairs' is a pair task, not 'sequence'"):
        load_classification_task("toy-pairs")
    with pytest.raises(TypeError, match=f"{__name__}:NOT_A_TASK .* is a dict, not a NamedTask"):
        load_classification_task("broken")
    with pytest.raises(FileNotFoundError, match=r"registered task \(.*toy-pairs"):
        load_classification_task(str(tmp_path / "missing.jsonl"))
    with pytest.raises(FileNotFoundError, match="'toy-pair': .*did you mean 'toy-pairs'"):
        load_classification_task("toy-pair")


def test_help_lists_every_registered_task_and_says_which_cannot_load(toy_registered, capsys):
    with pytest.raises(SystemExit):
        main(["cbert-finetune", "--help"])
    text = capsys.readouterr().out
    for name in task_names():
        if name != "broken":
            task = named_task(name)
            assert f"  {name} ({task.task_type}): {task.description}\n" in text
    assert "  toy-pairs (pair): a toy pair task\n" in text
    assert "  broken: cannot be loaded (" in describe_tasks()


def test_docstring_task_spec():
    task = load_classification_task("docstrings")
    assert task.num_labels == 10
    assert min(task.stats().values()) > 100
    assert task.majority_baseline("test")["accuracy"] < 0.2
