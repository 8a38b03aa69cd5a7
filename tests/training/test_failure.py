"""PeerFailures on one shared key-value store, two ranks in one process: the first real failure
is what every rank reports, whichever rank reaches the store first."""

from __future__ import annotations

import pytest

from complexformer.data.barrier import LeaderFailedError
from complexformer.training import DistInfo
from complexformer.training import failure as failure_module
from complexformer.training.failure import PeerFailedError, PeerFailures


class _Store:
    """The part of torch's key-value store that PeerFailures uses."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.counters: dict[str, int] = {}

    def check(self, keys):
        return all(k in self.data for k in keys)

    def get(self, key):
        return self.data[key]

    def compare_set(self, key, expected, desired):
        if key not in self.data:
            self.data[key] = desired.encode()
        return self.data[key]

    def add(self, key, n):
        self.counters[key] = self.counters.get(key, 0) + n
        return self.counters[key]


def _ranks(monkeypatch) -> tuple[PeerFailures, PeerFailures, _Store]:
    store = _Store()
    monkeypatch.setattr(failure_module, "ACK_WAIT_S", 30.0)  # a missing read would show
    ranks = []
    for rank in (0, 1):
        peers = PeerFailures(DistInfo(rank=rank, world_size=2))
        peers.active, peers.store = True, store  # as under an initialised process group
        ranks.append(peers)
    return ranks[0], ranks[1], store


def _leave(peers: PeerFailures, error: BaseException) -> BaseException:
    with pytest.raises(BaseException) as raised:
        with peers:
            raise error
    return raised.value


def test_a_rank_that_read_rank0_s_failure_first_does_not_publish_it_as_its_own(monkeypatch):
    rank0, rank1, store = _ranks(monkeypatch)
    leader = LeaderFailedError("rank 0 failed to prepare the data: ValueError: bad line 7")
    assert _leave(rank1, leader) is leader  # rank 1 ends with rank 0's message, unchanged
    assert store.data == {}  # nothing published in rank 0's name
    own = ValueError("corpus.jsonl:7: invalid JSON")
    assert _leave(rank0, own) is own  # not a PeerFailedError naming rank 1
    assert (
        store.data[rank0.key].decode() == "rank 0 failed: ValueError: corpus.jsonl:7: invalid JSON"
    )
    assert store.counters[rank0.ack_key] == 1  # read already: rank 0 did not wait


def test_a_rank_s_failure_is_published_and_the_other_rank_reports_it(monkeypatch):
    rank0, rank1, store = _ranks(monkeypatch)
    store.add(rank0.ack_key, 1)  # rank 1's watcher has read it
    own = ValueError("out of memory")
    assert _leave(rank0, own) is own
    other = _leave(rank1, RuntimeError("connection reset"))
    assert isinstance(other, PeerFailedError)
    assert str(other) == "rank 0 failed: ValueError: out of memory; rank 1 stops too"
