"""One rank of a tiny language-model run, for the resilience tests (run by torchrun or by
``launch_ranks``): ``python resilience_worker.py OUT DATA MODE STEP RANK [TRAIN_JSON]``.

On the first attempt (``TORCHELASTIC_RESTART_COUNT`` 0 or unset), rank ``RANK`` does ``MODE``
right after update ``STEP``: ``term`` sends itself SIGTERM, ``kill`` SIGKILL, ``raise`` raises
a ValueError, ``hang`` sleeps for ten minutes; ``none`` does nothing. The run always starts
with ``resume=True``, as a job relaunched by its scheduler would.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from complexformer.lm import train
from complexformer.models import GPTConfig
from complexformer.training import TrainConfig
from tests.training.training_testlib import REFERENCE_MODEL, REFERENCE_TRAIN


def main() -> None:
    out, data, mode, at, who = sys.argv[1:6]
    extra = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
    model = {**REFERENCE_MODEL, **extra.pop("model", {})}
    first = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
    rank = int(os.environ.get("RANK", "0"))

    def callback(info):
        if not (first and rank == int(who) and info["step"] == int(at)):
            return
        if mode == "term":
            os.kill(os.getpid(), signal.SIGTERM)
        elif mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif mode == "raise":
            raise ValueError(f"boom at step {at} on rank {rank}")
        elif mode == "hang":
            time.sleep(600)

    tc = TrainConfig(out_dir=out, data=data, **{**REFERENCE_TRAIN, **extra})
    train(GPTConfig(**model), tc, resume=True, log=print, callback=callback)


if __name__ == "__main__":
    main()
