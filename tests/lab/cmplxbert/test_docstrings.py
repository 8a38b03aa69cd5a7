"""Tests for the stdlib docstring -> module classification dataset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from complexformer_lab.cmplxbert.docstrings import (
    DOCSTRING_SPLITS,
    assign_file_splits,
    build_docstring_dataset,
    collect_docstrings,
    list_docstring_files,
    load_jsonl_split,
    main,
    mask_label,
)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _func(name: str, doc: str) -> str:
    return f'def {name}():\n    """{doc}"""\n\n\n'


@pytest.fixture()
def fake_stdlib(tmp_path: Path) -> Path:
    root = tmp_path / "lib"
    words = {"alpha": "apple", "beta": "banana", "gamma": "cherry"}
    for pkg in ("alpha", "beta", "gamma"):
        for i in range(6):
            body = "".join(
                _func(f"f{j}", f"{words[pkg]} function number {j} in file {i}, doing things.")
                for j in range(3)
            )
            _write(root / pkg / f"m{i}.py", body)
    # a class with a method and a nested def
    _write(
        root / "alpha" / "cls.py",
        'class Foo:\n    """The Foo class of the ALPHA package."""\n\n'
        '    def bar(self):\n        """Bar method, long enough docstring."""\n'
        '        def inner():\n            """Inner helper with a docstring."""\n',
    )
    # ambiguous: same text under two labels -> dropped; duplicate under one -> kept once
    _write(root / "alpha" / "dup1.py", _func("x", "Shared docstring across packages."))
    _write(root / "beta" / "dup2.py", _func("y", "Shared docstring across packages."))
    _write(root / "gamma" / "rep1.py", _func("z", "Repeated docstring within one package."))
    _write(root / "gamma" / "rep2.py", _func("z", "Repeated docstring within one package."))
    # too short, excluded dirs/files, bad files
    _write(root / "beta" / "short.py", _func("s", "tiny"))
    _write(root / "test" / "t.py", _func("t", "A docstring in the test directory."))
    _write(root / "alpha" / "tests" / "t.py", _func("t", "A docstring in a tests directory."))
    _write(root / "idlelib" / "idle_test" / "t.py", _func("t", "A docstring in idle_test dir."))
    _write(root / "alpha" / "test_thing.py", _func("t", "A docstring in a test_ file."))
    _write(root / "site-packages" / "x.py", _func("t", "A docstring in site-packages."))
    _write(root / "broken.py", "def (:\n")
    (root / "latin.py").write_bytes(b'def f():\n    """Caf\xe9 is not utf-8 here at all."""\n')
    # single-file module with many docstrings: not eligible with min_files=5
    _write(
        root / "solo.py", "".join(_func(f"s{j}", f"Solo docstring number {j}.") for j in range(40))
    )
    return root


def test_list_files_excludes_tests_and_site_packages(fake_stdlib: Path) -> None:
    rels = [p.relative_to(fake_stdlib).as_posix() for p in list_docstring_files(fake_stdlib)]
    assert rels == sorted(rels)
    assert not any(
        part in ("test", "tests", "idle_test", "site-packages")
        for r in rels
        for part in r.split("/")
    )
    assert "alpha/test_thing.py" not in rels
    assert "alpha/cls.py" in rels and "solo.py" in rels


def test_collect_parses_and_labels(fake_stdlib: Path) -> None:
    exs = collect_docstrings(fake_stdlib, min_chars=20)
    sources = {e.source: e for e in exs}
    assert sources["alpha/cls.py::Foo"].text == "The Foo class of the ALPHA package."
    assert "alpha/cls.py::Foo.bar" in sources
    assert sources["alpha/cls.py::Foo.bar.inner"].label == "alpha"
    assert sources["solo.py::s0"].label == "solo"
    assert not any(e.source.startswith(("broken.py", "latin.py")) for e in exs)
    assert not any("tiny" == e.text for e in exs)
    assert not any("test" in e.source for e in exs)


def test_mask_label() -> None:
    assert mask_label("Use asyncio.Future, see Asyncio docs", "asyncio") == (
        "Use <mod>.Future, see <mod> docs"
    )
    assert mask_label("emailmessage and json_data", "email") == "emailmessage and json_data"


def test_build_labels_masking_dedup(fake_stdlib: Path) -> None:
    ds = build_docstring_dataset(n_classes=3, root=fake_stdlib)
    assert ds.labels == ["alpha", "beta", "gamma"]  # solo has 40 but only 1 file
    allx = [e for s in DOCSTRING_SPLITS for e in ds.splits[s]]
    texts = [e.text for e in allx]
    assert len(texts) == len(set(texts))
    assert "Shared docstring across packages." not in texts
    assert texts.count("Repeated docstring within one package.") == 1
    foo = next(e for e in allx if e.source == "alpha/cls.py::Foo")
    assert foo.text == "The Foo class of the <mod> package."
    assert not any("alpha" in e.text.lower() and e.label == "alpha" for e in allx)
    unmasked = build_docstring_dataset(n_classes=3, root=fake_stdlib, mask_labels=False)
    foo = next(e for s in unmasked.splits.values() for e in s if e.source == "alpha/cls.py::Foo")
    assert "ALPHA" in foo.text
    with_solo = build_docstring_dataset(n_classes=3, root=fake_stdlib, min_files=1)
    assert "solo" in with_solo.labels


def test_split_grouped_by_file_and_deterministic(fake_stdlib: Path) -> None:
    a = build_docstring_dataset(n_classes=3, root=fake_stdlib)
    b = build_docstring_dataset(n_classes=3, root=fake_stdlib)
    assert a.splits == b.splits and a.labels == b.labels
    split_of_file: dict[str, str] = {}
    for s in DOCSTRING_SPLITS:
        assert a.splits[s], s
        for e in a.splits[s]:
            f = e.source.split("::")[0]
            assert split_of_file.setdefault(f, s) == s
    st = a.stats()
    assert st["total"] == len(a) == sum(st["sizes"].values())
    assert sum(st["counts"]["train"].values()) == st["sizes"]["train"]


def test_assign_file_splits_balanced() -> None:
    counts = {f"f{i}.py": 10 for i in range(20)}
    out = assign_file_splits(counts)
    assert out == assign_file_splits(dict(reversed(list(counts.items()))))
    n = {s: sum(1 for v in out.values() if v == s) for s in DOCSTRING_SPLITS}
    assert n == {"train": 16, "validation": 2, "test": 2}


def test_max_per_class(fake_stdlib: Path) -> None:
    ds = build_docstring_dataset(n_classes=3, root=fake_stdlib, max_per_class=5)
    st = ds.stats()
    for lab in ds.labels:
        assert sum(st["counts"][s][lab] for s in DOCSTRING_SPLITS) == 5


def test_jsonl_round_trip_and_cli(fake_stdlib: Path, tmp_path: Path, capsys) -> None:
    ds = build_docstring_dataset(n_classes=3, root=fake_stdlib)
    out = tmp_path / "out"
    written = ds.write_jsonl(out)
    assert sorted(p.name for p in out.iterdir()) == [
        "labels.json",
        "test.jsonl",
        "train.jsonl",
        "validation.jsonl",
    ]
    assert set(written) == {*DOCSTRING_SPLITS, "labels"}
    meta = json.loads((out / "labels.json").read_text(encoding="utf-8"))
    assert meta["labels"] == ds.labels
    for s in DOCSTRING_SPLITS:
        recs = load_jsonl_split(out / f"{s}.jsonl")
        assert [(r["text"], r["label_name"], r["source"]) for r in recs] == [
            (e.text, e.label, e.source) for e in ds.splits[s]
        ]
        assert all(ds.labels[r["label"]] == r["label_name"] for r in recs)
    assert main(["--root", str(fake_stdlib), "--n-classes", "3", "--out", str(tmp_path / "c")]) == 0
    printed = capsys.readouterr().out
    assert "| alpha |" in printed and "majority" in printed
    assert load_jsonl_split(tmp_path / "c" / "train.jsonl") == load_jsonl_split(out / "train.jsonl")


def test_real_stdlib() -> None:
    a = build_docstring_dataset()
    assert len(a) >= 1000
    assert len(a.labels) == 10
    st = a.stats()
    for s in DOCSTRING_SPLITS:
        assert st["sizes"][s] > 0
    assert st["majority_accuracy"]["test"] < 0.5
    b = build_docstring_dataset()
    assert a.splits == b.splits and a.labels == b.labels
