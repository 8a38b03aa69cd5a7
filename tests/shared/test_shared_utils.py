"""The shared utilities: the config base, the KEY=VALUE parser, context managers, manifests and
local-path checks."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from complexformer.config import ConfigBase, parse_overrides, parse_value, unknown_key_error
from complexformer.runtime import cpu_settings, eval_mode
from complexformer.storage import (
    ManifestError,
    looks_local,
    require_local_or_hub,
    update_manifest,
    verify_manifest,
    write_manifest,
)


@dataclass
class _Cfg(ConfigBase):
    lr: float = 1e-3
    betas: tuple = (0.9, 0.99)
    name: str = "x"

    _what = "test field"

    def __post_init__(self) -> None:
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        self.betas = tuple(self.betas)


def test_config_round_trip_and_unknown_keys(tmp_path):
    cfg = _Cfg(lr=0.5, betas=(0.8, 0.9), name="y")
    d = cfg.to_dict()
    assert d == {"lr": 0.5, "betas": [0.8, 0.9], "name": "y"}  # tuples as JSON lists
    assert _Cfg.from_dict(d) == cfg and _Cfg.from_json(cfg.to_json()) == cfg
    assert json.loads(cfg.to_json()) == d
    cfg.save(tmp_path / "c.json")
    assert _Cfg.load(tmp_path / "c.json") == cfg
    with pytest.raises(ValueError, match=r"unknown test field 'lrr' \(did you mean 'lr'\?\)"):
        _Cfg.from_dict({"lrr": 1})
    with pytest.raises(ValueError, match="'nme'.*'name'.*; valid: lr, betas, name"):
        cfg.replace(nme="z")
    with pytest.raises(ValueError, match="lr must be > 0"):
        cfg.replace(lr=-1.0)
    assert cfg.replace(lr=2.0).lr == 2.0 and cfg.lr == 0.5
    with pytest.raises(ValueError, match="expected a dict, got list"):
        _Cfg.from_dict([1, 2])
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(ValueError, match="bad.json is not valid JSON"):
        _Cfg.load(tmp_path / "bad.json")
    err = unknown_key_error(["a", "b"], ["alpha", "beta"], "thing")
    assert str(err).startswith("unknown thing 'a', 'b'")


def test_parse_overrides():
    assert parse_value("1e-3") == 1e-3 and parse_value("[1, 2]") == [1, 2]
    assert parse_value("True") is True and parse_value("NONE") is None
    assert parse_value("rope") == "rope" and parse_value('"1"') == "1"
    assert parse_overrides([" a =1", "b=x=y"]) == {"a": 1, "b": "x=y"}
    with pytest.raises(ValueError, match="--opt expects KEY=VALUE, got '=1'"):
        parse_overrides(["=1"], option="--opt")


def test_eval_mode_restores_the_flag_on_error():
    model = nn.Sequential(nn.Dropout(0.5))
    model.train()
    with pytest.raises(RuntimeError):
        with eval_mode(model):
            assert not model.training and not model[0].training
            raise RuntimeError("boom")
    assert model.training and model[0].training
    model.eval()
    with eval_mode(model):
        pass
    assert not model.training


def test_cpu_settings_restore_threads_and_denormals():
    n = torch.get_num_threads()
    tiny = torch.tensor([1e-40], dtype=torch.float32)  # a denormal float
    with cpu_settings(threads=1, flush_denormal=True):
        assert torch.get_num_threads() == 1
        assert float(tiny * 1.0) == 0.0  # flushed to zero inside
    assert torch.get_num_threads() == n
    assert float(tiny * 1.0) != 0.0  # restored outside
    with pytest.raises(ValueError):
        with cpu_settings(threads=1):
            raise ValueError
    assert torch.get_num_threads() == n


def test_manifest_detects_each_kind_of_damage(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"\x00" * 100)
    (tmp_path / "b.json").write_text("{}")
    write_manifest(tmp_path, ["a.bin", "b.json"], kind="model")
    m = verify_manifest(tmp_path)
    assert m["kind"] == "model" and set(m["files"]) == {"a.bin", "b.json"}
    (tmp_path / "a.bin").write_bytes(b"\x00" * 99 + b"\x01")  # same size, one byte changed
    with pytest.raises(ManifestError, match="a.bin is corrupted: sha256"):
        verify_manifest(tmp_path)
    (tmp_path / "a.bin").write_bytes(b"\x00" * 10)
    with pytest.raises(ManifestError, match="truncated"):
        verify_manifest(tmp_path)
    (tmp_path / "a.bin").unlink()
    with pytest.raises(ManifestError, match="a.bin is missing"):
        verify_manifest(tmp_path)
    (tmp_path / "manifest.json").unlink()
    assert verify_manifest(tmp_path, required=False) is None
    with pytest.raises(ManifestError, match="manifest.json is missing"):
        verify_manifest(tmp_path)


def test_update_manifest_keeps_the_other_entries_as_recorded(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"\x00" * 100)
    write_manifest(tmp_path, ["a.bin"], kind="model", step=3)
    (tmp_path / "a.bin").write_bytes(b"\x00" * 99 + b"\x01")  # changed after the save
    (tmp_path / "new.json").write_text("{}")
    update_manifest(tmp_path, ["new.json"], kind="adapters")
    m = json.loads((tmp_path / "manifest.json").read_text())
    assert m["kind"] == "model" and m["step"] == 3  # the folder's own fields
    assert set(m["files"]) == {"a.bin", "new.json"}
    with pytest.raises(ManifestError, match="a.bin is corrupted"):  # not re-blessed
        verify_manifest(tmp_path)
    (tmp_path / "a.bin").write_bytes(b"\x00" * 100)
    assert verify_manifest(tmp_path)["files"]["new.json"]["bytes"] == 2
    (tmp_path / "manifest.json").unlink()  # none there: a new one of the files given
    update_manifest(tmp_path, ["new.json"], kind="adapters")
    m = verify_manifest(tmp_path)
    assert m["kind"] == "adapters" and set(m["files"]) == {"new.json"}


def test_local_paths_and_hub_names(tmp_path):
    assert looks_local("/x/y") and looks_local("./x") and looks_local("~/x") and looks_local("..")
    assert looks_local(tmp_path)  # exists
    assert not looks_local("gpt2") and not looks_local("HuggingFaceTB/SmolLM2-135M")
    require_local_or_hub("gpt2", "model")  # a hub name: left to the hub
    require_local_or_hub(tmp_path, "model")
    with pytest.raises(FileNotFoundError, match=r"model .*nope: no such file or directory"):
        require_local_or_hub(tmp_path / "nope", "model")
