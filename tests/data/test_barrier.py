"""The file barrier of a run's data start: the waiting ranks get the leader's payload, or its
error, or a timeout that says what to do; a launch clears only the launch folders of earlier
launches, never through a link."""

from __future__ import annotations

import threading
import time

import pytest

from complexformer.data.barrier import (
    LeaderFailedError,
    clear_stale,
    publish_failure,
    publish_ready,
    wait_ready,
)


def test_file_barrier_gives_the_payload_or_the_leaders_error(tmp_path):
    (tmp_path / "b" / "launch-1" / "tokenizer").mkdir(parents=True)  # saved there first
    publish_ready(tmp_path / "b" / "launch-1", {"tokenizer": "x", "files": ["ü.bin"]})
    got = wait_ready(tmp_path / "b" / "launch-1", timeout=1)
    assert got == {"tokenizer": "x", "files": ["ü.bin"]}
    (tmp_path / "c").mkdir()  # the folder may exist already
    publish_failure(tmp_path / "c", "ValueError: corpus.jsonl:5: invalid JSON")
    with pytest.raises(LeaderFailedError, match="rank 0 failed .*corpus.jsonl:5: invalid JSON"):
        wait_ready(tmp_path / "c", timeout=1)
    publish_failure(tmp_path / "d" / "launch-2", "")
    with pytest.raises(LeaderFailedError, match=r"^rank 0 failed to prepare the data: $"):
        wait_ready(tmp_path / "d" / "launch-2", timeout=1)


def test_a_failure_file_without_a_message_still_fails_the_waiting_rank(tmp_path):
    (tmp_path / "failed.json").write_text("{}\n")
    with pytest.raises(LeaderFailedError, match=r"^rank 0 failed to prepare the data: $"):
        wait_ready(tmp_path, timeout=1)


def test_a_rank_waits_for_a_payload_published_while_it_waits(tmp_path):
    timer = threading.Timer(0.4, publish_ready, (tmp_path / "late", {"n": 1}))
    timer.start()
    try:
        start = time.monotonic()
        assert wait_ready(tmp_path / "late", timeout=30, poll=0.05) == {"n": 1}
        assert time.monotonic() - start >= 0.35
    finally:
        timer.cancel()


def test_nothing_published_times_out_after_the_wait_with_what_to_do(tmp_path):
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"within 0.3 s \(nothing in .*prepare the corpus first"):
        wait_ready(tmp_path / "a", timeout=0.3, poll=0.05)
    assert time.monotonic() - start >= 0.3


def test_clear_stale_removes_only_the_launch_folders_of_earlier_launches(tmp_path):
    root, outside = tmp_path / "barrier", tmp_path / "outside"
    for name in ("launch-old", "launch-older", "launch-now"):
        (root / name).mkdir(parents=True)
        (root / name / "ready.json").write_text("{}")
    (root / "notes.txt").write_text("mine")
    (root / "launch-file").write_text("not a launch folder")  # left, without an error
    (outside / "launch-x").mkdir(parents=True)
    (outside / "launch-x" / "keep.txt").write_text("theirs")
    (root / "launch-link").symlink_to(outside / "launch-x")
    clear_stale(root, keep="launch-now")
    left = sorted(p.name for p in root.iterdir())
    assert left == ["launch-file", "launch-link", "launch-now", "notes.txt"]
    assert (root / "launch-now" / "ready.json").is_file()
    assert (outside / "launch-x" / "keep.txt").read_text() == "theirs"  # not followed
    clear_stale(tmp_path / "missing", keep="launch-now")  # nothing to clear
    (tmp_path / "linked").symlink_to(outside)  # a barrier folder that is a link
    clear_stale(tmp_path / "linked", keep="launch-now")
    assert (outside / "launch-x" / "keep.txt").is_file()
