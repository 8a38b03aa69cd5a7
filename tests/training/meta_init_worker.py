"""A rank of ``test_meta_init``: builds the LM on meta, shards it over the gloo group,
fills each rank's shard from the replay, gathers the full state and compares it on rank 0
with the model built on the CPU from the same seed; writes the result to ``argv[1]``."""

from __future__ import annotations

import json
import sys

import torch
import torch.distributed as tdist

from complexformer.models import ComplexFormerLM, preset_config
from complexformer.training.meta_init import build_on_meta
from complexformer.training.shard import full_model_state, shard_model, transformer_blocks


def main(out: str) -> None:
    tdist.init_process_group("gloo")
    rank, world = tdist.get_rank(), tdist.get_world_size()
    cfg = preset_config("tiny", vocab_size=101, n_layer=2, tie_embeddings=True)
    torch.manual_seed(11)
    built = build_on_meta(lambda: ComplexFormerLM(cfg))
    model = built.model
    shard_model(model, transformer_blocks(model), torch.device("cpu"), world)
    built.fill_sharded(rank, world, torch.device("cpu"))
    local = sum(p.to_local().numel() for p in model.parameters())
    total = sum(p.numel() for p in model.parameters())
    state = full_model_state(model)
    if rank == 0:
        torch.manual_seed(11)
        want = ComplexFormerLM(cfg).state_dict()
        names = sorted(want)
        equal = [n for n in names if n in state and torch.equal(state[n], want[n])]
        with open(out, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "names": names,
                    "equal": equal,
                    "n_names": len(names),
                    "local_fraction": local / total,
                },
                f,
            )
    tdist.barrier()
    tdist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
