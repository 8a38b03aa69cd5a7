"""ComplexLoRAConfig: validation, target matching, JSON round trip, unknown keys."""

from __future__ import annotations

import json

import pytest

from complexformer.cmplxbert import DEFAULT_TARGET_MODULES, ComplexLoRAConfig


def test_lora_config_json_round_trip(tmp_path):
    c = ComplexLoRAConfig(
        r=16,
        alpha=32,
        dropout=0.1,
        target_modules="bert\\..*query",
        attention_score="real",
        head_output="real",
        whiten="full",
        layer_norm_eps=1e-6,
        train_heads="full",
        add_mlm_head=True,
    )
    assert ComplexLoRAConfig.from_json(c.to_json()) == c
    c.save(tmp_path / "c.json")
    assert ComplexLoRAConfig.load(tmp_path / "c.json") == c
    assert json.loads((tmp_path / "c.json").read_text())["r"] == 16
    d = ComplexLoRAConfig()
    assert ComplexLoRAConfig.from_dict(d.to_dict()) == d
    assert d.target_modules == list(DEFAULT_TARGET_MODULES)
    assert d.scaling == 1.0 and c.scaling == 2.0


def test_lora_config_unknown_keys_name_the_closest():
    with pytest.raises(ValueError, match="'alhpa' \\(did you mean 'alpha'\\?\\)"):
        ComplexLoRAConfig.from_dict({"r": 4, "alhpa": 8})
    with pytest.raises(ValueError, match="did you mean 'target_modules'"):
        ComplexLoRAConfig.from_dict({"target_module": ["query"]})


@pytest.mark.parametrize(
    "kw,msg",
    [
        ({"r": 0}, "r must be a positive integer, got 0"),
        ({"r": -2}, "r must be a positive integer, got -2"),
        ({"r": 2.0}, "r must be a positive integer"),
        (
            {"attention_score": "phase"},
            "unknown attention_score 'phase'; allowed: 'modulus', 'real'",
        ),
        ({"head_output": "abs"}, "unknown head_output 'abs'; allowed: 'modulus', 'real'"),
        ({"whiten": "none"}, "unknown whiten 'none'"),
        ({"init": "gaussian"}, "unknown init 'gaussian'"),
        ({"train_heads": "all"}, "unknown train_heads 'all'"),
        ({"dropout": 1.0}, "dropout must be in \\[0, 1\\)"),
        ({"alpha": -1}, "alpha must be a positive number"),
        ({"target_modules": []}, "non-empty list"),
        ({"target_modules": "query("}, "not a valid regular expression"),
    ],
)
def test_lora_config_bad_values(kw, msg):
    with pytest.raises(ValueError, match=msg):
        ComplexLoRAConfig(**kw)


def test_lora_config_target_matching():
    c = ComplexLoRAConfig(target_modules=["query", "attention.output.dense"])
    assert c.is_target("bert.encoder.layer.3.attention.self.query")
    assert c.is_target("bert.encoder.layer.3.attention.output.dense")
    assert not c.is_target("bert.encoder.layer.3.output.dense")
    assert not c.is_target("bert.encoder.layer.3.attention.self.myquery")
    rx = ComplexLoRAConfig(target_modules=r".*layer\.[01]\..*(query|value)")
    assert rx.is_target("bert.encoder.layer.1.attention.self.value")
    assert not rx.is_target("bert.encoder.layer.2.attention.self.value")
