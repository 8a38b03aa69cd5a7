"""The named configurations shipped as TOML files: the model presets and the CmplxBERT
recipes, each a base plus its differences."""

from __future__ import annotations

import pytest

from complexformer.config import named_configs
from complexformer.models.config import PRESETS


def test_presets_file_resolves_extends_as_base_plus_differences():
    assert PRESETS["small"] == {**PRESETS["tiny"], "d_ff": 256, "tie_embeddings": False}
    assert PRESETS["gpt2"]["omega_schedule"] == "rope" and PRESETS["paper"]["omega_schedule"] == (
        "paper"
    )
    assert PRESETS["gpt2"]["vocab_size"] == PRESETS["paper"]["vocab_size"] == 50257
    PRESETS["tiny"]["n_layer"] = 99  # a copy: the file's values cannot be changed by a caller
    assert PRESETS["tiny"]["n_layer"] == 4
    with pytest.raises(ValueError, match="did you mean 'tiny'"):
        PRESETS["tinny"]


def test_cmplxbert_recipes_come_from_the_shipped_file():
    from complexformer.cmplxbert.config import CmplxBertConfig, ComplexLoRAConfig, recipe_configs

    recipes = named_configs("cmplxbert_recipes.toml", "recipe")
    assert recipes.names() == ["library", "paper"]
    paper = recipe_configs("paper")
    assert paper["model"] == CmplxBertConfig.paper()
    assert paper["lora"] == ComplexLoRAConfig.paper()
    assert paper["mlm"]["batch_size"] == 512 and paper["mlm"]["lr"] == 1e-4
    assert paper["finetune"] == {"lr": 1e-4, "epochs": 2, "base_lr_ratio": 1.0}
    assert recipe_configs("library")["model"] == CmplxBertConfig()
