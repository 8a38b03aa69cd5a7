"""``complexformer evaluate --suite ppl --data prepared:DIR`` with the source deleted: the
prepared shards are scored as they are, with the losses of the source itself."""

from __future__ import annotations

import json
import re
import shutil

from complexformer.cli import main
from complexformer.data.prepare import prepare_corpus
from tests.common_testlib import write_corpus


def test_ppl_on_a_prepared_folder_without_its_source(make_tiny_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COMPLEXFORMER_CACHE", str(tmp_path / "cache"))
    run = make_tiny_run("cmha")
    source = write_corpus(tmp_path / "src")  # the run's corpus, written again
    folder = prepare_corpus(
        source, tmp_path / "prep", tokenizer=str(run / "tokenizer"), workers=1, show_progress=False
    )

    def ppl(data: str, split: str) -> tuple[dict, str]:
        args = ["evaluate", "--model", str(run), "--suite", "ppl", "--data", data]
        assert main([*args, "--split", split, "--json"]) == 0
        out = capsys.readouterr().out
        return json.loads(out[out.rindex("\n{") + 1 :]), out

    want = {split: ppl(source, split)[0] for split in ("val", "test")}
    shutil.rmtree(tmp_path / "src")  # the source is gone
    monkeypatch.setenv("COMPLEXFORMER_CACHE", str(tmp_path / "cache2"))
    for split in ("val", "test"):
        got, out = ppl(f"prepared:{folder}", split)
        assert re.search(rf"tokens: {split}: [\d,]+ tokens \(prepared, prepared:", out), out
        assert got["tokens"] == want[split]["tokens"] > 0
        assert got["loss"] == want[split]["loss"] and got["ppl"] == want[split]["ppl"]
    assert not (tmp_path / "cache2" / "tokens").exists()  # nothing was tokenized
