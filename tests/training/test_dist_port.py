"""The loopback port handed to ``MASTER_PORT`` lies below the kernel's ephemeral range (a rank
retrying ``connect`` to a port inside it can connect to itself and wait forever), and is free."""

from __future__ import annotations

import random
import socket
from pathlib import Path

import pytest

from complexformer.training.dist import free_local_port

RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


@pytest.mark.skipif(not RANGE.is_file(), reason="needs Linux's ephemeral port range")
def test_port_is_below_the_ephemeral_range_and_bindable():
    low = int(RANGE.read_text().split()[0])
    rng = random.Random(0)
    for _ in range(50):
        port = free_local_port(rng)
        assert 1024 <= port < low
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free


def test_a_taken_port_is_skipped():
    held = socket.socket()
    held.bind(("127.0.0.1", free_local_port(random.Random(1))))
    try:
        taken = held.getsockname()[1]
        # the same random sequence proposes ``taken`` first; the next free one is returned
        port = free_local_port(random.Random(1))
        assert port != taken
    finally:
        held.close()
