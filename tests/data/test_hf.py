"""``hf:`` corpora streamed (``datasets.load_dataset(..., streaming=True)``) and memory-mapped
give the same splits, documents, tokenizer and token stream, on local datasets written here
(no network); ``prepare`` of a streamed ``hf:`` spec is byte-identical for 1 and 3 workers."""

from __future__ import annotations

import filecmp
import json
from pathlib import Path

import numpy as np
import pytest

datasets = pytest.importorskip("datasets")

from complexformer.data import get_tokenizer, load_corpus, load_token_splits  # noqa: E402
from complexformer.data.corpus import document_start  # noqa: E402
from complexformer.data.hf import HF_STREAMING_ENV, HFCorpus, hf_streaming  # noqa: E402
from complexformer.data.prepare import prepare_corpus  # noqa: E402
from complexformer.data.prepared import PreparedCorpus  # noqa: E402
from complexformer.data.splits import SPLITS, split_of  # noqa: E402

VOCAB = 300
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu ünï".split()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """Our caches and the ``datasets`` Arrow cache under tmp; offline."""
    monkeypatch.setenv("COMPLEXFORMER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.delenv(HF_STREAMING_ENV, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    return tmp_path / "cache"


def _text(i: int) -> str | None:
    if i % 37 == 5:
        return None if i % 2 else "   "  # empty rows are skipped
    n = 3 + (i * 7) % 40
    return " ".join(WORDS[(i * 3 + k * k) % len(WORDS)] for k in range(n)) + f" {i}\n"


def _write(root: Path, splits: dict[str, int]) -> Path:
    root.mkdir(parents=True)
    for name, n in splits.items():
        with open(root / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for i in range(n):
                f.write(json.dumps({"id": i, "text": _text(i + len(name))}) + "\n")
    return root


def _rows(path: Path) -> list[str]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        t = json.loads(line)["text"]
        out.append(t if t is not None else "")
    return out


def test_streaming_default_and_its_settings(tmp_path, monkeypatch):
    monkeypatch.delenv(HF_STREAMING_ENV, raising=False)
    assert hf_streaming("Salesforce/wikitext") is True  # a Hub name
    assert hf_streaming(str(tmp_path)) is False  # a local folder
    assert hf_streaming("Salesforce/wikitext", False) is False
    monkeypatch.setenv(HF_STREAMING_ENV, "false")
    assert hf_streaming("Salesforce/wikitext") is False
    monkeypatch.setenv(HF_STREAMING_ENV, "maybe")
    with pytest.raises(ValueError, match="COMPLEXFORMER_HF_STREAMING='maybe'"):
        hf_streaming("x")


@pytest.mark.parametrize("layout", ["own-splits", "carved"])
def test_streamed_and_memory_mapped_give_the_same_corpus_and_token_stream(cache, tmp_path, layout):
    names = {"train": 1500, "validation": 60, "test": 50} if layout == "own-splits" else {}
    root = _write(tmp_path / "ds", names or {"train": 1500})
    spec = f"hf:{root}"
    mapped = load_corpus(spec, hf_streaming=False)
    streamed = load_corpus(spec, hf_streaming=True)
    assert isinstance(streamed, HFCorpus) and streamed.streaming and not mapped.streaming
    assert isinstance(streamed._data["train"], datasets.IterableDataset)
    assert isinstance(mapped._data["train"], datasets.Dataset)
    # the independent reference: the files read with json, split as documented
    train = _rows(root / "train.jsonl")
    if layout == "own-splits":
        want = {
            "train": train,
            "val": _rows(root / "validation.jsonl"),
            "test": _rows(root / "test.jsonl"),
        }
    else:
        want = {s: [t for i, t in enumerate(train) if split_of(str(i)) == s] for s in SPLITS}
    want = {s: [t for t in docs if t.strip()] for s, docs in want.items()}
    assert all(want[s] for s in SPLITS)
    for s in SPLITS:
        assert list(mapped.documents(s)) == want[s]
        assert list(streamed.documents(s)) == want[s]
        assert mapped.stats[s] == streamed.stats[s]
        assert streamed.stats[s].n_bytes == sum(len(t.encode()) for t in want[s])
    assert streamed.fingerprint("train") != streamed.fingerprint("val")
    assert streamed.fingerprint("val") == load_corpus(spec, hf_streaming=True).fingerprint("val")
    # the same BPE and the same tokens, each mode tokenizing into its own cache entry
    tok_m = get_tokenizer(None, mapped, vocab_size=VOCAB, show_progress=False)
    tok_s = get_tokenizer(None, streamed, vocab_size=VOCAB, show_progress=False)
    assert tok_m.fingerprint == tok_s.fingerprint
    tm = load_token_splits(mapped, tok_m, show_progress=False)
    ts = load_token_splits(streamed, tok_s, show_progress=False)
    for s in SPLITS:
        assert ts[s].filename != tm[s].filename
        np.testing.assert_array_equal(np.asarray(ts[s]), np.asarray(tm[s]))
        assert int((np.asarray(ts[s]) == tok_s.eos_token_id).sum()) == len(want[s])


def test_prepare_a_streamed_hf_spec_is_byte_identical_for_1_and_3_workers(cache, tmp_path):
    root = _write(tmp_path / "ds", {"train": 1500, "validation": 60})  # test is carved
    spec = f"hf:{root}"
    kw = dict(vocab_size=VOCAB, shard_tokens=3000, hf_streaming=True, show_progress=False)
    one = prepare_corpus(spec, tmp_path / "w1", workers=1, **kw)
    three = prepare_corpus(spec, tmp_path / "w3", workers=3, **kw)
    files = sorted(str(p.relative_to(one)) for p in one.rglob("*") if p.is_file())
    assert sum(f.startswith("train-") for f in files) > 1
    assert files == sorted(str(p.relative_to(three)) for p in three.rglob("*") if p.is_file())
    _, mismatch, errors = filecmp.cmpfiles(one, three, files, shallow=False)
    assert not mismatch and not errors
    # the prepared stream is the direct (memory-mapped, non-streamed) one
    direct = load_corpus(spec, hf_streaming=False)
    tok = get_tokenizer(None, direct, vocab_size=VOCAB, show_progress=False)
    want = load_token_splits(direct, tok, show_progress=False)
    prepared = PreparedCorpus(one)
    for s in SPLITS:
        np.testing.assert_array_equal(np.asarray(prepared.prepared_tokens(s, tok)), want[s])


def test_a_hub_name_is_loaded_with_streaming(cache, monkeypatch):
    """The Hub path: ``load_dataset(name, config, streaming=True)``, read as an
    ``IterableDataset`` whose columns are known only once read."""
    calls = []
    rows = [{"text": _text(i) or ""} for i in range(1200)]

    def load_dataset(name, config=None, **kw):
        calls.append((name, config, kw))
        ds = datasets.IterableDataset.from_generator(lambda: iter(rows))
        return datasets.IterableDatasetDict({"train": ds})

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    corpus = load_corpus("hf:Salesforce/wikitext:wikitext-103-raw-v1")
    assert calls == [("Salesforce/wikitext", "wikitext-103-raw-v1", {"streaming": True})]
    val = [r["text"] for i, r in enumerate(rows) if split_of(str(i)) == "val"]
    want = [t for t in val if t.strip()]
    prompt = document_start(corpus)  # the start of the first val document: reads no further
    assert prompt and want[0].lstrip().startswith(prompt)
    assert corpus._stats is None
    assert list(corpus.documents("val")) == want and want
    assert corpus.stats["val"].n_docs == len(want)  # counted on first use
    with pytest.raises(ValueError, match="no column 'body'"):
        load_corpus("hf:Salesforce/wikitext", text_field="body")


def test_train_passes_its_hf_streaming_setting_to_the_corpus(monkeypatch, tmp_path):
    import complexformer.lm.task as lm_task
    from complexformer.lm import train
    from complexformer.models.config import GPTConfig
    from complexformer.training import TrainConfig

    seen = {}

    def fake_load_corpus(spec, **kwargs):
        seen.update(kwargs, spec=spec)
        raise RuntimeError("stop after the corpus call")

    monkeypatch.setattr(lm_task, "load_corpus", fake_load_corpus)
    model = GPTConfig(n_layer=1, d_model=32, n_head=2, d_ff=64, max_seq_len=32)
    for setting in (True, False, None):
        tc = TrainConfig(out_dir=str(tmp_path / f"run-{setting}"), data="hf:some/name",
                         hf_streaming=setting, max_steps=1)  # fmt: skip
        with pytest.raises(Exception, match="stop after the corpus call"):
            train(model, tc, log=None)
        assert seen["spec"] == "hf:some/name" and seen["hf_streaming"] is setting
