"""Smoke test of examples/vit_digits.py (needs scikit-learn, the `examples` extra)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vit_digits.py"


def test_nn_vit_digits_example_runs():
    pytest.importorskip("sklearn")
    spec = importlib.util.spec_from_file_location("vit_digits_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    n = torch.get_num_threads()
    try:
        acc = mod.main(["--epochs", "2", "--threads", "1"])
    finally:
        torch.set_num_threads(n)
    assert 0.2 < acc <= 1.0  # 10 classes: well above chance after two epochs
