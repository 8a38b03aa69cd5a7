"""Block samplers: determinism, DDP sharding, resumption, and evaluation coverage."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from complexformer.data import BlockSampler, EvalBlocks, inputs_targets
from complexformer.data.blocks import gather_blocks

T = 16


@pytest.fixture()
def tokens() -> np.ndarray:
    return np.arange(5000, dtype=np.uint16)  # token i == i: blocks are easy to check


def test_same_seed_and_step_same_batch(tokens):
    a = BlockSampler(tokens, T, 8, seed=3)
    b = BlockSampler(tokens.copy(), T, 8, seed=3)
    x = a.batch(5)
    assert x.dtype == torch.int64 and x.shape == (8, T + 1)
    assert torch.equal(x, b.batch(5))
    assert torch.equal(x, a.batch(5))  # pure function of (seed, step)
    assert not torch.equal(x, a.batch(6))
    assert not torch.equal(x, BlockSampler(tokens, T, 8, seed=4).batch(5))
    # every row is a contiguous slice of the token array
    starts = x[:, 0]
    assert torch.equal(x, starts[:, None] + torch.arange(T + 1))
    assert int(starts.max()) <= len(tokens) - T - 1
    inputs, targets = inputs_targets(x)
    assert inputs.shape == targets.shape == (8, T)
    assert torch.equal(inputs[:, 1:], targets[:, :-1])


def test_ranks_split_the_global_batch(tokens):
    single = BlockSampler(tokens, T, 6, seed=1)
    ranks = [BlockSampler(tokens, T, 3, seed=1, rank=r, world_size=2) for r in range(2)]
    for step in (0, 1, 17):
        shards = [r.batch(step) for r in ranks]
        assert torch.equal(torch.cat(shards), single.batch(step))
        assert not torch.equal(shards[0], shards[1])
    four = [BlockSampler(tokens, T, 2, seed=1, rank=r, world_size=3) for r in range(3)]
    assert torch.equal(torch.cat([r.batch(2) for r in four]), single.batch(2))


def test_iteration_and_exact_resume(tokens):
    sampler = BlockSampler(tokens, T, 4, seed=7)
    seen = [next(sampler) for _ in range(3)]
    assert [torch.equal(s, sampler.batch(i)) for i, s in enumerate(seen)] == [True] * 3
    state = sampler.state_dict()
    assert state["step"] == 3
    expected = [next(sampler) for _ in range(2)]

    resumed = BlockSampler(tokens, T, 4, seed=0)
    resumed.load_state_dict(state)
    assert resumed.seed == 7
    assert all(torch.equal(next(resumed), e) for e in expected)
    # a different world size with the same global batch resumes the same stream
    half = BlockSampler(tokens, T, 2, rank=1, world_size=2)
    half.load_state_dict(state)
    assert torch.equal(next(half), expected[0][2:])
    with pytest.raises(ValueError, match="global_batch_size"):
        BlockSampler(tokens, T, 5).load_state_dict(state)
    with pytest.raises(ValueError, match="block_size"):
        BlockSampler(tokens, T + 1, 4).load_state_dict(state)


def test_sampler_rejects_bad_arguments(tokens):
    with pytest.raises(ValueError, match=r"at least block_size \+ 1 = 17 tokens"):
        BlockSampler(tokens[:16], T, 2)
    assert BlockSampler(tokens[:17], T, 2).batch(0)[:, 0].tolist() == [0, 0]
    with pytest.raises(ValueError, match="rank"):
        BlockSampler(tokens, T, 2, rank=2, world_size=2)
    with pytest.raises(ValueError, match="batch_size"):
        BlockSampler(tokens, T, 0)
    with pytest.raises(ValueError, match="seed"):
        BlockSampler(tokens, T, 2, seed=-1)


def test_eval_blocks_cover_split_consecutively(tokens):
    n = len(tokens)
    ev = EvalBlocks(tokens, T, batch_size=7)
    assert ev.n_blocks == (n - 1) // T
    batches = list(ev)
    assert len(batches) == len(ev)
    blocks = torch.cat(batches)
    assert blocks.shape == (ev.n_blocks, T + 1) and blocks.dtype == torch.int64
    x, y = inputs_targets(blocks)
    covered = ev.n_blocks * T
    assert torch.equal(x.reshape(-1), torch.arange(covered))  # consecutive, non-overlapping
    assert torch.equal(y.reshape(-1), torch.arange(1, covered + 1))  # each target once
    assert ev.n_targets == covered
    assert all(torch.equal(a, b) for a, b in zip(batches, list(ev), strict=True))

    capped = EvalBlocks(tokens, T, batch_size=4, max_blocks=10)
    assert capped.n_blocks == 10 and torch.equal(torch.cat(list(capped)), blocks[:10])

    shards = [EvalBlocks(tokens, T, 5, world_size=3, rank=r) for r in range(3)]
    assert sum(s.n_rank_blocks for s in shards) == ev.n_blocks
    union = torch.cat([torch.cat(list(s)) for s in shards])
    assert sorted(union[:, 0].tolist()) == blocks[:, 0].tolist()

    assert len(EvalBlocks(tokens[:T], T, 4)) == 0  # too short for one block
    assert list(EvalBlocks(np.zeros(0, np.uint16), T, 4)) == []


def test_sizes_of_one_are_valid_and_non_integers_are_refused(tokens):
    one = BlockSampler(tokens, 1, 1, seed=0)
    x = one.batch(0)
    assert x.shape == (1, 2) and int(x[0, 1]) == int(x[0, 0]) + 1
    ev = EvalBlocks(tokens[:5], 1, 1)
    assert ev.n_blocks == 4 and len(ev) == 4
    assert torch.cat(list(ev)).tolist() == [[0, 1], [1, 2], [2, 3], [3, 4]]
    for name, kw in (("block_size", {"block_size": 2.5}), ("batch_size", {"batch_size": 1.5})):
        args = {"block_size": T, "batch_size": 2, **kw}
        with pytest.raises(ValueError, match=f"^{name} must be a positive integer, got "):
            BlockSampler(tokens, args["block_size"], args["batch_size"])
        with pytest.raises(ValueError, match=f"^{name} must be a positive integer, got "):
            EvalBlocks(tokens, args["block_size"], args["batch_size"])
    with pytest.raises(ValueError, match=r"^block_size must be a positive integer, got 0$"):
        BlockSampler(tokens, 0, 2)
    with pytest.raises(ValueError, match=r"^world_size must be a positive integer, got 0$"):
        BlockSampler(tokens, T, 2, world_size=0)
    for rank in (-1, 0.5, 3):
        with pytest.raises(ValueError, match=rf"^rank must be in \[0, 3\), got {rank!r}$"):
            BlockSampler(tokens, T, 2, rank=rank, world_size=3)
    with pytest.raises(ValueError, match=r"^seed must be a non-negative integer, got 1.5$"):
        BlockSampler(tokens, T, 2, seed=1.5)
    with pytest.raises(ValueError, match="^step must be non-negative, got -1$"):
        BlockSampler(tokens, T, 2, step=-1)
    with pytest.raises(ValueError, match="^step must be non-negative, got -1$"):
        BlockSampler(tokens, T, 2).global_offsets(-1)
    # integral floats are accepted and stored as ints
    s = BlockSampler(tokens, 16.0, 2.0, seed=3.0, rank=1.0, world_size=2.0, step=4.0)
    assert (s.block_size, s.batch_size, s.seed, s.rank, s.world_size, s.step) == (16, 2, 3, 1, 2, 4)
    assert all(type(v) is int for v in (s.block_size, s.batch_size, s.seed, s.rank, s.step))


def test_sampler_starts_at_its_step_and_checks_the_token_count(tokens):
    s = BlockSampler(tokens, T, 3, seed=2, step=5)
    assert torch.equal(next(s), s.batch(5)) and s.step == 6
    assert (
        repr(s)
        == "BlockSampler(n_tokens=5000, block_size=16, batch_size=3, seed=2, rank=0/1, step=6)"
    )
    state = s.state_dict()
    assert state == {
        "step": 6,
        "seed": 2,
        "block_size": T,
        "global_batch_size": 3,
        "n_tokens": 5000,
    }
    with pytest.raises(
        ValueError, match="^sampler state has n_tokens=5000 but this sampler has 4999; "
    ):
        BlockSampler(tokens[:-1], T, 3).load_state_dict(state)
    other = BlockSampler(tokens, T, 3, seed=9)
    other.load_state_dict({"step": 2})  # an old state without the seed keeps this seed
    assert other.seed == 9 and other.step == 2


def test_eval_blocks_max_blocks_bounds(tokens):
    assert EvalBlocks(tokens, T, 4, max_blocks=0).n_blocks == 0
    assert list(EvalBlocks(tokens, T, 4, max_blocks=0)) == []
    assert EvalBlocks(tokens, T, 4, max_blocks=10**6).n_blocks == (len(tokens) - 1) // T
    with pytest.raises(ValueError, match="^max_blocks must be non-negative or None, got -1$"):
        EvalBlocks(tokens, T, 4, max_blocks=-1)
    shard = EvalBlocks(tokens, T, 2, max_blocks=7, rank=2, world_size=3)
    assert shard.n_rank_blocks == 2 and shard.n_targets == 2 * T and len(shard) == 1
    assert torch.cat(list(shard))[:, 0].tolist() == [2 * T, 5 * T]


def test_default_seed_is_zero_and_unsigned_starts_are_gathered(tokens):
    assert BlockSampler(tokens, T, 2).seed == 0
    assert torch.equal(
        BlockSampler(tokens, T, 2).batch(3), BlockSampler(tokens, T, 2, seed=0).batch(3)
    )
    # offsets from an unsigned array (uint64 + int64 would be float64 in numpy: no index)
    got = gather_blocks(tokens, np.array([2, 40], dtype=np.uint64), 3)
    assert got.dtype == torch.int64 and got.tolist() == [[2, 3, 4], [40, 41, 42]]
