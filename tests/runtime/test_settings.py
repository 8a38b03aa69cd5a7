"""The context managers of torch's modes and CPU settings: restored on the way out, also on an
error."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from complexformer.runtime import cpu_settings, eval_mode


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
