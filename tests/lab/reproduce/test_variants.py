"""The reproduction scales as data: ``complexformer_lab/configs/scales.toml`` read into
:data:`SCALES`, each scale a base plus its differences, equal to the scales the code held before
they became a data file (``data/scales_before.json``, recorded from that code)."""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

import pytest

from complexformer.models.config import preset_fields
from complexformer_lab.configs import lab_configs, resolve_table
from complexformer_lab.reproduce.budget import WIKITEXT103_GPT2_TRAIN_TOKENS
from complexformer_lab.reproduce.finetune import FINETUNE_LR
from complexformer_lab.reproduce.variants import SCALES, describe_scales

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

BEFORE = json.loads((Path(__file__).parent / "data" / "scales_before.json").read_text())
RAW = tomllib.loads(
    resources.files("complexformer_lab.configs").joinpath("scales.toml").read_text("utf-8")
)


def test_the_scales_equal_those_the_code_held_before_key_order_included():
    now = {name: scale.to_dict() for name, scale in SCALES.items()}
    assert json.dumps(now, indent=1) == json.dumps(BEFORE["scales"], indent=1)


def _leaves(table: dict, prefix: str = "") -> dict[str, object]:
    out = {}
    for key, value in table.items():
        if isinstance(value, dict):
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def test_small_is_written_as_tiny_plus_its_differences():
    assert RAW["small"]["extends"] == "tiny"
    tiny, small = _leaves(RAW["tiny"]), _leaves(RAW["small"])
    repeated = {k: v for k, v in small.items() if k in tiny and tiny[k] == v}
    assert repeated == {}, f"small repeats tiny's values: {repeated}"
    # what small leaves out takes tiny's value, what it unsets its default
    assert SCALES["small"].train["lr"] == SCALES["tiny"].train["lr"]
    assert SCALES["small"].finetune.code["ks"] == SCALES["tiny"].finetune.code["ks"]
    assert SCALES["tiny"].ppl_max_blocks == 200 and SCALES["small"].ppl_max_blocks is None
    assert "max_problems" not in SCALES["small"].finetune.code


def test_the_models_name_the_librarys_presets():
    for name, preset in (("tiny", "micro"), ("small", "small"), ("paper", "paper")):
        assert RAW[name]["model"] == {"preset": preset}
        assert SCALES[name].model == {
            k: v for k, v in preset_fields(preset).items() if k != "vocab_size"
        }
    gpt2 = SCALES["paper"].gpt2_model
    assert gpt2["d_model"] == preset_fields("gpt2")["d_model"] and gpt2["max_seq_len"] == 512
    assert "pos_scheme" not in gpt2 and "omega_schedule" not in gpt2


def test_the_numbers_the_file_states_agree_with_the_code():
    assert SCALES["paper"].train_tokens_estimate == WIKITEXT103_GPT2_TRAIN_TOKENS
    assert {s.finetune.train["lr"] for s in SCALES.values()} == {FINETUNE_LR}


def test_help_lists_every_scale_with_its_description():
    text = describe_scales()
    for name, scale in SCALES.items():
        assert f"  {name:<8}{scale.description}" in text.splitlines()
    assert lab_configs("scales.toml", "scale").names() == list(SCALES)


def test_a_table_resolves_preset_unset_and_lists():
    table = {"preset": "micro", "d_ff": 512, "unset": ["dropout"], "inner": {"x": [1, 2]}}
    got = resolve_table(table)
    assert got["d_ff"] == 512 and got["n_layer"] == preset_fields("micro")["n_layer"]
    assert "dropout" not in got and "preset" not in got and "unset" not in got
    assert got["inner"] == {"x": (1, 2)}
    with pytest.raises(ValueError, match="preset"):
        resolve_table({"preset": "nonesuch"})
