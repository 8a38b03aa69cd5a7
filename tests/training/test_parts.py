"""Loading a model state without the aliases of tied weights: strict, but for a parameter
loaded under another name; a missing or unexpected key is named."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from complexformer.training.parts import load_model_state


class _Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(5, 3)
        self.head = nn.Linear(3, 5, bias=False)
        self.head.weight = self.embed.weight  # one tensor, two names
        self.register_buffer("scale", torch.ones(3))


def test_a_tied_weight_loads_under_one_of_its_names():
    src, dst = _Tied(), _Tied()
    torch.nn.init.normal_(src.embed.weight)
    src.scale.fill_(2.0)
    state = {k: v for k, v in src.state_dict().items() if k != "head.weight"}  # alias left out
    load_model_state(dst, state)
    torch.testing.assert_close(dst.head.weight, src.embed.weight, rtol=0, atol=0)
    torch.testing.assert_close(dst.scale, src.scale, rtol=0, atol=0)


def test_a_missing_or_unexpected_key_is_named():
    state = _Tied().state_dict()
    del state["head.weight"]
    with pytest.raises(RuntimeError, match=r"missing keys \['scale'\], unexpected keys \[\]"):
        load_model_state(_Tied(), {k: v for k, v in state.items() if k != "scale"})
    with pytest.raises(RuntimeError, match=r"missing keys \['embed.weight', 'head.weight'\]"):
        load_model_state(_Tied(), {"scale": state["scale"]})  # no name of the tied weight
    with pytest.raises(RuntimeError, match=r"missing keys \[\], unexpected keys \['extra'\]"):
        load_model_state(_Tied(), {**state, "extra": torch.zeros(1)})
