"""Meta-device initialisation (``complexformer.training.meta_init``): the replayed construction
gives every parameter and buffer the value of an ordinary CPU construction with the same seed,
bit for bit, leaves the random generator where that construction leaves it, hands each rank
the chunk ``fully_shard`` gives it, keeps at most a fraction of the model alive at once, and,
under two gloo ranks, a sharded model filled from it holds the CPU-built model's weights."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as tdist
from torch import nn

from complexformer.attention import SCHEMES
from complexformer.models import ComplexFormerLM, preset_config
from complexformer.training.meta_init import build_on_meta, rank_chunk
from tests.training.test_loop_ddp import launch

WORKER = Path(__file__).with_name("meta_init_worker.py")


def _cpu_and_meta(build, seed=3):
    torch.manual_seed(seed)
    cpu = build()
    after_cpu = torch.get_rng_state()
    torch.manual_seed(seed)
    built = build_on_meta(build)
    return cpu, built, after_cpu


def _config(scheme: str, **extra):
    return preset_config("tiny", vocab_size=97, pos_scheme=scheme, n_layer=2, **extra)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_replay_gives_the_cpu_construction_bit_for_bit(scheme):
    cpu, built, after_cpu = _cpu_and_meta(lambda: ComplexFormerLM(_config(scheme)))
    assert all(p.device.type == "meta" for p in built.model.parameters())
    shards, buffers = built.materialize(rank=0, world_size=1)
    # the generator is consumed exactly as the CPU construction consumed it
    assert torch.equal(torch.get_rng_state(), after_cpu)
    params = dict(cpu.named_parameters(remove_duplicate=False))
    assert sorted(shards) == sorted(params)
    for name, p in params.items():
        assert torch.equal(shards[name], p.detach()), name
    for name, b in cpu.named_buffers():
        assert torch.equal(buffers[name], b), name


@pytest.mark.parametrize("world_size", [2, 3, 5])
def test_each_rank_gets_its_fully_shard_chunk(world_size):
    build = lambda: ComplexFormerLM(_config("cmha", tie_embeddings=True))  # noqa: E731
    cpu, built, _ = _cpu_and_meta(build)
    params = dict(cpu.named_parameters(remove_duplicate=False))
    for rank in range(world_size):
        torch.manual_seed(3)
        shards, _ = built.materialize(rank, world_size)
        for name, p in params.items():
            chunks = torch.chunk(p.detach(), world_size, dim=0) if p.dim() else (p.detach(),)
            want = chunks[rank] if rank < len(chunks) else p.detach()[:0]
            assert torch.equal(shards[name], want), (name, rank)
            torch.testing.assert_close(rank_chunk(p.detach(), rank, world_size), want)
    # tied parameters: both names hold the embedding's chunk
    torch.manual_seed(3)
    shards, _ = built.materialize(1, world_size)
    assert torch.equal(shards["lm_head.weight"], shards["wte.weight"])


class _Reads(nn.Module):
    """A constructor that reads a drawn tensor to make a parameter, overwrites a parameter
    after a partial write, and draws into a view: cases the replay may not skip."""

    def __init__(self) -> None:
        super().__init__()
        base = torch.randn(6, 4)
        self.gram = nn.Parameter(base @ base.T)  # depends on a tensor that is not kept
        self.lin = nn.Linear(4, 5)
        self.lin.weight.data[0].fill_(2.0)  # partial write, then a full redraw
        nn.init.normal_(self.lin.weight)
        self.part = nn.Parameter(torch.zeros(3, 8))
        nn.init.uniform_(self.part[1:])  # a draw into a view
        self.register_buffer("scale", self.gram.detach().diagonal().clone())


def test_replay_keeps_reads_views_and_partial_writes_exact():
    cpu, built, after_cpu = _cpu_and_meta(_Reads)
    shards, buffers = built.materialize(0, 1)
    assert torch.equal(torch.get_rng_state(), after_cpu)
    for name, p in cpu.named_parameters():
        assert torch.equal(shards[name], p.detach()), name
    assert torch.equal(buffers["scale"], cpu.scale)


def test_replay_keeps_a_fraction_of_the_model_alive():
    cfg = preset_config("tiny", vocab_size=2048, n_layer=6)
    _, built, _ = _cpu_and_meta(lambda: ComplexFormerLM(cfg))
    shards, _ = built.materialize(0, 4)
    stats = built.last_replay
    total = sum(p.numel() * p.element_size() for p in built.model.parameters())
    largest = max(p.numel() * p.element_size() for p in built.model.parameters())
    print(f"peak live {stats['peak_bytes']:,} B of a {total:,} B model (largest {largest:,})")
    # at most the two largest tensors at once (one kept, one drawn to advance the generator)
    assert stats["peak_bytes"] <= 2 * largest + 64 * 1024
    assert stats["peak_bytes"] < total / 3
    kept = sum(t.numel() * t.element_size() for t in shards.values())
    assert kept < total / 3  # a quarter of each parameter's first dimension, rounded up


@pytest.mark.skipif(not tdist.is_available() or not tdist.is_gloo_available(), reason="needs gloo")
def test_sharded_model_from_meta_holds_the_cpu_weights_under_two_ranks(tmp_path):
    out = tmp_path / "result.json"
    outputs = launch(2, [sys.executable, str(WORKER), str(out)], timeout=180)
    result = json.loads(out.read_text())
    assert result["equal"] == result["names"], outputs[0][-2000:]
    assert result["n_names"] > 10
    # each rank materialised about half of the parameters
    assert 0.4 < result["local_fraction"] < 0.6
