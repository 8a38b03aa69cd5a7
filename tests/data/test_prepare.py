"""``complexformer prepare`` and ``prepared:DIR``: byte-identical output for any number of
workers, the direct path's token stream, reading without the source, a corrupt shard refused
by name, a folder that is not one refused with what it is; the bounded BPE sample."""

from __future__ import annotations

import filecmp
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from complexformer.cli import main
from complexformer.data import get_tokenizer, load_corpus, load_token_splits
from complexformer.data import prepared as prepared_module
from complexformer.data.bpe import bpe_cache_dir, sample_documents
from complexformer.data.prepare import prepare_corpus
from complexformer.data.prepared import PreparedCorpus, is_prepared, verify_prepared
from complexformer.data.shards import ShardedTokens
from complexformer.data.splits import SPLITS
from complexformer.storage import ManifestError
from tests.common_testlib import write_corpus

VOCAB = 300


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("COMPLEXFORMER_CACHE", str(root))
    return root


@pytest.fixture
def source(tmp_path):
    """A JSONL file of 1,500 lines and two .txt documents (whole-document splits)."""
    spec = write_corpus(tmp_path / "src", n_lines=1500)
    root = Path(spec.removeprefix("text:")).parent
    (root / "a.txt").write_text("def f(x):\n    return x + 1\n" * 300, encoding="utf-8")
    (root / "b.txt").write_text("Ünïcode prose, ünïcode prose. " * 200, encoding="utf-8")
    return f"text:{root}"


def _tree(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


def test_workers_give_byte_identical_folders_and_the_direct_token_stream(
    cache, source, tmp_path, monkeypatch
):
    one = prepare_corpus(source, tmp_path / "w1", vocab_size=VOCAB, workers=1, shard_tokens=4000)
    three = prepare_corpus(source, tmp_path / "w3", vocab_size=VOCAB, workers=3, shard_tokens=4000)
    assert _tree(one) == _tree(three)
    shards = [p for p in _tree(one) if p.startswith("train-")]
    assert len(shards) > 3  # several shards, the last one partial
    for name in _tree(one):
        if (one / name).is_file():
            assert filecmp.cmp(one / name, three / name, shallow=False), name

    # the direct path (what train --data SPEC tokenizes) gives the same tokens and tokenizer
    corpus = load_corpus(source)
    tok = get_tokenizer(None, corpus, vocab_size=VOCAB, show_progress=False)
    direct = load_token_splits(corpus, tok, show_progress=False)
    prepared = PreparedCorpus(one)
    assert prepared.prepared_tokenizer.fingerprint == tok.fingerprint
    index = json.loads((one / "index.json").read_text())
    for split in SPLITS:
        got = prepared.tokens(split)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(direct[split]))
        assert index["splits"][split]["n_tokens"] == len(direct[split])
        assert index["splits"][split]["n_docs"] == corpus.stats[split].n_docs
        assert index["splits"][split]["fingerprint"] == corpus.fingerprint(split)
    assert isinstance(prepared.tokens("train"), ShardedTokens)
    # one shard or many: the same stream
    big = prepare_corpus(source, tmp_path / "big", vocab_size=VOCAB, workers=2)
    np.testing.assert_array_equal(
        np.asarray(PreparedCorpus(big).tokens("train")), np.asarray(direct["train"])
    )
    # the documents come back from the tokens exactly, also where one spans two reads
    assert list(prepared.documents("val")) == list(corpus.documents("val"))
    monkeypatch.setattr(prepared_module, "DECODE_TOKENS", 7)
    assert list(prepared.documents("val")) == list(corpus.documents("val"))
    # the source's fingerprints, and the tokens only for the tokenizer they were written with
    assert [prepared.fingerprint(s) for s in SPLITS] == [corpus.fingerprint(s) for s in SPLITS]
    np.testing.assert_array_equal(np.asarray(prepared.prepared_tokens("val", tok)), direct["val"])
    assert prepared.prepared_tokens("val", SimpleNamespace(fingerprint="another")) is None
    lines = prepared.describe().splitlines()
    at = lines.index(f"  prepared from {source}; tokens:")
    for line, split in zip(lines[at + 1 :], SPLITS, strict=True):
        shards = len(index["splits"][split]["shards"])
        assert line.split() == [
            split,
            f"{len(direct[split]):,}",
            "tokens",
            "in",
            str(shards),
            "shards",
        ]


def test_a_folder_that_is_not_a_prepared_corpus_is_refused_with_what_it_is(tmp_path):
    with pytest.raises(FileNotFoundError, match="prepared corpus folder .*none' does not exist"):
        PreparedCorpus(tmp_path / "none")
    d = tmp_path / "d"
    d.mkdir()
    assert not is_prepared(d)
    with pytest.raises(
        FileNotFoundError, match=r"has no index.json \(write one with 'complexformer prepare"
    ):
        PreparedCorpus(d)
    for text, error in [
        ("{not json", r"index.json is corrupted \(not valid JSON"),
        ("[1, 2]", r"unknown format \(expected 'complexformer-prepared-v1'\)"),
        ('{"format": "complexformer-prepared-v0"}', "unknown format"),
    ]:
        (d / "index.json").write_text(text)
        assert not is_prepared(d)
        with pytest.raises(ManifestError, match=error):
            PreparedCorpus(d)
    (d / "index.json").write_bytes(b"\xff\xfe{")
    assert not is_prepared(d)
    with pytest.raises(ManifestError, match="corrupted"):
        PreparedCorpus(d)


def test_train_from_a_prepared_folder_without_its_source(cache, source, tmp_path):
    from complexformer.lm import train
    from complexformer.models import GPTConfig
    from complexformer.training import TrainConfig, read_metrics

    model = GPTConfig(vocab_size=VOCAB, n_layer=1, n_head=2, d_model=32, d_ff=64, max_seq_len=32)
    kw = dict(vocab_size=VOCAB, max_steps=4, batch_size=4, eval_every=4, eval_blocks=4)
    kw |= dict(log_every=1, save_every=4, device="cpu", num_threads=1)
    direct_cfg = TrainConfig(out_dir=str(tmp_path / "direct"), data=source, **kw)
    direct = train(model, direct_cfg, log=None)

    folder = prepare_corpus(source, tmp_path / "prep", vocab_size=VOCAB, workers=2)
    shutil.rmtree(source.removeprefix("text:"))  # the source is gone
    msgs: list[str] = []
    cfg = TrainConfig(out_dir=str(tmp_path / "prepared"), data=f"prepared:{folder}", **kw)
    got = train(model, cfg, log=msgs.append)
    assert any("prepared" in m and "tokens" in m for m in msgs)
    want = read_metrics(tmp_path / "direct" / "metrics.jsonl")
    have = read_metrics(tmp_path / "prepared" / "metrics.jsonl")
    torch.testing.assert_close(
        torch.tensor([r["train_loss"] for r in have]),
        torch.tensor([r["train_loss"] for r in want]),
        rtol=0,
        atol=0,
    )
    assert got["val_loss"] == direct["val_loss"]


def test_a_corrupt_or_truncated_shard_is_refused_by_name(cache, source, tmp_path):
    folder = prepare_corpus(source, tmp_path / "p", vocab_size=VOCAB, workers=1, shard_tokens=4000)
    assert verify_prepared(folder) is True  # hashed once on this machine
    assert verify_prepared(folder) is False  # then the stamp says it is intact
    PreparedCorpus(folder)
    shard = folder / "train-00001.bin"
    data = bytearray(shard.read_bytes())
    data[10] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(ManifestError, match="train-00001.bin is corrupted"):
        load_corpus(f"prepared:{folder}")
    shard.write_bytes(bytes(data[:-2]))
    with pytest.raises(ManifestError, match="train-00001.bin is truncated"):
        PreparedCorpus(folder)
    # unchecked (the other ranks of a run), the size is still compared with the index
    with pytest.raises(ManifestError, match="train-00001.bin is missing or truncated"):
        PreparedCorpus(folder, verify=False).tokens("train")


def test_prepare_refuses_a_folder_that_is_not_its_own(cache, source, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a prepared corpus"):
        prepare_corpus(source, other, vocab_size=VOCAB, workers=1)
    assert (other / "notes.txt").read_text() == "mine"
    folder = prepare_corpus(source, tmp_path / "p", vocab_size=VOCAB, workers=1)
    with pytest.raises(ValueError, match="already holds a prepared corpus"):
        prepare_corpus(source, folder, vocab_size=VOCAB, workers=1)
    prepare_corpus(source, folder, vocab_size=VOCAB, workers=1, overwrite=True)
    with pytest.raises(ValueError, match="already prepared"):
        prepare_corpus(f"prepared:{folder}", tmp_path / "q")


def test_prepare_command(cache, source, tmp_path, capsys):
    out = tmp_path / "cli"
    args = ["prepare", "--data", source, "--out", str(out), "--vocab-size", str(VOCAB)]
    assert main([*args, "--workers", "2", "--set", "shard_tokens=5000"]) == 0
    index = json.loads((out / "index.json").read_text())
    assert index["shard_tokens"] == 5000 and index["tokenizer"]["vocab_size"] == VOCAB
    assert main(args) == 2
    assert "already holds a prepared corpus" in capsys.readouterr().err


def test_bpe_sample_is_bounded_deterministic_and_whole_when_small(cache, source):
    corpus = load_corpus(source)
    total = corpus.stats["train"].n_bytes
    assert list(sample_documents(corpus, total)) == list(corpus.documents("train"))
    budget = total // 5
    sample = list(sample_documents(corpus, budget))
    size = sum(len(d.encode("utf-8")) for d in sample)
    assert budget - 4 <= size <= budget
    assert sample == list(sample_documents(corpus, budget))
    assert 0.1 < len(sample) / corpus.stats["train"].n_docs < 0.3  # spread, not a prefix
    # the cache key changes only when the budget samples the split
    assert bpe_cache_dir(corpus, VOCAB, sample_bytes=total) == bpe_cache_dir(corpus, VOCAB)
    assert bpe_cache_dir(corpus, VOCAB, sample_bytes=budget) != bpe_cache_dir(corpus, VOCAB)


def test_iter_chunks_cuts_as_chunk_spans():
    import random

    from complexformer.data.splits import chunk_spans, iter_chunks

    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(0, 2000)
        text = "".join(rng.choice("ab \n\u00e9") for _ in range(n))
        size = rng.randint(2, 150)
        cuts = sorted(rng.sample(range(n + 1), min(n + 1, rng.randint(0, 8))))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
        assert list(iter_chunks(pieces, size)) == [text[a:b] for a, b in chunk_spans(text, size)]


def _stdlib_text(n_files: int = 40) -> str:
    from complexformer.data import list_stdlib_files

    texts = []
    for f in list_stdlib_files()[::37][:n_files]:
        try:
            texts.append(f.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            continue
    return "".join(texts) + "Ünïcode — prose ﬁne\n  indented\n\tTabbed\nend\r\nwindows\n"


def test_a_cut_at_safe_cut_keeps_the_bpe_tokens(cache):
    from complexformer.data.bpe import train_bpe
    from complexformer.data.tokens import cuttable, safe_cut

    text = _stdlib_text(12)
    tok = train_bpe([text[i : i + 5000] for i in range(0, len(text), 5000)], 1000)
    assert cuttable(tok)
    checked, pos = 0, len(text)
    while pos > 0:  # every safe position, with 300 characters either side
        p = safe_cut(text[:pos])
        if p == 0:
            break
        window, q = text[max(0, p - 300) : p + 300], min(300, p)
        assert tok.encode(window[:q]) + tok.encode(window[q:]) == tok.encode(window)
        checked, pos = checked + 1, p - 1
    assert checked > 100


def test_a_large_text_file_is_read_and_encoded_in_pieces(cache, tmp_path):
    from complexformer.data.bpe import train_bpe
    from complexformer.data.files import FileCorpus
    from complexformer.data.tokens import encoding_units, pack_documents, pack_units

    root = tmp_path / "big"
    root.mkdir()
    text = _stdlib_text(15)
    (root / "book.txt").write_text(text, encoding="utf-8")  # one document: split by chunks
    (root / "blank.txt").write_text(" \n" * 5000, encoding="utf-8")
    files = sorted(root.iterdir())
    whole = FileCorpus("text:big", root, files)
    streamed = FileCorpus("text:big", root, files, stream_bytes=4096)
    assert whole.chunked and streamed.chunked
    assert streamed.stats == whole.stats
    tok = train_bpe(whole.documents("train"), 600)
    for split in SPLITS:
        assert streamed.fingerprint(split) == whole.fingerprint(split)
        docs = list(whole.documents(split))
        joined, current = [], ""
        for part, last in streamed.document_parts(split):
            current += part
            if last:
                joined.append(current)
                current = ""
        assert joined == docs and current == ""
        want = np.concatenate([c for c, _ in pack_documents(docs, tok)])
        units = list(encoding_units(streamed.document_parts(split), True, max_chars=3000))
        if split == "train":
            assert sum(not eos for _, eos in units) > 10  # the train run was cut
            assert np.median([len(t) for t, eos in units if not eos]) <= 3000
        got = np.concatenate([c for c, _ in pack_units(units, tok)])
        np.testing.assert_array_equal(got, want)
