"""Fixtures shared by every test directory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # makes tests/common_testlib.py importable from every folder
    sys.path.insert(0, str(HERE))

#: test folders of tiny models: one torch thread (OpenMP barriers only cost time when the
#: machine is shared).
ONE_THREAD_DIRS = ("nn", "lora", "evaluation")


@pytest.fixture(autouse=True, scope="module")
def _one_thread(request):
    if Path(str(request.fspath)).parent.name not in ONE_THREAD_DIRS:
        yield
        return
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
