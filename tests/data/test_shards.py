"""The shard view and writer: a split stored as several token files reads as one flat array
(every kind of index, the dtype kept, bounds refused by name, a slice read without the whole
stream), and the writer cuts the stream at exactly ``shard_tokens``."""

from __future__ import annotations

import numpy as np
import pytest

from complexformer.data.shards import ShardedTokens, ShardWriter, open_shards

DTYPE = np.dtype("<u2")


def _write(folder, flat: np.ndarray, size: int, cuts=(7, 450, 451, 999)) -> list:
    folder.mkdir(exist_ok=True)
    w = ShardWriter(folder, "train", DTYPE, size)
    for piece in np.split(flat, list(cuts)):
        w.write(piece)
    return [folder / name for name, _ in w.close()]


@pytest.fixture
def flat_and_view(tmp_path):
    flat = np.random.default_rng(0).integers(0, 60000, 1000).astype(DTYPE)
    paths = _write(tmp_path, flat, 300)
    return flat, ShardedTokens([np.memmap(p, dtype=DTYPE, mode="r") for p in paths])


def test_sharded_tokens_index_like_the_flat_array(flat_and_view):
    flat, view = flat_and_view
    assert (len(view), view.shape, view.size, view.ndim, view.dtype) == (
        1000,
        (1000,),
        1000,
        1,
        DTYPE,
    )
    idx = np.random.default_rng(1).integers(-1000, 1000, (7, 33))
    got = view[idx]
    assert got.dtype == DTYPE and got.shape == (7, 33)
    np.testing.assert_array_equal(got, flat[idx])
    edges = np.array([0, 299, 300, 599, 600, 999, -1, -300, -1000])  # shard starts and ends
    np.testing.assert_array_equal(view[edges], flat[edges])
    np.testing.assert_array_equal(view[[5, -5]], flat[[5, -5]])  # a list is an index array
    for key in (slice(295, 610), slice(None), slice(-10, None), slice(600, 300), slice(3, 990, 7)):
        np.testing.assert_array_equal(view[key], flat[key])
        assert view[key].dtype == DTYPE
    np.testing.assert_array_equal(view[::-3], flat[::-3])
    for i in (0, 299, 300, 999, -1, -1000):
        assert type(view[i]) is np.uint16 and view[i] == flat[i]


def test_an_index_out_of_range_is_refused_with_the_length(flat_and_view):
    _, view = flat_and_view
    for i in (1000, -1001):
        with pytest.raises(IndexError, match=f"index {i} out of range for 1000 tokens"):
            view[i]
    for bad in ([1000], [-1001], [0, 5, 1000], [[-1001, 0]]):
        with pytest.raises(IndexError, match="token index out of range for 1000 tokens"):
            view[np.array(bad)]
    assert view[np.array([], dtype=np.int64)].shape == (0,)


def test_a_step_one_slice_reads_only_the_tokens_it_asks_for(flat_and_view, monkeypatch):
    flat, view = flat_and_view

    def whole(*args, **kwargs):
        raise AssertionError("the whole stream was read")

    monkeypatch.setattr(ShardedTokens, "__array__", whole)
    np.testing.assert_array_equal(view[100:900], flat[100:900])
    with pytest.raises(AssertionError, match="whole stream"):  # other steps do read it
        view[::2]


def test_as_an_array_the_view_is_the_stream(flat_and_view):
    flat, view = flat_and_view
    whole = np.asarray(view)
    assert whole.dtype == DTYPE
    np.testing.assert_array_equal(whole, flat)
    wide = np.asarray(view, dtype=np.int64)
    assert wide.dtype == np.int64
    np.testing.assert_array_equal(wide, flat.astype(np.int64))


def test_open_shards_maps_one_file_directly_and_several_as_one_view(tmp_path):
    flat = np.arange(650, dtype=DTYPE)
    one = open_shards(_write(tmp_path / "a", flat, 1000, cuts=()), DTYPE)
    assert isinstance(one, np.memmap)
    np.testing.assert_array_equal(one, flat)
    two = open_shards(_write(tmp_path / "b", flat, 600, cuts=()), DTYPE)
    assert isinstance(two, ShardedTokens) and len(two.shards) == 2
    np.testing.assert_array_equal(np.asarray(two), flat)
    with pytest.raises(ValueError, match="^ShardedTokens needs at least one shard$"):
        ShardedTokens([])
    alone = ShardedTokens([np.asarray(one)])  # one shard is a view too
    assert alone.dtype == DTYPE and len(alone) == 650 and alone[649] == 649


def test_the_writer_cuts_the_stream_at_exactly_shard_tokens(tmp_path):
    (tmp_path / "w").mkdir()
    (tmp_path / "a").mkdir()
    flat = np.arange(1000, dtype=np.int64)  # converted to the writer's dtype
    w = ShardWriter(tmp_path / "w", "val", DTYPE, 300)
    for piece in np.split(flat, [7, 450, 451, 900, 900]):
        w.write(piece)
    shards = w.close()
    assert shards == [("val-00000.bin", 300), ("val-00001.bin", 300), ("val-00002.bin", 300),
                      ("val-00003.bin", 100)]  # fmt: skip
    for k, (name, n) in enumerate(shards):
        data = np.fromfile(tmp_path / "w" / name, dtype=DTYPE)
        np.testing.assert_array_equal(data, flat[300 * k : 300 * k + n])
    # a stream that ends on a shard boundary opens no empty shard after it
    exact = ShardWriter(tmp_path / "a", "x", DTYPE, 250)
    exact.write(np.arange(500))
    assert exact.close() == [("x-00000.bin", 250), ("x-00001.bin", 250)]
    assert exact.close() == [("x-00000.bin", 250), ("x-00001.bin", 250)]  # closing again
    single = ShardWriter(tmp_path / "a", "one", DTYPE, 1)  # the smallest shard
    single.write(np.array([4, 5, 6]))
    assert [n for _, n in single.close()] == [1, 1, 1]


def test_an_empty_stream_gets_one_empty_shard_and_bad_sizes_are_refused(tmp_path):
    (tmp_path / "w").mkdir()
    w = ShardWriter(tmp_path / "w", "test", DTYPE, 10)
    w.write(np.zeros(0, dtype=DTYPE))
    assert w.close() == [("test-00000.bin", 0)]
    assert (tmp_path / "w" / "test-00000.bin").stat().st_size == 0
    for bad in (0, -3, 2.5):
        with pytest.raises(ValueError, match=f"shard_tokens must be a positive integer, got {bad}"):
            ShardWriter(tmp_path, "t", DTYPE, bad)
    again = ShardWriter(tmp_path / "w", "test", DTYPE, 10)  # never overwrites a shard
    with pytest.raises(FileExistsError):
        again.write(np.arange(3))
