"""Tokenizers: byte-level BPE round trip, save/load, the on-disk BPE cache, HF wrapper."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from complexformer.data import (
    EOT_TOKEN,
    Tokenizer,
    bpe_cache_dir,
    get_tokenizer,
    load_corpus,
    load_tokenizer,
    text_corpus,
    train_bpe,
    train_or_load_bpe,
)
from complexformer.data.cache import CACHE_ENV_VAR, cache_root

SNIPPET = '''\
# -*- coding: utf-8 -*-
"""Docstring with unicode: héllo wörld — ∑ 🎉, a tab\there and CRLF\r\n."""
from __future__ import annotations


class Foo(Base):  # trailing spaces{TRAILING}
    def __init__(self, x: int = 0x1F) -> None:
\t\tself.x = {"a": [1, 2.5e-3, None], 'b': f"{x!r:>10}"}
    marker = "<|endoftext|>"  # the literal EOS string is just text


'''.replace("{TRAILING}", "   ")


def write_source_tree(root: Path, n: int = 24) -> None:
    """A small corpus of Python-like .txt files."""
    for i in range(n):
        p = root / f"pkg{i % 3}" / f"mod_{i}.txt"
        p.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(
            f"def function_{i}_{j}(value, other=None):\n    return value + {j} * other\n\n"
            for j in range(5)
        )
        p.write_text(f"import os\nimport sys\n\n{body}", encoding="utf-8")


@pytest.fixture(scope="module")
def small_bpe() -> Tokenizer:
    docs = [SNIPPET[::-1], "import os\nfor i in range(10):\n    print(i)\n"] * 3
    return train_bpe(docs, vocab_size=300)


def test_bpe_round_trip_and_special_token(small_bpe):
    tok = small_bpe
    assert tok.kind == "bpe" and tok.eos_token == EOT_TOKEN
    assert tok.eos_token_id == 0
    assert 257 <= tok.vocab_size <= 300
    for text in (SNIPPET, "", " ", "\n\n\t", "x" * 1000, "日本語 ünïcödé 🐍\x00\x7f"):
        ids = tok.encode(text)
        assert all(0 <= i < tok.vocab_size for i in ids)
        assert tok.decode(ids) == text
    # a literal "<|endoftext|>" in a document is ordinary text, never the EOS id
    assert tok.eos_token_id not in tok.encode(SNIPPET)
    assert tok.decode([tok.eos_token_id]) == EOT_TOKEN
    assert tok.encode_batch([SNIPPET, "a b"]) == [tok.encode(SNIPPET), tok.encode("a b")]
    assert tok.encode_batch([]) == []


def test_train_bpe_rejects_tiny_vocab():
    with pytest.raises(ValueError, match="vocab_size must be at least 257"):
        train_bpe(["abc"], vocab_size=200)


def test_save_and_load_directory(small_bpe, tmp_path):
    out = small_bpe.save(tmp_path / "run" / "tokenizer")
    meta = json.loads((out / "complexformer_tokenizer.json").read_text())
    assert meta["kind"] == "bpe" and meta["eos_token"] == EOT_TOKEN
    for loaded in (Tokenizer.load(out), load_tokenizer(out), get_tokenizer(str(out))):
        assert loaded.vocab_size == small_bpe.vocab_size
        assert loaded.eos_token_id == small_bpe.eos_token_id
        assert loaded.encode(SNIPPET) == small_bpe.encode(SNIPPET)
        assert loaded.decode(loaded.encode(SNIPPET)) == SNIPPET
        assert loaded.fingerprint == small_bpe.fingerprint
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temp files left
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Tokenizer.load(tmp_path / "nope")
    (tmp_path / "emptydir").mkdir()
    with pytest.raises(FileNotFoundError, match="no tokenizer in"):
        Tokenizer.load(tmp_path / "emptydir")


def test_bpe_cache_reused_and_invalidated(tmp_path):
    root = tmp_path / "corpus"
    write_source_tree(root)
    cache = tmp_path / "cache"
    corpus = text_corpus(str(root))

    first = train_or_load_bpe(corpus, 300, cache_dir=cache, show_progress=False)
    assert first.trained
    assert first.path == bpe_cache_dir(corpus, 300, cache)
    assert first.path.parent == cache / "tokenizers"

    # same corpus, loaded again: the cached tokenizer is reused
    again = train_or_load_bpe(text_corpus(str(root)), 300, cache_dir=cache, show_progress=False)
    assert not again.trained
    assert again.path == first.path
    assert again.tokenizer.fingerprint == first.tokenizer.fingerprint
    assert again.tokenizer.encode(SNIPPET) == first.tokenizer.encode(SNIPPET)

    # another vocabulary size is another cache entry
    other = train_or_load_bpe(corpus, 280, cache_dir=cache, show_progress=False)
    assert other.trained and other.path != first.path

    # changing a train file's content invalidates the cache (same size: content is hashed)
    victim = root / corpus.files("train")[0]
    text = victim.read_text(encoding="utf-8")
    victim.write_text(text.replace("import os", "import io"), encoding="utf-8")
    changed = text_corpus(str(root))
    assert changed.fingerprint("train") != corpus.fingerprint("train")
    after = train_or_load_bpe(changed, 300, cache_dir=cache, show_progress=False)
    assert after.trained and after.path != first.path
    entries = sorted(p.name for p in (cache / "tokenizers").iterdir())
    assert len(entries) == 3 and not any(e.startswith(".") for e in entries)


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    write_source_tree(tmp_path / "c", n=6)
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "envcache"))
    assert cache_root() == tmp_path / "envcache"
    assert cache_root(tmp_path / "explicit") == tmp_path / "explicit"
    corpus = load_corpus(f"text:{tmp_path / 'c'}")
    tok = get_tokenizer(None, corpus, vocab_size=270, show_progress=False)
    assert tok.vocab_size <= 270
    assert list((tmp_path / "envcache" / "tokenizers").iterdir())
    monkeypatch.delenv(CACHE_ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "complexformer"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_root() == Path.home() / ".cache" / "complexformer"
    with pytest.raises(ValueError, match="pass corpus"):
        get_tokenizer("bpe")


def test_hf_tokenizer_needs_transformers(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(ImportError, match=r"pip install 'complexformer\[hf\]'"):
        Tokenizer.from_pretrained("gpt2")
    with pytest.raises(ImportError, match=r"pip install 'complexformer\[hf\]'"):
        load_tokenizer("some-org/not-a-dir-so-a-hub-name")
    # a local path that does not exist is named as such before any hub lookup
    with pytest.raises(FileNotFoundError, match="no such file or directory"):
        load_tokenizer(tmp_path / "missing-tokenizer-dir")


def test_hf_tokenizer_from_directory(small_bpe, tmp_path):
    transformers = pytest.importorskip("transformers")
    hf_dir = tmp_path / "hf"
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=small_bpe.backend, eos_token=EOT_TOKEN
    )
    fast.save_pretrained(str(hf_dir))
    tok = load_tokenizer(hf_dir)  # a plain HF directory (no complexformer metadata)
    assert tok.kind == "hf"
    assert tok.eos_token_id == small_bpe.eos_token_id
    assert tok.vocab_size == small_bpe.vocab_size
    text = SNIPPET.replace(EOT_TOKEN, "")
    assert tok.encode(text) == small_bpe.encode(text)
    assert tok.decode(tok.encode(text)) == text
    assert tok.encode_batch([text, "a"]) == [tok.encode(text), tok.encode("a")]
    saved = Tokenizer.load(tok.save(tmp_path / "saved"))
    assert saved.kind == "hf" and saved.encode(text) == tok.encode(text)


@pytest.mark.slow
def test_full_stdlib_bpe(tmp_path):
    corpus = load_corpus("stdlib")
    result = train_or_load_bpe(corpus, cache_dir=tmp_path, show_progress=False)
    tok = result.tokenizer
    assert result.trained and tok.vocab_size == 8192
    source = Path(json.__file__).read_text(encoding="utf-8")
    ids = tok.encode(source)
    assert tok.decode(ids) == source
    assert len(source) / len(ids) > 2.5  # BPE compresses Python source
    assert not train_or_load_bpe(corpus, cache_dir=tmp_path).trained


def test_an_encoders_tokenizer_separates_with_sep_and_keeps_its_fingerprint(tmp_path):
    """A BERT-style tokenizer (no eos_token) packs documents with its [SEP]; its fingerprint
    leaves out the truncation and padding that transformers resets when it encodes, so it
    is the same before and after use and after a save and load."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer as RustTokenizer
    from tokenizers import models, pre_tokenizers

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat"]
    rust = RustTokenizer(models.WordPiece({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    rust.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    rust.enable_truncation(max_length=4)  # as a saved MiniLM has
    special = dict(unk_token="[UNK]", sep_token="[SEP]", cls_token="[CLS]", pad_token="[PAD]")
    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=rust, mask_token="[MASK]", **special)
    hf.save_pretrained(str(tmp_path / "bert"))
    tok = Tokenizer.from_pretrained(tmp_path / "bert")
    assert tok.eos_token == "[SEP]" and tok.eos_token_id == 3
    before = tok.fingerprint
    assert tok.encode_batch(["the cat sat on the mat"]) == [[5, 6, 7, 8, 5, 9]]  # not cut at 4
    tok._fingerprint = None
    assert tok.fingerprint == before
    assert Tokenizer.load(tok.save(tmp_path / "saved")).fingerprint == before
