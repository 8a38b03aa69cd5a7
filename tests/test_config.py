"""The config base (JSON round trip, unknown keys, validation) and the KEY=VALUE parser."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from complexformer.config import (
    ConfigBase,
    NamedConfigs,
    field_docs,
    parse_overrides,
    parse_value,
    unknown_key_error,
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


def test_named_configs_extends_merges_tables_and_refuses_cycles():
    data = {
        "a": {"description": "A", "x": {"p": 1, "q": 2}, "y": 3},
        "b": {"extends": "a", "x": {"q": 5}},
    }
    named = NamedConfigs.from_dict(data, "recipe", "f.toml")
    assert named["b"] == {"x": {"p": 1, "q": 5}, "y": 3}
    assert named.descriptions == {"a": "A", "b": ""}
    with pytest.raises(ValueError, match="extends itself"):
        NamedConfigs.from_dict({"a": {"extends": "b"}, "b": {"extends": "a"}}, "recipe", "f")
    with pytest.raises(ValueError, match="unknown recipe to extend"):
        NamedConfigs.from_dict({"a": {"extends": "zz"}}, "recipe", "f")


def test_field_docs_read_the_attributes_section():
    @dataclass
    class Base:
        """Base.

        Attributes:
            a: the first
                field, on two lines.
            b (int): uses ``code`` and :class:`~pkg.mod.Thing`.

        Raises:
            ValueError: not a field.
        """

        a: int = 1
        b: int = 2

    @dataclass
    class Child(Base):
        """Child.

        Attributes:
            b: redefined.
            c: *new*.
        """

        c: int = 3

    assert field_docs(Base) == {
        "a": "the first field, on two lines.",
        "b": "uses code and Thing.",
    }
    assert field_docs(Child) == {
        "a": "the first field, on two lines.",
        "b": "redefined.",
        "c": "new.",
    }
