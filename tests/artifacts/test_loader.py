"""``load_artifact``: each kind is recognised by its marker, loaded, and served by generate /
evaluate / info / export, or refused by name."""

from __future__ import annotations

import json

import pytest
import torch
from torch.testing import assert_close

from complexformer.artifacts import detect_kind, load_artifact
from complexformer.cli import main
from complexformer.lm import load_run
from tests.common_testlib import write_corpus

TRAIN = ["--max-steps", "4", "--batch-size", "2", "--vocab-size", "300", "--eval-every", "4",
         "--save-every", "4", "--threads", "1", "--sample-tokens", "0",
         "--set", "n_layer=1", "d_model=32", "n_head=2", "d_ff=64", "max_seq_len=32"]  # fmt: skip


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"), n_lines=600)


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory, corpus):
    out = tmp_path_factory.mktemp("lm") / "run"
    assert main(["train", "--data", corpus, "--out", str(out), *TRAIN]) == 0
    return out


def test_lm_kinds_by_marker(lm_run):
    assert detect_kind(lm_run) == "lm-run"
    assert detect_kind(lm_run / "model") == "lm-model"
    step = sorted((lm_run / "checkpoints").iterdir())[-1]
    assert detect_kind(step) == "lm-checkpoint"
    for path in (lm_run, lm_run / "model", step):
        art = load_artifact(path)
        assert art.run is not None and art.is_causal_lm
        assert art.eval_dir == lm_run / "eval"
    with pytest.raises(FileNotFoundError, match="no artifact"):
        detect_kind(lm_run / "checkpoints")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        detect_kind(lm_run / "missing")


def test_lm_artifact_equals_load_run_and_scores_its_own_corpus(lm_run, corpus):
    art, run = load_artifact(lm_run), load_run(lm_run)
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    assert_close(art.run.model(ids).logits, run.model(ids).logits)
    assert art.default_data == corpus
    res = art.perplexity(split="val", max_blocks=2)
    assert res["data"] == corpus and res["ppl"] == pytest.approx(2.718281828 ** res["loss"])
    greedy = art.complete("the cat", 4, temperature=0.0, top_p=1.0, top_k=0, seed=0)
    assert greedy.startswith("the cat")
    info = art.info()
    assert info["kind"] == "lm-run" and info["config"]["n_layer"] == 1
    assert info["parameters"]["total"] == sum(p.numel() for p in run.model.parameters())


def test_export_records_no_corpus_and_refuses_to_guess(lm_run, tmp_path, capsys):
    pytest.importorskip("transformers")
    out = tmp_path / "export"
    assert main(["export", "--model", str(lm_run), "--out", str(out), "--threads", "1"]) == 0
    art = load_artifact(out)
    assert art.kind == "export" and art.default_data is None and art.eval_dir == out / "eval"
    with pytest.raises(ValueError, match="records no corpus; pass --data"):
        art.perplexity()
    with pytest.raises(ValueError, match="records no prompt; pass --prompt"):
        art.default_prompt()
    capsys.readouterr()
    assert main(["info", "--model", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "export"
    from complexformer.evaluation.genppl import load_evaluator

    evaluator = load_evaluator(str(out))  # an export scores text as a gen-PPL evaluator too
    ids = torch.tensor([[1, 2, 3, 4]])
    assert_close(evaluator.model(ids).logits, art.run.model(ids).logits, atol=1e-5, rtol=1e-5)


def test_cmplxbert_directory_is_described_and_refused_by_generate(tmp_path, capsys):
    pytest.importorskip("transformers")
    from complexformer.cmplxbert import complexify, load_hf_bert, save_cmplxbert
    from complexformer.cmplxbert.config import ComplexLoRAConfig
    from tests.cmplxbert.lora_testlib import save_tiny_bert_dir

    base = save_tiny_bert_dir(tmp_path / "bert", "BertForMaskedLM")
    hf, _ = load_hf_bert(str(base), "mlm")
    model = complexify(hf, ComplexLoRAConfig(r=2))
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(base))
    save_cmplxbert(model, tmp_path / "cb", base=str(base), tokenizer=tokenizer)
    assert detect_kind(tmp_path / "cb") == "cmplxbert"
    assert main(["info", "--model", str(tmp_path / "cb"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["kind"] == "cmplxbert" and info["meta"]["base"] == str(base)
    assert info["parameters"]["trainable_real"] > 0
    code = main(["generate", "--model", str(tmp_path / "cb"), "--prompt", "x"])
    err = capsys.readouterr().err
    assert code == 2 and "complexformer generate: error: generation needs a causal" in err
    assert "is a CmplxBERT directory" in err
    # export writes a CmplxBERT export (tests/hf/test_export_cmplxbert.py loads it)
    code = main(["export", "--model", str(tmp_path / "cb"), "--out", str(tmp_path / "x")])
    assert code == 0 and (tmp_path / "x" / "modeling_cmplxbert.py").is_file()


def test_an_existing_run_is_named_in_the_command_line_s_terms(lm_run, corpus, capsys):
    capsys.readouterr()
    assert main(["train", "--data", corpus, "--out", str(lm_run), *TRAIN]) == 2
    err = capsys.readouterr().err
    assert "complexformer train: error:" in err and "add --resume to continue it" in err
    assert "resume=True" not in err
