"""Splits for any corpus: chunks for one file or a handful, whole files for many files.

References: the pieces of a chunked corpus are located in the original text (they must tile
it exactly, so the splits are disjoint and lose nothing); the old per-file rule is written out
naively here (blake2b of the relative path, 64 bits, thresholds at the cumulative fractions).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from complexformer.data.files import FileCorpus, stdlib_corpus, text_corpus
from complexformer.data.splits import (
    CHUNK_CHARS,
    SPLITS,
    allocate,
    assign_chunks,
    chunk_pieces,
    chunk_spans,
    use_chunks,
)
from complexformer.data.tokens import token_cache_path

ASYM = (0.93, 0.05, 0.02)  # val and test differ, so swapping them fails the checks
ROOT = Path(__file__).resolve().parents[2]


def _book(n_lines: int, tag: str) -> str:
    """Prose-like lines, each unique (so every piece is found at exactly one offset)."""
    words = "the of and a to in is was he that it his her with as for had you not be".split()
    lines = []
    for i in range(n_lines):
        body = " ".join(words[(i * 7 + j * 3) % len(words)] for j in range(8 + i % 9))
        lines.append(f"{tag} line {i}: {body}.\n")
    return "".join(lines)


def _old_split(relpath: str, fractions) -> str:
    """The per-file rule as it always was, written out."""
    h = hashlib.blake2b(relpath.encode("utf-8"), digest_size=8, person=b"cf-split")
    u = int.from_bytes(h.digest(), "big") / 2.0**64
    if u < fractions[0]:
        return "train"
    return "val" if u < fractions[0] + fractions[1] else "test"


def _tiling(texts: dict[str, str], corpus: FileCorpus) -> dict[str, int]:
    """Check the pieces of all splits tile every text exactly; return characters per split."""
    covered: dict[str, list[tuple[int, int, str]]] = {name: [] for name in texts}
    for split in SPLITS:
        for piece in corpus.documents(split):
            hits = [(n, t.find(piece)) for n, t in texts.items() if piece in t]
            assert len(hits) == 1, "a piece must come from exactly one document"
            name, start = hits[0]
            assert texts[name].find(piece, start + 1) == -1, "a piece must be unique"
            covered[name].append((start, start + len(piece), split))
    chars = dict.fromkeys(SPLITS, 0)
    for name, spans in covered.items():
        spans.sort()
        assert spans[0][0] == 0 and spans[-1][1] == len(texts[name])
        for (_, end, _), (start, _, _) in zip(spans, spans[1:], strict=False):
            assert end == start, f"{name}: pieces overlap or leave a gap at {end}/{start}"
        for start, end, split in spans:
            chars[split] += end - start
    return chars


def _check_fractions(chars: dict[str, int], fractions, tol: float = 0.01) -> None:
    total = sum(chars.values())
    for split, frac in zip(SPLITS, fractions, strict=True):
        assert chars[split] > 0, f"{split} is empty"
        assert abs(chars[split] / total - frac) < tol, (split, chars[split] / total, frac)


def test_one_file_yields_disjoint_val_and_test_near_the_fractions(tmp_path):
    text = _book(12000, "b")  # ~0.6 MB, ~600 chunks of 1,000 characters
    (tmp_path / "book.txt").write_text(text, encoding="utf-8")
    corpus = text_corpus(str(tmp_path / "book.txt"), fractions=ASYM, chunk_chars=1000)
    assert corpus.chunked and corpus.split_rule == "chunks-v1:1000"
    _check_fractions(_tiling({"book.txt": text}, corpus), ASYM)
    total = sum(s.n_bytes for s in corpus.stats.values())
    assert total == len(text.encode("utf-8"))
    assert corpus.files("val") == corpus.files("test") == ["book.txt"]


def test_three_files_yield_disjoint_val_and_test_near_the_fractions(tmp_path):
    texts = {f"{i}.txt": _book(4000 + 1000 * i, f"f{i}") for i in range(3)}
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    corpus = text_corpus(f"{tmp_path}/*.txt", fractions=ASYM, chunk_chars=1000)
    assert corpus.chunked
    _check_fractions(_tiling(texts, corpus), ASYM)
    bytes_ = {s: corpus.stats[s].n_bytes for s in SPLITS}
    assert bytes_ == _tiling(texts, corpus)  # ASCII: characters are bytes
    assert corpus.stats["train"].n_files == 3


def test_a_short_book_at_the_default_chunk_size_still_has_val_and_test(tmp_path):
    text = _book(4000, "short")  # ~200 KB: ~7 chunks of 32 KiB at the default 98/1/1
    (tmp_path / "one_book.txt").write_text(text, encoding="utf-8")
    corpus = text_corpus(str(tmp_path / "one_book.txt"))
    assert corpus.split_rule == f"chunks-v1:{CHUNK_CHARS}"
    chars = _tiling({"one_book.txt": text}, corpus)
    n = len(chunk_spans(text))
    assert allocate(n) == (n - 2, 1, 1)
    assert chars["val"] > 0 and chars["test"] > 0 and chars["train"] > 0.6 * len(text)
    assert "split by chunks" in corpus.describe()


def test_same_splits_in_another_process(tmp_path):
    for i in range(3):
        (tmp_path / f"{i}.txt").write_text(_book(1500, f"p{i}"), encoding="utf-8")
    code = (
        "import hashlib, json, sys\n"
        "from complexformer.data.files import text_corpus\n"
        "c = text_corpus(sys.argv[1], fractions=(0.93, 0.05, 0.02), chunk_chars=1000)\n"
        "print(json.dumps({s: [hashlib.sha256(d.encode()).hexdigest() for d in c.documents(s)]"
        " for s in ('train', 'val', 'test')}))\n"
    )
    pattern = f"{tmp_path}/*.txt"
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        [sys.executable, "-c", code, pattern], capture_output=True, text=True, env=env, check=True
    )
    theirs = json.loads(res.stdout)
    corpus = text_corpus(pattern, fractions=ASYM, chunk_chars=1000)
    ours = {
        s: [hashlib.sha256(d.encode()).hexdigest() for d in corpus.documents(s)] for s in SPLITS
    }
    assert ours == theirs and ours["val"] and ours["test"]


def test_many_files_keep_the_old_per_file_assignment(tmp_path):
    fr = (0.88, 0.08, 0.04)  # 300 x 0.04 = 12 expected in the smaller held-out split: whole
    # files; val and test differ, so a swap of their fractions fails the checks
    for i in range(300):
        sub = tmp_path / f"d{i % 7}"
        sub.mkdir(exist_ok=True)
        # every tenth file is longer than the chunk size, and still stays whole
        (sub / f"f{i}.txt").write_text(_book(60 if i % 10 == 0 else 3, f"m{i}"), encoding="utf-8")
    corpus = text_corpus(str(tmp_path), fractions=fr, chunk_chars=1000)
    assert not corpus.chunked and corpus.split_rule == "documents-v1"
    keys = sorted(f"d{i % 7}/f{i}.txt" for i in range(300))
    for split in SPLITS:
        expected = [k for k in keys if _old_split(k, fr) == split]
        assert corpus.files(split) == expected
        assert corpus.stats[split].n_docs == len(expected) > 0
        docs = list(corpus.documents(split))
        assert docs == [(tmp_path / k).read_text(encoding="utf-8") for k in expected]


def test_stdlib_keeps_whole_files():
    corpus = stdlib_corpus()
    assert not corpus.chunked and corpus.split_rule == "documents-v1"
    for split in ("val", "test"):
        files = corpus.files(split)
        assert files and all(_old_split(f, (0.98, 0.01, 0.01)) == split for f in files)


def test_the_switch_between_whole_files_and_chunks():
    assert use_chunks(999) and not use_chunks(1000)  # default 1 % held out
    assert use_chunks(199, (0.9, 0.05, 0.05)) and not use_chunks(200, (0.9, 0.05, 0.05))
    assert use_chunks(499, ASYM) and not use_chunks(500, ASYM)  # the smaller fraction decides
    assert use_chunks(499, (0.93, 0.02, 0.05)) and not use_chunks(500, (0.93, 0.02, 0.05))
    assert not use_chunks(1, (1.0, 0.0, 0.0))


@pytest.mark.parametrize(
    ("n", "fractions", "expected"),
    [
        (0, (0.98, 0.01, 0.01), (0, 0, 0)),
        (1, (0.98, 0.01, 0.01), (1, 0, 0)),
        (2, (0.98, 0.01, 0.01), (1, 1, 0)),
        (3, (0.98, 0.01, 0.01), (1, 1, 1)),
        (1000, (0.98, 0.01, 0.01), (980, 10, 10)),
        (1000, ASYM, (930, 50, 20)),
        (5, (1.0, 0.0, 0.0), (5, 0, 0)),
        (4, (0.0, 0.5, 0.5), (0, 2, 2)),
    ],
)
def test_allocate(n, fractions, expected):
    assert allocate(n, fractions) == expected


def test_assign_chunks_ranks_by_hash_and_counts_exactly():
    keys = [f"book.txt#{i}" for i in range(1000)]
    splits = assign_chunks(keys, ASYM)
    assert [splits.count(s) for s in SPLITS] == [930, 50, 20]
    assert assign_chunks(list(reversed(keys)), ASYM) == list(reversed(splits))


def test_chunk_spans_cover_the_text_and_end_at_line_breaks():
    text = _book(300, "c")
    spans = chunk_spans(text, 500)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert all(0 < e - s <= 500 for s, e in spans)
    assert all(text[e - 1] == "\n" for _, e in spans)
    assert chunk_spans("x" * 1001, 500) == [(0, 500), (500, 1000), (1000, 1001)]
    assert chunk_spans("", 500) == []
    # the cut: the LAST line break of the chunk's second half, none in its first half; the
    # text's end is never cut again; the smallest size is 2
    assert chunk_spans("abcde\nf\nghijk", 10) == [(0, 8), (8, 13)]
    assert chunk_spans("a\nbcdefghij", 8) == [(0, 8), (8, 11)]
    assert chunk_spans("abc\ndefghijkl", 9) == [(0, 9), (9, 13)]
    assert chunk_spans("ab\nc", 4) == [(0, 4)]
    assert chunk_spans("abc", 2) == [(0, 2), (2, 3)]
    with pytest.raises(ValueError, match="chunk size"):
        chunk_spans(text, 1)


def test_chunk_pieces_join_adjacent_chunks_of_one_split():
    text = "aa\nbb\ncc\ndd\n"
    assert chunk_spans(text, 3) == [(0, 3), (3, 6), (6, 9), (9, 12)]
    pieces = list(chunk_pieces(text, ["train", "train", "val", "train"], 3))
    assert pieces == [("train", "aa\nbb\n"), ("val", "cc\n"), ("train", "dd\n")]
    with pytest.raises(ValueError, match="changed"):
        list(chunk_pieces(text, ["train"], 3))


def test_long_jsonl_lines_are_chunked_too(tmp_path):
    texts = {f"data.jsonl:{i}": _book(1500, f"j{i}") for i in (1, 2)}
    lines = [json.dumps({"text": t}) for t in texts.values()]
    (tmp_path / "data.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus = text_corpus(str(tmp_path / "data.jsonl"), fractions=ASYM, chunk_chars=1000)
    assert corpus.chunked
    _check_fractions(_tiling(texts, corpus), ASYM, tol=0.02)


class _StubTokenizer:
    """Only what the cache key reads."""

    vocab_size = 300
    fingerprint = "stub"


def test_token_cache_key_includes_the_split_rule(tmp_path):
    (tmp_path / "book.txt").write_text(_book(2000, "k"), encoding="utf-8")
    tok = _StubTokenizer()
    a = text_corpus(str(tmp_path / "book.txt"), chunk_chars=1000)
    b = text_corpus(str(tmp_path / "book.txt"), chunk_chars=2000)
    pa = token_cache_path(a, "val", tok, tmp_path / "cache")
    assert pa != token_cache_path(b, "val", tok, tmp_path / "cache")
    a.split_rule = "documents-v1"  # the same fingerprint under another rule: another file
    assert token_cache_path(a, "val", tok, tmp_path / "cache") != pa
