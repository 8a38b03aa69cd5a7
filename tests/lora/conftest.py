"""Fixtures of the complex LoRA / CmplxBERT tests: one thread (tiny shapes, shared CPU)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
