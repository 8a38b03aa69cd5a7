"""CPU runs flush denormal floats during training (PCL's backward is ~30x slower with them)
and restore the default afterwards."""

from __future__ import annotations

import torch

from complexformer.lm import train


def test_denormals_flushed_during_the_run_and_restored(model_config, make_train_config, tmp_path):
    seen = []

    def probe(info):
        seen.append(float(torch.tensor(1e-40, dtype=torch.float32) * 1.0))

    cfg = model_config.replace(pos_scheme="cmha", pcl=True)
    train(cfg, make_train_config(tmp_path / "run", max_steps=2), log=None, callback=probe)
    assert seen == [0.0, 0.0]  # flushed inside the run
    assert float(torch.tensor(1e-40, dtype=torch.float32) * 1.0) > 0.0  # restored
