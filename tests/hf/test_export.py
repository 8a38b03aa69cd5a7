"""Export -> AutoModelForCausalLM: the same logits as ComplexFormerLM for every scheme."""

from __future__ import annotations

import inspect
import json
import shutil

import pytest
import torch

pytest.importorskip("transformers")

from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast  # noqa: E402

from complexformer.attention.registry import SCHEMES  # noqa: E402
from complexformer.data.tokenizer import Tokenizer  # noqa: E402
from complexformer.hf.configuration_complexformer import ComplexFormerConfig  # noqa: E402
from complexformer.hf.export import save_hf, to_hf_model  # noqa: E402
from complexformer.hf.modeling_complexformer import ComplexFormerForCausalLM  # noqa: E402
from complexformer.lm import load_run  # noqa: E402
from complexformer.models import ComplexFormerLM, GPTConfig  # noqa: E402
from complexformer.models.config import HF_NAMES, gpt_config_from_hf  # noqa: E402
from tests.hf.hf_testlib import tiny_lm  # noqa: E402

#: Every registered positional scheme: a new one fails here until the port implements it.
ALL_SCHEMES = sorted(SCHEMES)


def _ids(vocab: int, b: int = 2, t: int = 24, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (b, t), generator=g)


@pytest.mark.parametrize("scheme", ALL_SCHEMES)
def test_logits_equal_for_every_scheme_with_and_without_cache(exported, scheme):
    lm, out = exported(scheme)
    hf = AutoModelForCausalLM.from_pretrained(out).eval()
    assert isinstance(hf, ComplexFormerForCausalLM)
    ids = _ids(lm.config.vocab_size)
    with torch.no_grad():
        ours = lm(ids).logits  # (B, T, V)
        full = hf(ids, use_cache=False).logits
        torch.testing.assert_close(full, ours, atol=1e-5, rtol=0)
        # prefill 10 positions, then one token at a time through transformers' DynamicCache
        step = hf(ids[:, :10], use_cache=True)
        cache, pieces = step.cache, [step.logits]
        for i in range(10, ids.shape[1]):
            step = hf(ids[:, i : i + 1], cache=cache, use_cache=True)
            cache = step.cache
            pieces.append(step.logits)
        assert cache.get_seq_length() == ids.shape[1]
    torch.testing.assert_close(torch.cat(pieces, dim=1), ours, atol=1e-5, rtol=0)


@pytest.mark.parametrize("overrides", [dict(norm="post", bias=False), dict(tie_embeddings=False)])
def test_norm_bias_and_untied_embeddings(tokenizer, tmp_path, overrides):
    lm = tiny_lm(tokenizer, "cmha_shared", **overrides)
    out = save_hf(lm, tokenizer, tmp_path / "export")
    hf = AutoModelForCausalLM.from_pretrained(out).eval()
    ids = _ids(lm.config.vocab_size)
    with torch.no_grad():
        torch.testing.assert_close(hf(ids).logits, lm(ids).logits, atol=1e-5, rtol=0)


def test_paper_schedule_and_rope_base(tokenizer):
    lm = tiny_lm(tokenizer, "cmha", omega_schedule="paper", rope_base=500.0)
    hf = to_hf_model(lm, tokenizer)
    ids = _ids(lm.config.vocab_size)
    with torch.no_grad():
        torch.testing.assert_close(hf(ids).logits, lm(ids).logits, atol=1e-5, rtol=0)


def test_state_dict_names_match_one_to_one(tokenizer):
    for scheme in ALL_SCHEMES:
        lm = tiny_lm(tokenizer, scheme, pcl=scheme.startswith("cmha"))
        hf = ComplexFormerForCausalLM(ComplexFormerConfig(**_hf_fields(lm.config)))
        assert set(hf.state_dict()) == set(lm.state_dict()), scheme


def _hf_fields(cfg: GPTConfig) -> dict:
    return {HF_NAMES.get(k, k): v for k, v in cfg.to_dict().items()}


def test_config_fields_round_trip(exported):
    lm, out = exported("cmha")
    data = json.loads((out / "config.json").read_text())
    assert data["model_type"] == "complexformer"
    assert data["auto_map"] == {
        "AutoConfig": "configuration_complexformer.ComplexFormerConfig",
        "AutoModelForCausalLM": "modeling_complexformer.ComplexFormerForCausalLM",
    }
    assert gpt_config_from_hf(data) == lm.config
    cfg = AutoConfig.from_pretrained(out)
    assert isinstance(cfg, ComplexFormerConfig)
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.max_position_embeddings) == (32, 2, 64)
    # every GPTConfig field is an argument of the transformers config
    params = set(inspect.signature(ComplexFormerConfig.__init__).parameters)
    assert {HF_NAMES.get(f, f) for f in GPTConfig.field_names()} <= params


def test_export_directory_contents_and_manifest(exported, tokenizer):
    _, out = exported("rope")
    names = {p.name for p in out.iterdir()}
    assert {
        "config.json",
        "model.safetensors",
        "generation_config.json",
        "configuration_complexformer.py",
        "modeling_complexformer.py",
        "tokenizer.json",
        "tokenizer_config.json",
        "manifest.json",
    } <= names
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "hf-model"
    assert set(manifest["files"]) == names - {"manifest.json"}
    hf_tok = PreTrainedTokenizerFast.from_pretrained(out)
    eos = tokenizer.eos_token_id
    assert (hf_tok.eos_token_id, hf_tok.bos_token_id, hf_tok.pad_token_id) == (eos, eos, eos)
    assert hf_tok.padding_side == "left"
    text = "the cat sat on a mat. def value(self): return len(x)"
    assert hf_tok(text)["input_ids"] == tokenizer.encode(text)
    assert Tokenizer.load(out).encode(text) == tokenizer.encode(text)


def test_export_loads_back_into_complexformer_lm_and_load_run(exported):
    lm, out = exported("learned")
    back = ComplexFormerLM.from_pretrained(out)
    assert back.config == lm.config
    ids = _ids(lm.config.vocab_size)
    with torch.no_grad():
        torch.testing.assert_close(back(ids).logits, lm(ids).logits, atol=0, rtol=0)
    run = load_run(out)
    assert run.kind == "model" and run.tokenizer is not None
    assert run.tokenizer.encode("the dog") == Tokenizer.load(out).encode("the dog")


def test_damaged_export_is_refused(exported, tmp_path):
    _, out = exported("nope")
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "model.safetensors").write_bytes(b"broken")
    with pytest.raises(ValueError, match="model.safetensors"):
        ComplexFormerLM.from_pretrained(copy)


def test_export_replaces_an_earlier_export_but_not_other_directories(tokenizer, tmp_path):
    lm = tiny_lm(tokenizer, "alibi")
    out = save_hf(lm, tokenizer, tmp_path / "export")
    save_hf(lm, tokenizer, out)  # an earlier export: replaced
    assert (out / "manifest.json").is_file()
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an exported model"):
        save_hf(lm, tokenizer, other)
    assert [p.name for p in other.iterdir()] == ["notes.txt"]
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_unknown_scheme_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="known: cmha, cmha_shared"):
        ComplexFormerConfig(pos_scheme="xpos")
