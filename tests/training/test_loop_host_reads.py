"""No device-to-host reads between log intervals: an update's loss, gradient norm and
stop-signal count stay on the device until a metrics row (or a checkpoint) needs them, and
the metrics are those of reading them after every update."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import torch

from complexformer.lm import train
from complexformer.models import GPTConfig
from complexformer.training.loop import Trainer
from tests.training.resilience_testlib import training_rows
from tests.training.training_testlib import REFERENCE_MODEL

READS = ("item", "tolist", "__float__", "__int__", "__bool__", "numpy")
TORCH_OPTIM = str(Path(torch.optim.__file__).parent)


def count_host_reads(monkeypatch) -> Counter:
    """Patch the tensor methods that copy a value to the host; count calls made during
    :meth:`Trainer.train_step`, by the update's step, and calls made by
    :meth:`Trainer.read_steps`.

    ``torch.optim``'s own reads are left out: AdamW keeps its step counter in a CPU tensor
    (also on CUDA, unless ``capturable``), so reading it does not wait for the device.
    """
    counts: Counter = Counter()
    where: list[str] = []

    def wrap(name):
        original = getattr(torch.Tensor, name)

        def reading(self, *args, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if where and not caller.startswith(TORCH_OPTIM):
                counts[where[-1]] += 1
            return original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, reading)

    for name in READS:
        wrap(name)
    for method in ("train_step", "read_steps"):
        original = getattr(Trainer, method)

        def tracked(self, _original=original, _method=method):
            where.append(f"{_method}@{self.step + (_method == 'train_step')}")
            try:
                return _original(self)
            finally:
                where.pop()

        monkeypatch.setattr(Trainer, method, tracked)
    return counts


def test_updates_read_nothing_to_the_host_between_log_intervals(
    make_train_config, monkeypatch, tmp_path
):
    cfg = GPTConfig(**REFERENCE_MODEL)
    short = dict(max_steps=8, eval_every=8, save_every=8)
    train(cfg, make_train_config(tmp_path / "every", log_every=1, **short), log=None)
    # the reference: a row after every update reads every update at once
    every = training_rows(tmp_path / "every")
    counts = count_host_reads(monkeypatch)
    train(cfg, make_train_config(tmp_path / "four", log_every=4, **short), log=None)
    assert not any(k.startswith("train_step") for k in counts), counts
    assert sorted(counts) == ["read_steps@4", "read_steps@8"], counts
    four = training_rows(tmp_path / "four")
    assert sorted(four) == [4, 8]
    for step in (4, 8):
        want = sum(every[s]["train_loss"] for s in range(step - 3, step + 1)) / 4
        assert four[step]["train_loss"] == want
        assert four[step]["grad_norm"] == every[step]["grad_norm"]
        assert four[step]["lr"] == every[step]["lr"]
