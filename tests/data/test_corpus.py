"""Corpora: spec parsing, hash splits, stdlib and text: loaders, hf: offline behaviour, errors."""

from __future__ import annotations

import hashlib
import json
import sys
import types
from collections import Counter
from pathlib import Path

import pytest

from complexformer.data import (
    SPLITS,
    DataSpec,
    FileCorpus,
    HFCorpus,
    expand_text_glob,
    list_stdlib_files,
    load_corpus,
    parse_data_spec,
    split_of,
    stdlib_corpus,
    text_corpus,
)
from complexformer.data.files import stdlib_root

EVEN = (0.6, 0.2, 0.2)  # fractions that give small corpora non-empty val/test splits
ASYM = (0.93, 0.05, 0.02)  # val and test differ, so swapping them fails the checks


def _naive_split(key: str, fractions) -> str:
    """The per-document rule written out: blake2b (64 bits, person "cf-split") of the key
    as u in [0, 1); train below the train fraction, then val, then test."""
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8, person=b"cf-split").digest()
    u = int.from_bytes(digest, "big") / 2.0**64
    if u < fractions[0]:
        return "train"
    return "val" if u < fractions[0] + fractions[1] else "test"


def write_text_tree(root: Path, n: int = 30, tag: str = "") -> list[Path]:
    """``n`` small .txt files in two sub-directories."""
    paths = []
    for i in range(n):
        p = root / f"sub{i % 2}" / f"doc_{i}.txt"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"def f{i}(x):{tag}\n    return x * {i}\n", encoding="utf-8")
        paths.append(p)
    return paths


# -- splits -------------------------------------------------------------------------------


def test_split_of_is_stable_and_matches_fractions():
    # Pinned values: the split must not change across machines, versions and runs.
    assert split_of("pkg/mod_0.py") == "train"
    assert split_of("pkg/mod_95.py") == "val"
    assert split_of("pkg/mod_767.py") == "test"
    keys = [f"dir{i % 7}/file_{i}.py" for i in range(20000)]
    counts = Counter(split_of(k) for k in keys)
    assert counts["train"] / len(keys) == pytest.approx(0.98, abs=0.005)
    assert counts["val"] / len(keys) == pytest.approx(0.01, abs=0.003)
    assert counts["test"] / len(keys) == pytest.approx(0.01, abs=0.003)
    reference = [_naive_split(k, ASYM) for k in keys]
    assert [split_of(k, ASYM) for k in keys] == reference
    counts = Counter(reference)
    assert counts["val"] / len(keys) == pytest.approx(0.05, abs=0.006)
    assert counts["test"] / len(keys) == pytest.approx(0.02, abs=0.004)
    counts = Counter(split_of(k, EVEN) for k in keys)
    assert counts["val"] / len(keys) == pytest.approx(0.2, abs=0.02)
    assert {split_of(k, (1.0, 0.0, 0.0)) for k in keys[:200]} == {"train"}


@pytest.mark.parametrize("bad", [(0.5, 0.5), (0.9, 0.2, -0.1), (0.5, 0.3, 0.3)])
def test_split_fractions_validated(bad):
    with pytest.raises(ValueError, match="fractions"):
        split_of("a.py", bad)


# -- spec parsing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (None, DataSpec("stdlib")),
        ("", DataSpec("stdlib")),
        ("stdlib", DataSpec("stdlib")),
        (" stdlib ", DataSpec("stdlib")),
        ("text:data/**/*.txt", DataSpec("text", pattern="data/**/*.txt")),
        ("text:C:/x/*.jsonl", DataSpec("text", pattern="C:/x/*.jsonl")),
        ("hf:wikitext", DataSpec("hf", name="wikitext")),
        (
            "hf:Salesforce/wikitext:wikitext-103-raw-v1",
            DataSpec("hf", name="Salesforce/wikitext", config="wikitext-103-raw-v1"),
        ),
    ],
)
def test_parse_data_spec(spec, expected):
    parsed = parse_data_spec(spec)
    assert parsed == expected
    assert parse_data_spec(str(parsed)) == parsed


def test_parse_data_spec_errors():
    with pytest.raises(ValueError, match=r"unknown data spec 'foo:bar'.*stdlib.*text:GLOB.*hf:"):
        parse_data_spec("foo:bar")
    with pytest.raises(ValueError, match="unknown data spec 'wikitext'"):
        parse_data_spec("wikitext")
    with pytest.raises(ValueError, match="text:GLOB"):
        parse_data_spec("text:")
    with pytest.raises(ValueError, match=r"hf:NAME\[:CONFIG\]"):
        parse_data_spec("hf:")
    with pytest.raises(ValueError, match="no argument"):
        parse_data_spec("stdlib:foo")
    with pytest.raises(ValueError, match="unknown data spec"):
        load_corpus("nope:x")


# -- stdlib -------------------------------------------------------------------------------


def test_stdlib_listing_split_and_determinism():
    files = list_stdlib_files()
    assert files, "the interpreter's standard library has .py files"
    rel = [f.relative_to(stdlib_root()).as_posix() for f in files]
    assert not any(part in ("site-packages", "dist-packages") for r in rel for part in r.split("/"))
    assert all(r.endswith(".py") for r in rel)

    a = load_corpus("stdlib")
    b = stdlib_corpus()
    for split in SPLITS:
        assert a.files(split) == b.files(split)
        assert a.fingerprint(split) == b.fingerprint(split)
        assert a.stats[split] == b.stats[split]
        assert all(split_of(r) == split for r in a.files(split))
    total = sum(a.stats[s].n_files for s in SPLITS)
    assert a.stats["train"].n_files / total > 0.95
    for split in ("val", "test"):
        assert 0.002 < a.stats[split].n_files / total < 0.03
    assert a.stats["train"].n_bytes > 1_000_000
    assert all("not UTF-8" in s for s in a.skipped)
    assert "train" in a.describe() and "bytes" in a.describe()


# -- text: --------------------------------------------------------------------------------


def test_split_depends_only_on_relative_path(tmp_path):
    write_text_tree(tmp_path / "a", n=40, tag="# a")
    write_text_tree(tmp_path / "b", n=60, tag="# different content")
    ca = text_corpus(str(tmp_path / "a"), fractions=EVEN)
    cb = text_corpus(str(tmp_path / "b" / "**" / "*.txt"), fractions=EVEN)
    split_a = {r: s for s in SPLITS for r in ca.files(s)}
    split_b = {r: s for s in SPLITS for r in cb.files(s)}
    assert set(split_a) < set(split_b)
    assert all(split_b[r] == s for r, s in split_a.items())
    assert all(split_of(r, EVEN) == s for r, s in split_a.items())
    assert all(not r.startswith("/") and r.startswith("sub") for r in split_a)


def test_text_corpus_documents_txt_and_jsonl(tmp_path):
    root = tmp_path / "corpus"
    write_text_tree(root, n=20)
    (root / "blank.txt").write_text("  \n\n", encoding="utf-8")  # empty document: skipped
    lines = [json.dumps({"body": f"line {i} é 🎉", "id": i}) for i in range(50)]
    lines.insert(10, "")  # blank line: ignored, but line numbers stay physical
    (root / "data.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "ignored.csv").write_text("a,b\n", encoding="utf-8")

    corpus = load_corpus(f"text:{root}/**/*", text_field="body", fractions=EVEN)
    docs = {s: list(corpus.documents(s)) for s in SPLITS}
    all_docs = [d for s in SPLITS for d in docs[s]]
    assert len(all_docs) == 20 + 50
    assert sorted(d for d in all_docs if d.startswith("line")) == sorted(
        f"line {i} é 🎉" for i in range(50)
    )
    for split in SPLITS:
        assert corpus.stats[split].n_docs == len(docs[split])
        assert corpus.stats[split].n_bytes == sum(len(d.encode()) for d in docs[split])
    # a JSONL line's split is keyed by "<relative path>:<physical line number>"
    for lineno, line in enumerate(lines, start=1):
        if line:
            text = json.loads(line)["body"]
            assert text in docs[split_of(f"data.jsonl:{lineno}", EVEN)]
    it = corpus.documents("train")
    assert iter(it) is it  # streamed, not a list
    # same spec twice -> identical splits
    again = load_corpus(f"text:{root}/**/*", text_field="body", fractions=EVEN)
    assert {s: list(again.documents(s)) for s in SPLITS} == docs


def test_non_utf8_text_file_is_skipped(tmp_path):
    write_text_tree(tmp_path, n=5)
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    corpus = text_corpus(str(tmp_path))
    assert corpus.skipped == ["latin1.txt (not UTF-8)"]
    assert sum(corpus.stats[s].n_docs for s in SPLITS) == 5


def test_text_corpus_errors(tmp_path):
    with pytest.raises(ValueError, match=r"glob '.*nothing/\*\.txt' matched no file"):
        load_corpus(f"text:{tmp_path}/nothing/*.txt")
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        load_corpus(f"text:{tmp_path}/missing.txt")
    (tmp_path / "x.csv").write_text("a\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"none ends in \.txt or \.jsonl"):
        expand_text_glob(f"{tmp_path}/*")
    (tmp_path / "empty.txt").write_text("   \n", encoding="utf-8")
    with pytest.raises(ValueError, match="is empty: it has no non-empty documents"):
        load_corpus(f"text:{tmp_path}/*.txt")

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.jsonl").write_text('{"content": "x"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"a\.jsonl:1: no field 'text'.*'content'"):
        load_corpus(f"text:{bad}")
    (bad / "a.jsonl").write_text('{"text": "ok"}\n{not json\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"a\.jsonl:2: invalid JSON"):
        load_corpus(f"text:{bad}")
    (bad / "a.jsonl").write_text('{"text": 3}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="must be a string"):
        load_corpus(f"text:{bad}")
    (bad / "ok.txt").write_text("ok\n", encoding="utf-8")
    with pytest.raises(
        ValueError, match="unknown split 'validation'; expected one of train, val, test$"
    ):
        next(FileCorpus("x", tmp_path, [bad / "ok.txt"]).documents("validation"))


def test_train_split_must_not_be_empty(tmp_path):
    # one document that hashes into val under these fractions
    (tmp_path / "only.txt").write_text("hello\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no document in its train split"):
        text_corpus(str(tmp_path), fractions=(0.0, 1.0, 0.0))


# -- hf: (offline) ------------------------------------------------------------------------


def test_hf_without_datasets_raises_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` fail
    with pytest.raises(ImportError, match=r"pip install 'complexformer\[hf\]'"):
        load_corpus("hf:Salesforce/wikitext:wikitext-103-raw-v1")


class _FakeDataset:
    """The slice of the ``datasets.Dataset`` API that HFCorpus uses."""

    def __init__(self, rows: dict[str, list], fingerprint: str):
        self._rows, self._fingerprint = rows, fingerprint

    @property
    def column_names(self) -> list[str]:
        return list(self._rows)

    def __len__(self) -> int:
        return len(next(iter(self._rows.values())))

    def select_columns(self, cols):
        return _FakeDataset({c: self._rows[c] for c in cols}, self._fingerprint + "+sel")

    def iter(self, batch_size):
        for i in range(0, len(self), batch_size):
            yield {c: v[i : i + batch_size] for c, v in self._rows.items()}


def _fake_datasets(monkeypatch, splits: dict[str, list[str]], calls: list):
    module = types.ModuleType("datasets")

    def load_dataset(name, config=None, **kwargs):
        calls.append((name, config, kwargs))
        return {
            k: _FakeDataset({"text": v, "n": list(range(len(v)))}, f"fp-{k}")
            for k, v in splits.items()
        }

    module.load_dataset = load_dataset
    monkeypatch.setitem(sys.modules, "datasets", module)


def test_hf_corpus_uses_native_splits_and_carves_missing_ones(monkeypatch):
    calls: list = []
    train = [f"row {i}" if i % 10 else "" for i in range(3000)]
    _fake_datasets(monkeypatch, {"train": train, "validation": ["v1", "", "v2"]}, calls)
    # the memory-mapped path (a Hub name streams by default: tests/data/test_hf.py)
    corpus = load_corpus("hf:Salesforce/wikitext:wikitext-103-raw-v1", log=None, hf_streaming=False)
    assert isinstance(corpus, HFCorpus)
    assert calls == [("Salesforce/wikitext", "wikitext-103-raw-v1", {"streaming": False})]
    assert list(corpus.documents("val")) == ["v1", "v2"]
    test_docs = list(corpus.documents("test"))  # no native test split: carved out of train
    train_docs = list(corpus.documents("train"))
    assert 0 < len(test_docs) < 100
    assert set(test_docs).isdisjoint(train_docs)
    assert sorted(test_docs + train_docs) == sorted(t for t in train if t)
    assert all(split_of(d.split()[1]) == "test" for d in test_docs)
    assert corpus.stats["val"].n_docs == 2
    assert corpus.stats["train"].n_docs == len(train_docs)
    again = load_corpus(corpus.spec, hf_streaming=False)
    assert corpus.fingerprint("train") == again.fingerprint("train")
    assert len({corpus.fingerprint(s) for s in SPLITS}) == 3


def test_hf_corpus_errors(monkeypatch):
    _fake_datasets(monkeypatch, {"validation": ["a"]}, [])
    with pytest.raises(ValueError, match=r"no 'train' split \(it has: validation\)"):
        load_corpus("hf:some/data", hf_streaming=False)
    _fake_datasets(monkeypatch, {"train": ["a"]}, [])
    with pytest.raises(ValueError, match=r"no column 'body' \(columns: text, n\)"):
        load_corpus("hf:some/data", text_field="body", hf_streaming=False)
    _fake_datasets(monkeypatch, {"train": ["", " "]}, [])
    with pytest.raises(ValueError, match="is empty"):
        load_corpus("hf:some/data", hf_streaming=False)


def test_hf_corpus_with_real_datasets_objects(monkeypatch):
    datasets = pytest.importorskip("datasets")
    dd = datasets.DatasetDict(
        train=datasets.Dataset.from_dict({"text": [f"t{i}" for i in range(200)] + [""]}),
        validation=datasets.Dataset.from_dict({"text": ["v0", "v1"]}),
        test=datasets.Dataset.from_dict({"text": ["x0"]}),
    )
    monkeypatch.setattr(datasets, "load_dataset", lambda name, config=None, **kw: dd)
    corpus = load_corpus("hf:local/fake")
    assert list(corpus.documents("val")) == ["v0", "v1"]
    assert list(corpus.documents("test")) == ["x0"]
    assert list(corpus.documents("train")) == [f"t{i}" for i in range(200)]
    assert corpus.stats["train"].n_docs == 200
    assert corpus.fingerprint("train") == load_corpus("hf:local/fake").fingerprint("train")
