"""ComplexLoRAConfig and CmplxBertConfig: validation, target matching, JSON round trip,
unknown keys, and the older single-config files."""

from __future__ import annotations

import json

import pytest

from complexformer.cmplxbert import DEFAULT_TARGET_MODULES, CmplxBertConfig, ComplexLoRAConfig
from complexformer.cmplxbert.config import split_config_dict, split_overrides


def test_lora_config_json_round_trip(tmp_path):
    c = ComplexLoRAConfig(r=16, alpha=32, dropout=0.1, target_modules="bert\\..*query")
    m = CmplxBertConfig(
        attention_score="real",
        head_output="real",
        whiten="full",
        layer_norm_eps=1e-6,
        train_heads="full",
        add_mlm_head=True,
    )
    assert ComplexLoRAConfig.from_json(c.to_json()) == c
    assert CmplxBertConfig.from_json(m.to_json()) == m
    c.save(tmp_path / "c.json")
    m.save(tmp_path / "m.json")
    assert ComplexLoRAConfig.load(tmp_path / "c.json") == c
    assert CmplxBertConfig.load(tmp_path / "m.json") == m
    assert json.loads((tmp_path / "c.json").read_text())["r"] == 16
    d = ComplexLoRAConfig()
    assert ComplexLoRAConfig.from_dict(d.to_dict()) == d
    assert CmplxBertConfig.from_dict(CmplxBertConfig().to_dict()) == CmplxBertConfig()
    assert d.target_modules == list(DEFAULT_TARGET_MODULES)
    assert d.scaling == 1.0 and c.scaling == 2.0


def test_lora_config_unknown_keys_name_the_closest():
    with pytest.raises(ValueError, match="'alhpa' \\(did you mean 'alpha'\\?\\)"):
        ComplexLoRAConfig.from_dict({"r": 4, "alhpa": 8})
    with pytest.raises(ValueError, match="did you mean 'target_modules'"):
        ComplexLoRAConfig.from_dict({"target_module": ["query"]})
    with pytest.raises(ValueError, match="did you mean 'attention_score'"):
        CmplxBertConfig.from_dict({"attention_scores": "real"})
    with pytest.raises(ValueError, match="'whitten' \\(did you mean 'whiten'\\?\\)"):
        split_overrides({"r": 2, "whitten": "full"})


def test_split_overrides_routes_each_field_to_its_config():
    lora, model = split_overrides({"r": 2, "dropout": 0.1, "whiten": "full", "train_norms": False})
    assert lora == {"r": 2, "dropout": 0.1}
    assert model == {"whiten": "full", "train_norms": False}


def test_split_config_dict_reads_old_single_config_files():
    old = {
        "r": 4,
        "alpha": None,
        "dropout": 0.0,
        "target_modules": ["query", "value"],
        "init": "zero_b",
        "embedding_init": "zero_a",
        "complex_bias": True,
        "attention_score": "real",
        "head_output": "real",
        "whiten": "full",
        "layer_norm_eps": None,
        "train_norms": False,
        "train_heads": "none",
        "add_mlm_head": True,
    }
    lora, model = split_config_dict({"format": "x", "version": 1, "lora": old})
    assert lora == ComplexLoRAConfig(r=4, target_modules=["query", "value"], init="zero_b")
    assert model == CmplxBertConfig(
        attention_score="real",
        head_output="real",
        whiten="full",
        train_norms=False,
        train_heads="none",
        add_mlm_head=True,
        start="paper",  # files from before the choice had the paper's zero start
    )
    new = {"lora": lora.to_dict(), "cmplxbert": model.to_dict()}
    assert split_config_dict(new) == (lora, model)
    with pytest.raises(ValueError, match="did you mean 'dropout'"):
        split_config_dict({"lora": {"r": 2, "dropuot": 0.1}})


@pytest.mark.parametrize(
    "cls,kw,msg",
    [
        (ComplexLoRAConfig, {"r": 0}, "r must be a positive integer, got 0"),
        (ComplexLoRAConfig, {"r": -2}, "r must be a positive integer, got -2"),
        (ComplexLoRAConfig, {"r": 2.0}, "r must be a positive integer"),
        (
            CmplxBertConfig,
            {"attention_score": "phase"},
            "unknown attention_score 'phase'; allowed: 'modulus', 'real'",
        ),
        (
            CmplxBertConfig,
            {"head_output": "abs"},
            "unknown head_output 'abs'; allowed: 'modulus', 'real'",
        ),
        (CmplxBertConfig, {"whiten": "none"}, "unknown whiten 'none'"),
        (ComplexLoRAConfig, {"init": "gaussian"}, "unknown init 'gaussian'"),
        (CmplxBertConfig, {"train_heads": "all"}, "unknown train_heads 'all'"),
        (ComplexLoRAConfig, {"dropout": 1.0}, "dropout must be in \\[0, 1\\)"),
        (ComplexLoRAConfig, {"alpha": -1}, "alpha must be a positive number"),
        (ComplexLoRAConfig, {"target_modules": []}, "non-empty list"),
        (ComplexLoRAConfig, {"target_modules": "query("}, "not a valid regular expression"),
        (CmplxBertConfig, {"layer_norm_eps": 0.0}, "layer_norm_eps must be > 0 or None"),
        (CmplxBertConfig, {"train_norms": 1}, "train_norms must be a bool"),
    ],
)
def test_lora_config_bad_values(cls, kw, msg):
    with pytest.raises(ValueError, match=msg):
        cls(**kw)


def test_full_whitening_with_the_keep_start_of_modulus_scores_is_refused():
    with pytest.raises(ValueError, match="whiten='full' with start='keep' and attention_sc"):
        CmplxBertConfig(whiten="full")  # modulus scores and the keep start are the defaults
    with pytest.raises(ValueError, match="use whiten='scalar' or start='paper'"):
        CmplxBertConfig.paper(start="keep")
    # the neighbours of the refused combination are allowed
    assert CmplxBertConfig(whiten="full", start="paper").whiten == "full"
    assert CmplxBertConfig(whiten="full", attention_score="real").start == "keep"
    assert CmplxBertConfig(whiten="scalar").start == "keep"


def test_lora_config_target_matching():
    c = ComplexLoRAConfig(target_modules=["query", "attention.output.dense"])
    assert c.is_target("bert.encoder.layer.3.attention.self.query")
    assert c.is_target("bert.encoder.layer.3.attention.output.dense")
    assert not c.is_target("bert.encoder.layer.3.output.dense")
    assert not c.is_target("bert.encoder.layer.3.attention.self.myquery")
    rx = ComplexLoRAConfig(target_modules=r".*layer\.[01]\..*(query|value)")
    assert rx.is_target("bert.encoder.layer.1.attention.self.value")
    assert not rx.is_target("bert.encoder.layer.2.attention.self.value")
