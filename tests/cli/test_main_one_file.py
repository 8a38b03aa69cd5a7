"""One text file as the whole corpus: `train`, then `evaluate` on its val and test splits, then
`generate` with the run's default prompt (the start of a validation document)."""

from __future__ import annotations

import json
import shutil
import sysconfig
from pathlib import Path

import pytest

from complexformer.cli import main
from complexformer.data import text_corpus
from complexformer.data.corpus import document_start
from complexformer.lm import run_prompt
from complexformer.training.rundir import PROMPT_FILE
from tests.cli.test_main import SMALL


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Path:
    """One ~260 KB file of real text (standard-library modules, one after the other)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    parts = [
        (stdlib / "json" / n).read_text(encoding="utf-8") for n in ("decoder.py", "encoder.py")
    ]
    parts += [(stdlib / n).read_text(encoding="utf-8") for n in ("textwrap.py", "argparse.py")]
    path = tmp_path_factory.mktemp("book") / "one_book.txt"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("COMPLEXFORMER_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def _evaluate(run: Path, data: str, split: str, capsys) -> dict:
    argv = ["evaluate", "--model", str(run), "--data", data, "--split", split, "--json"]
    assert main([*argv, "--max-blocks", "4", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    return json.loads(out[out.rindex("\n{") + 1 :])


def test_train_then_evaluate_and_generate_on_one_text_file(book, tmp_path, capsys):
    data = f"text:{book}"
    corpus = text_corpus(str(book))
    assert corpus.chunked and all(corpus.stats[s].n_docs > 0 for s in ("val", "test"))
    run = tmp_path / "run"
    argv = ["train", "--preset", "tiny", "--data", data, "--out", str(run), *SMALL]
    assert main([*argv, "--sample-tokens", "8", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    assert "validation perplexity:" in out

    # the sample's prompt is the start of a validation piece of this book, recorded in the run
    prompt = (run / PROMPT_FILE).read_text(encoding="utf-8")
    assert prompt.strip() and prompt in book.read_text(encoding="utf-8")
    assert any(doc.lstrip().startswith(prompt) for doc in corpus.documents("val"))
    assert f"sample (temperature 0.8, top_p 0.95):\n{prompt}" in out

    for split in ("val", "test"):
        res = _evaluate(run, data, split, capsys)
        assert res["split"] == split and res["tokens"] > 0 and res["ppl"] > 1

    argv = ["generate", "--model", str(run), "--max-new-tokens", "4", "--temperature", "0"]
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith(prompt)


def test_a_file_too_short_for_three_chunks_names_the_empty_split(book, tmp_path, capsys):
    small = tmp_path / "short_book.txt"
    small.write_text(book.read_text(encoding="utf-8")[: 40 * 1024], encoding="utf-8")  # 2 chunks
    data, run = f"text:{small}", tmp_path / "run"
    argv = ["train", "--preset", "tiny", "--data", data, "--out", str(run), *SMALL]
    assert main([*argv, "--sample-tokens", "0"]) == 0
    capsys.readouterr()
    code = main(["evaluate", "--model", str(run), "--split", "test", "--threads", "1"])
    assert code == 2
    err = capsys.readouterr().err
    assert f"the test split of {data!r} holds no text" in err and "32 KiB" in err
    assert _evaluate(run, data, "val", capsys)["tokens"] > 0  # val got the second chunk


def test_document_start_cuts_at_a_line_break_or_a_space():
    class _Docs:
        spec = "stub"

        def __init__(self, docs):
            self.docs = docs

        def documents(self, split):
            return iter(self.docs.get(split, []))

    code = "\n\n  def f(x):\n    return x\n" + "y = 1\n" * 50
    assert document_start(_Docs({"val": [code]}), max_chars=28) == "def f(x):\n    return x\n"
    prose = "It was the best of times, it was the worst of times, " * 5
    assert document_start(_Docs({"val": [prose]}), max_chars=30) == "It was the best of times, it"
    assert document_start(_Docs({"val": ["short\n"]})) == "short\n"
    assert document_start(_Docs({"train": ["only train"]})) == "only train"
    assert document_start(_Docs({"test": ["t"], "train": ["x"]})) == "t"
    assert document_start(_Docs({"val": ["x" * 50]}), max_chars=10) == "x" * 10
    with pytest.raises(ValueError, match="no document"):
        document_start(_Docs({}))


def test_run_prompt_outside_a_run_asks_for_a_prompt(tmp_path):
    with pytest.raises(FileNotFoundError, match="--prompt"):
        run_prompt(tmp_path)


def test_run_prompt_is_made_once_from_the_runs_corpus(book, tmp_path):
    shutil.copy(book, tmp_path / "book.txt")
    run = tmp_path / "run"
    run.mkdir()
    (run / "model").mkdir()
    cfg = {"out_dir": str(run), "data": f"text:{tmp_path / 'book.txt'}"}
    (run / "train_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    expected = document_start(text_corpus(str(tmp_path / "book.txt")))
    assert run_prompt(run) == expected == (run / PROMPT_FILE).read_text(encoding="utf-8")
    (run / PROMPT_FILE).write_text("edited\n", encoding="utf-8")
    assert run_prompt(run) == "edited\n"  # recorded: read back, not rebuilt
