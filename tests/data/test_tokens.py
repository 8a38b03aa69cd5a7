"""Token arrays: lossless packing with EOS after every document, dtype, on-disk cache."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import complexformer.data.tokens as tokens_mod
from complexformer.data import (
    SPLITS,
    load_token_splits,
    open_tokens,
    text_corpus,
    token_cache_path,
    token_dtype,
    tokenize_split,
    train_bpe,
)
from complexformer.data.cache import atomic_write


def write_mixed_corpus(root: Path) -> None:
    """.txt files of varying length (one very long) plus a .jsonl file."""
    for i in range(30):
        p = root / f"d{i % 4}" / f"file_{i}.txt"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# file {i} ü\n" + "x = [1, 2, 3]\n" * (i * 7 % 23 + 1), encoding="utf-8")
    (root / "big.txt").write_text("def long():\n    pass\n" * 3000, encoding="utf-8")
    rows = [{"text": f"row {i}: print('héllo {i}')"} for i in range(40)]
    (root / "rows.jsonl").write_text("\n".join(map(json.dumps, rows)) + "\n", encoding="utf-8")


@pytest.fixture()
def setup(tmp_path):
    write_mixed_corpus(tmp_path / "corpus")
    corpus = text_corpus(str(tmp_path / "corpus"), fractions=(0.6, 0.2, 0.2))
    tok = train_bpe(corpus.documents("train"), vocab_size=300)
    return corpus, tok, tmp_path / "cache"


def test_token_dtype():
    assert token_dtype(300) == np.uint16
    assert token_dtype(65536) == np.uint16
    assert token_dtype(65537) == np.uint32
    with pytest.raises(ValueError, match="vocab_size"):
        token_dtype(0)


def test_packing_is_lossless_with_eos_after_every_document(setup, monkeypatch):
    corpus, tok, cache = setup
    monkeypatch.setattr(tokens_mod, "_BATCH_DOCS", 7)  # force several batches
    arrays = load_token_splits(corpus, tok, cache_dir=cache, show_progress=False)
    for split in SPLITS:
        docs = list(corpus.documents(split))
        assert docs, f"the fixture gives every split documents ({split})"
        expected = np.array([t for d in docs for t in [*tok.encode(d), tok.eos_token_id]])
        arr = arrays[split]
        assert isinstance(arr, np.memmap) and arr.dtype == np.uint16 and arr.ndim == 1
        np.testing.assert_array_equal(arr, expected)
        assert arr[-1] == tok.eos_token_id
        assert int((arr == tok.eos_token_id).sum()) == len(docs)
        # documents decode back exactly, separated by EOS
        ends = np.flatnonzero(arr == tok.eos_token_id)
        starts = np.concatenate([[0], ends[:-1] + 1])
        assert [tok.decode(arr[s:e]) for s, e in zip(starts, ends, strict=True)] == docs


def test_token_cache_is_reused_and_keyed(setup, monkeypatch):
    corpus, tok, cache = setup
    first = tokenize_split(corpus, "val", tok, cache_dir=cache, show_progress=False)
    path = token_cache_path(corpus, "val", tok, cache)
    assert path.is_file() and path.suffix == ".bin" and path.name.startswith("val-")
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["n_tokens"] == len(first) and meta["n_docs"] == corpus.stats["val"].n_docs

    def fail(*args, **kwargs):
        raise AssertionError("cached split must not be re-tokenized")

    monkeypatch.setattr(tokens_mod, "pack_documents", fail)
    again = tokenize_split(corpus, "val", tok, cache_dir=cache, show_progress=False)
    np.testing.assert_array_equal(first, again)
    monkeypatch.undo()

    other_tok = train_bpe(corpus.documents("train"), vocab_size=280)
    assert token_cache_path(corpus, "val", other_tok, cache) != path
    assert token_cache_path(corpus, "test", tok, cache) != path
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]


def test_empty_split_gives_empty_array(tmp_path):
    write_mixed_corpus(tmp_path / "c")
    corpus = text_corpus(str(tmp_path / "c"), fractions=(1.0, 0.0, 0.0))
    tok = train_bpe(corpus.documents("train"), vocab_size=270)
    val = tokenize_split(corpus, "val", tok, cache_dir=tmp_path / "cache", show_progress=False)
    assert len(val) == 0 and val.dtype == np.uint16


class _BigVocabTokenizer:
    """A stand-in tokenizer whose ids need uint32."""

    vocab_size = 70_000
    eos_token_id = 69_999
    fingerprint = "big-vocab-test"

    def encode_batch(self, texts):
        return [[65_536 + (ord(c) % 1000) for c in t] for t in texts]


def test_uint32_for_large_vocabularies(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.txt").write_text("héllo", encoding="utf-8")
    corpus = text_corpus(str(tmp_path / "c"))
    tok = _BigVocabTokenizer()
    arr = tokenize_split(corpus, "train", tok, cache_dir=tmp_path / "cache", show_progress=False)
    assert arr.dtype == np.uint32
    assert arr.tolist() == [65_536 + ord(c) % 1000 for c in "héllo"] + [69_999]


def test_atomic_write_leaves_nothing_on_error(tmp_path):
    target = tmp_path / "out.bin"
    with pytest.raises(RuntimeError), atomic_write(target) as f:
        f.write(b"partial")
        raise RuntimeError("boom")
    assert not target.exists() and list(tmp_path.iterdir()) == []
    with atomic_write(target) as f:
        f.write(np.arange(5, dtype="<u2").tobytes())
    np.testing.assert_array_equal(open_tokens(target, np.uint16), np.arange(5))
