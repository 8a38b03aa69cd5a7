"""The compat package exports complextorch 2.1.1's names at complextorch's import paths.

Code written for complextorch works with ``complextorch`` replaced by
``complexformer.compat.complextorch`` in its import lines (scripts/complextorch-own-tests.sh
runs complextorch's own tests that way), for the positional encodings, attention, Transformer
and ViT.
"""

from __future__ import annotations

import importlib

import pytest

import complexformer.compat.complextorch as cc

ct = pytest.importorskip("complextorch")

#: complextorch modules the compat package reproduces, at the same path below it
MODULES = (
    "complextorch.nn.modules.position",
    "complextorch.nn.modules.attention",
    "complextorch.nn.modules.attention.holographic",
    "complextorch.nn.modules.transformer",
    "complextorch.nn.modules.layernorm",
    "complextorch.nn.modules.softmax",
    "complextorch.models.vit",
)


def _compat_path(path: str) -> str:
    return path.replace("complextorch", "complexformer.compat.complextorch", 1)


@pytest.mark.parametrize("path", MODULES)
def test_compat_module_exports_complextorch_s_names(path):
    theirs, ours = importlib.import_module(path), importlib.import_module(_compat_path(path))
    assert sorted(ours.__all__) == sorted(theirs.__all__)
    for name in ours.__all__:
        obj = getattr(ours, name)
        assert obj.__module__.startswith("complexformer."), f"{name} is not the compat one"
        assert obj.__name__ == name


def test_compat_nn_exports_those_names_and_no_others():
    covered = set()
    for path in MODULES:
        if path.startswith("complextorch.nn."):
            covered |= set(importlib.import_module(path).__all__)
    assert set(cc.nn.__all__) == covered
    assert covered <= set(ct.nn.__all__)
    for name in covered:  # one class per name, whichever path imports it
        modules = [importlib.import_module(_compat_path(p)) for p in MODULES]
        assert {id(getattr(m, name)) for m in modules if name in m.__all__} == {
            id(getattr(cc.nn, name))
        }


def test_compat_models_exports_the_vit_names():
    assert sorted(cc.models.__all__) == sorted(ct.models.vit.__all__)
    assert set(cc.models.__all__) <= set(ct.models.__all__)
    for name in cc.models.__all__:
        assert getattr(cc.models, name) is getattr(cc.models.vit, name)


def test_compat_package_has_complextorch_s_nn_and_models():
    assert {"models", "nn"} <= set(cc.__all__) & set(ct.__all__)
    assert cc.nn.modules.position.RotaryEmbedding is cc.nn.RotaryEmbedding
    assert cc.COMPLEXTORCH_VERSION == "2.1.1"
