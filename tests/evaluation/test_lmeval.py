"""The lm-eval suite: lm-evaluation-harness on an exported model, offline tasks shipped."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("transformers")
pytest.importorskip("lm_eval")

from complexformer.cli import main  # noqa: E402
from complexformer.evaluation.lmeval import (  # noqa: E402
    TASKS_DIR,
    LmEvalConfig,
    run_lmeval_suite,
)
from complexformer.hf.export import save_hf  # noqa: E402
from tests.common_testlib import write_corpus  # noqa: E402
from tests.hf.hf_testlib import tiny_lm, tiny_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """(ComplexFormerLM, tokenizer, export directory, corpus spec) of a tiny CMHA model."""
    root = tmp_path_factory.mktemp("lmeval")
    tok = tiny_tokenizer()
    lm = tiny_lm(tok, "cmha")
    return lm, tok, save_hf(lm, tok, root / "export"), write_corpus(root / "corpus", 1500)


def _our_loglikelihoods(lm, tok, docs: list[str]) -> list[float]:
    """log p(doc | EOS) from our model's logits, one forward per document."""
    out = []
    for doc in docs:
        ids = tok.encode(doc)
        assert len(ids) < lm.config.max_seq_len  # one window of the harness per document
        x = torch.tensor([[tok.eos_token_id, *ids]])
        with torch.no_grad():
            logp = F.log_softmax(lm(x).logits[0, :-1].double(), dim=-1)  # (T, V)
        out.append(float(logp.gather(1, torch.tensor(ids).unsqueeze(1)).sum()))
    return out


def test_suite_perplexity_equals_our_own_from_the_summed_log_likelihood(export, tmp_path, capsys):
    lm, tok, model_dir, spec = export
    out = tmp_path / "res"
    args = ["evaluate", "--model", str(model_dir), "--suite", "lm-eval", "--data", spec]
    assert main([*args, "--max-documents", "6", "--out", str(out), "--batch-size", "4"]) == 0
    assert "complexformer_ppl word_perplexity" in capsys.readouterr().out
    payload = json.loads((out / "lm-eval.json").read_text())
    assert (out / "lm-eval.md").read_text().startswith("# lm-evaluation-harness")
    assert payload["export"] == str(model_dir)  # an export is used as it is
    docs = [json.loads(line)["text"] for line in (out / "lm-eval_documents.jsonl").open()]
    assert len(docs) == payload["documents"] == 6
    ll = sum(_our_loglikelihoods(lm, tok, docs))
    words = sum(len(re.split(r"\s+", d)) for d in docs)
    n_bytes = sum(len(d.encode("utf-8")) for d in docs)
    ppl = payload["metrics"]["complexformer_ppl"]
    assert ppl["word_perplexity"] == pytest.approx(math.exp(-ll / words), rel=1e-4)
    assert ppl["byte_perplexity"] == pytest.approx(math.exp(-ll / n_bytes), rel=1e-4)
    assert ppl["bits_per_byte"] == pytest.approx(-ll / (n_bytes * math.log(2)), rel=1e-4)
    mc = payload["metrics"]["complexformer_mc"]
    assert 0.0 <= mc["acc"] <= 1.0 and payload["n_samples"]["complexformer_mc"]["effective"] == 12


def test_suite_exports_a_trained_run_to_a_temporary_directory(tiny_run, tmp_path):
    cfg = LmEvalConfig(tasks=("complexformer_ppl",), max_documents=3, batch_size=2)
    payload = run_lmeval_suite(tiny_run, cfg, tmp_path)
    assert payload["export"] is None  # exported for the harness and removed afterwards
    assert payload["ppl_data"]["spec"].startswith("text:")  # the run's own corpus
    assert math.isfinite(payload["metrics"]["complexformer_ppl"]["byte_perplexity"])
    assert payload["files"]["documents"].endswith("lm-eval_documents.jsonl")


def test_lm_eval_command_line_runs_the_shipped_tasks(export, tmp_path):
    _, _, model_dir, _ = export
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env["HF_MODULES_CACHE"] = str(tmp_path / "modules")
    cmd = [
        sys.executable,
        "-m",
        "lm_eval",
        "--model",
        "hf",
        "--model_args",
        f"pretrained={model_dir},trust_remote_code=True",
        "--tasks",
        "complexformer_ppl,complexformer_mc",
        "--include_path",
        str(TASKS_DIR),
        "--limit",
        "3",
        "--batch_size",
        "2",
        "--device",
        "cpu",
        "--output_path",
        str(tmp_path / "harness"),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    results = next((tmp_path / "harness").rglob("results_*.json"))
    data = json.loads(results.read_text())["results"]
    assert {"complexformer_ppl", "complexformer_mc"} <= set(data)
    assert data["complexformer_ppl"]["word_perplexity,none"] > 1.0


def test_config_is_checked():
    assert LmEvalConfig(tasks="complexformer_ppl,hellaswag").tasks == (
        "complexformer_ppl",
        "hellaswag",
    )
    assert LmEvalConfig().offline and not LmEvalConfig(tasks=("hellaswag",)).offline
    with pytest.raises(ValueError, match="split must be one of"):
        LmEvalConfig(split="dev")
    with pytest.raises(ValueError, match="max_documents must be a positive integer"):
        LmEvalConfig(max_documents=0)
    with pytest.raises(ValueError, match="at least one task"):
        LmEvalConfig(tasks=())


def test_task_data_errors_name_the_file_and_line(tmp_path):
    sys.path.insert(0, str(TASKS_DIR))
    try:
        import local_data
    finally:
        sys.path.remove(str(TASKS_DIR))
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"question": "q", "choices": ["a"], "answer": 3}\n')
    with pytest.raises(ValueError, match="answer must index choices"):
        local_data.mc_questions(mc_file=str(bad))
    bad.write_text('{"text": "fine"}\nnot json\n')
    with pytest.raises(ValueError, match=r"q.jsonl:2 is not valid JSON"):
        local_data.ppl_documents(ppl_file=str(bad))
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        local_data.ppl_documents(ppl_file=str(tmp_path / "missing.jsonl"))
    assert len(local_data.ppl_documents()["validation"]) == 8  # the shipped sample
