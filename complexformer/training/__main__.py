"""``python -m complexformer.training``: train from JSON configs (torchrun-friendly).

Example::

    torchrun --nproc_per_node 2 -m complexformer.training \\
        --model-config model.json --train-config train.json --resume

``--model-config`` is a JSON file of :class:`~complexformer.models.GPTConfig` fields or a
preset name (``tiny``, ``paper``, ``gpt2``); ``--train-config`` a JSON file of
:class:`~complexformer.training.TrainConfig` fields. ``--set key=value`` overrides a
training field (the value is parsed as JSON when it can be). The ``complexformer train``
command of the CLI offers the same with flags.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .._config import parse_overrides
from ..models.config import PRESETS, GPTConfig, preset_config
from .config import TrainConfig
from .loop import train


def main(argv: list[str] | None = None) -> dict:
    """Parse arguments and call :func:`~complexformer.training.train`."""
    ap = argparse.ArgumentParser(prog="python -m complexformer.training", description=__doc__)
    ap.add_argument("--model-config", required=True, help="GPTConfig JSON file or preset name")
    ap.add_argument("--train-config", required=True, help="TrainConfig JSON file")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a TrainConfig field",
    )
    ap.add_argument("--resume", action="store_true", help="continue from the newest checkpoint")
    ap.add_argument("--overwrite", action="store_true", help="delete an existing run first")
    args = ap.parse_args(argv)
    if args.model_config in PRESETS:
        mcfg = preset_config(args.model_config)
    else:
        mcfg = GPTConfig.from_dict(json.loads(Path(args.model_config).read_text()))
    data = json.loads(Path(args.train_config).read_text())
    try:
        data.update(parse_overrides(args.set))
    except ValueError as e:
        ap.error(str(e))
    tcfg = TrainConfig.from_dict(data)
    return train(mcfg, tcfg, resume=args.resume, overwrite=args.overwrite)


if __name__ == "__main__":
    main()
