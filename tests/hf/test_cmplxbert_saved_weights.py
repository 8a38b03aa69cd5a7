"""A CmplxBERT's save_pretrained keeps only what trains when it records its base model (peft's
adapter-only habit): the file holds exactly the trainable tensors, from_pretrained rebuilds the
frozen real weights from the base and gives the saved model's outputs bit for bit, another base
is refused (a sha256 of the frozen weights), a damaged file is named by the manifest, and
``complexformer info`` describes the folder (and an export) without loading it."""

from __future__ import annotations

import json

import pytest
import torch
from torch.testing import assert_close

pytest.importorskip("transformers")

from complexformer.cmplxbert import complexify, load_hf_bert  # noqa: E402
from tests.cmplxbert.lora_testlib import batch, save_tiny_bert_dir  # noqa: E402
from tests.hf.test_cmplxbert import _trained  # noqa: E402


def _keys(path):
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        return set(f.keys())


def _classifier(base):
    from complexformer.hf.cmplxbert import to_transformers

    real, _ = load_hf_bert(str(base), "classification", 3)
    return to_transformers(_trained(complexify(real, r=2))).eval()


def test_saves_only_what_trains_and_rebuilds_on_the_base(tmp_path):
    import transformers

    base = save_tiny_bert_dir(tmp_path / "bert", "BertModel")
    hf = _classifier(base)
    assert hf.config.base_model_name_or_path == str(base)
    assert hf.saved_weights() == "trainable"
    d = tmp_path / "saved"
    hf.save_pretrained(d)
    trains = {n for n, p in hf.named_parameters() if p.requires_grad}
    assert _keys(d / "model.safetensors") == trains
    assert "cmplxbert.classifier.base_layer.weight" in trains  # the new head is kept
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["saved_weights"] == "trainable" and len(cfg["frozen_sha256"]) == 64
    assert not hasattr(hf.config, "saved_weights")  # the live config is left as it was
    back = transformers.AutoModelForSequenceClassification.from_pretrained(d)
    assert type(back) is type(hf) and not back.training
    ids, mask, tt = batch(vocab=1000)
    with torch.no_grad():
        want = hf(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits
        got = back(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits
    assert_close(got, want, rtol=0, atol=0)
    assert {n for n, p in back.named_parameters() if p.requires_grad} == trains
    # every tensor on request: the folder loads without the base
    full = tmp_path / "full"
    hf.save_pretrained(full, weights="all")
    assert _keys(full / "model.safetensors") >= set(hf.state_dict()) - {
        "cmplxbert.cls.predictions.decoder.base_layer.weight"
    }
    assert json.loads((full / "config.json").read_text())["saved_weights"] == "all"
    assert (d / "model.safetensors").stat().st_size < (full / "model.safetensors").stat().st_size
    with pytest.raises(ValueError, match="weights must be one of"):
        hf.save_pretrained(tmp_path / "x", weights="adapters")


def test_another_base_a_missing_base_and_a_damaged_file_are_refused(tmp_path):
    from complexformer.hf.cmplxbert import CmplxBertForSequenceClassification

    base = save_tiny_bert_dir(tmp_path / "bert", "BertModel")
    d = tmp_path / "saved"
    _classifier(base).save_pretrained(d)
    other = save_tiny_bert_dir(tmp_path / "other", "BertModel", seed=7)
    with pytest.raises(ValueError, match="is not the one .* was trained on"):
        CmplxBertForSequenceClassification.from_pretrained(d, base_model_name_or_path=str(other))
    cfg = json.loads((d / "config.json").read_text())
    nobase = tmp_path / "nobase"
    nobase.mkdir()
    (nobase / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes())
    (nobase / "config.json").write_text(json.dumps({**cfg, "base_model_name_or_path": None}))
    with pytest.raises(ValueError, match="records no base model; pass base_model_name_or_path"):
        CmplxBertForSequenceClassification.from_pretrained(nobase, verify=False)
    # the recorded base, given again by hand, loads the folder
    back = CmplxBertForSequenceClassification.from_pretrained(
        nobase, base_model_name_or_path=str(base), verify=False
    )
    assert back.config.base_model_name_or_path == str(base)
    data = bytearray((d / "model.safetensors").read_bytes())
    data[-3] ^= 0xFF
    (d / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="model.safetensors is corrupted"):
        CmplxBertForSequenceClassification.from_pretrained(d)


def test_info_describes_saved_folders_and_exports_and_export_refuses_them(tmp_path, capsys):
    from complexformer.artifacts import detect_kind, load_artifact
    from complexformer.cli import main

    base = save_tiny_bert_dir(tmp_path / "bert", "BertModel")
    hf = _classifier(base)
    hf.config.id2label = {0: "a", 1: "b", 2: "c"}
    d = tmp_path / "saved"
    hf.save_pretrained(d)
    assert detect_kind(d) == "cmplxbert-hf"
    info = load_artifact(d).info()
    trains = [p for p in hf.parameters() if p.requires_grad]
    assert info["meta"] == {"task": "classification", "class": type(hf).__name__,
                            "base": str(base), "saved_weights": "trainable"}  # fmt: skip
    assert info["parameters"] == {"saved_tensors": len(trains),
                                  "saved_real": sum(p.numel() for p in trains)}  # fmt: skip
    assert info["config"]["labels"] == ["a", "b", "c"]
    assert main(["info", "--model", str(d)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cmplxbert-hf: ") and "saved_weights: trainable" in out
    assert main(["export", "--model", str(d), "--out", str(tmp_path / "exp")]) == 2
    assert "is already in transformers' format" in capsys.readouterr().err
    with pytest.raises(ValueError, match="needs a ComplexFormer language model"):
        load_artifact(d).require_lm("generate")
    # an export: every tensor, described the same way
    from transformers import AutoTokenizer

    from complexformer.cmplxbert import save_cmplxbert
    from complexformer.hf.export_cmplxbert import export_cmplxbert

    tok = AutoTokenizer.from_pretrained(str(base))
    kept = save_cmplxbert(hf.cmplxbert, tmp_path / "kept", str(base), tok,
                          extra={"labels": ["a", "b", "c"], "num_labels": 3})  # fmt: skip
    exp = export_cmplxbert(kept, tmp_path / "export")
    assert detect_kind(exp) == "cmplxbert-export"
    einfo = load_artifact(exp).info()
    assert einfo["meta"]["saved_weights"] == "all" and einfo["meta"]["task"] == "classification"
    assert einfo["parameters"]["saved_tensors"] > info["parameters"]["saved_tensors"]
    assert main(["export", "--model", str(exp), "--out", str(tmp_path / "exp2")]) == 2
    assert "from_pretrained(DIR, trust_remote_code=True)" in capsys.readouterr().err


@pytest.mark.parametrize("weights", [None, "all"])
def test_a_merged_model_saves_and_loads_with_its_outputs(tmp_path, weights):
    """merge_and_unload then save_pretrained (only what trains, or every tensor) and
    from_pretrained: the loaded model gives the merged model's outputs (1e-5)."""
    import transformers

    base = save_tiny_bert_dir(tmp_path / "bert", "BertModel")
    hf = _classifier(base)
    ids, mask, tt = batch(vocab=1000)
    with torch.no_grad():
        before = hf(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits
    merged = hf.merge_and_unload()
    with torch.no_grad():
        want = merged(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits
    assert_close(want, before, rtol=1e-5, atol=1e-5)
    d = tmp_path / "merged"
    merged.save_pretrained(d, weights=weights)
    back = transformers.AutoModelForSequenceClassification.from_pretrained(d).eval()
    with torch.no_grad():
        got = back(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits
    assert_close(got, want, rtol=1e-5, atol=1e-5)
