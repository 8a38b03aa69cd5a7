"""Fixtures shared by every test directory."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

#: test folders of tiny models: one torch thread (OpenMP barriers only cost time when the
#: machine is shared).
ONE_THREAD_DIRS = ("nn", "cmplxbert", "evaluation")
#: test folders that train runs: a private tokenizer/token cache, no torchrun environment.
PRIVATE_CACHE_DIRS = ("training", "lm", "evaluation", "reproduce")


def _folder(request) -> str:
    return Path(str(request.fspath)).parent.name


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory) -> Path:
    """One tokenizer/token cache for the whole session (caches are keyed by content)."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def _private_cache(request, monkeypatch, session_cache):
    """Keep the caches out of ~/.cache and drop a surrounding torchrun's variables."""
    if _folder(request) in PRIVATE_CACHE_DIRS:
        monkeypatch.setenv("COMPLEXFORMER_CACHE", str(session_cache))
        for var in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
            monkeypatch.delenv(var, raising=False)


@pytest.fixture(autouse=True, scope="module")
def _one_thread(request):
    if _folder(request) not in ONE_THREAD_DIRS:
        yield
        return
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# ------------------------------------------------------------------- long tests start first
#: Fast tests of over a minute on two cores (``pytest --durations``): started first, so that
#: under pytest-xdist (``make test``) the other worker runs the rest beside them instead of
#: waiting for them at the end.
LONG_TESTS = (
    "tests/lab/cmplxbert/test_finetune_comparison.py::"
    "test_cmplxbert_on_minilm_beats_the_majority_class",
)


def pytest_collection_modifyitems(config, items):
    """Move :data:`LONG_TESTS` to the front; the rest keep their order."""
    items.sort(key=lambda item: item.nodeid not in LONG_TESTS)


# ---------------------------------------------------------------- the README's test count
#: benchmarks.install's record, whose count of fast tests the README shows.
INSTALL_RECORD = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "install.json"
_STALE_COUNT = pytest.StashKey[str]()
#: Set by benchmarks.install for the clone's ``.ci/run``: it is recording the count, which the
#: commit it measures may not have yet.
RECORDING = "COMPLEXFORMER_RECORDING_TEST_COUNT"


def _whole_suite(config) -> bool:
    """Whether this session runs the default selection: every test folder, no -k, no paths."""
    args = [a for a in config.args if not a.startswith("-")]
    return (
        args in ([], [str(Path(config.rootpath) / "tests")], ["tests"])
        and not config.getoption("keyword")
        and config.getoption("markexpr") == "not slow"
        and not config.getoption("deselect")
    )


def _check_test_count(config, collected: int) -> None:
    """Fail the session when the README's count of fast tests is not the suite's."""
    if os.environ.get(RECORDING) or not _whole_suite(config) or not INSTALL_RECORD.is_file():
        return
    recorded = json.loads(INSTALL_RECORD.read_text(encoding="utf-8"))["ratios"].get("fast_tests")
    if recorded is not None and recorded != collected:
        config.stash[_STALE_COUNT] = (
            f"the README shows {recorded} fast tests (benchmarks/results/install.json) but the "
            f"suite collects {collected}: run `python -m benchmarks.install` and "
            "`make bench-docs`, or correct ratios.fast_tests there"
        )


def pytest_collection_finish(session):
    """The count, in one process (a pytest-xdist worker leaves it to the controller)."""
    if not hasattr(session.config, "workerinput"):
        _check_test_count(session.config, len(session.items))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """The count, in the controller of pytest-xdist's worker processes (``make test``)."""
    _check_test_count(node.config, len(ids))


def pytest_sessionfinish(session, exitstatus):
    """A stale count fails a session that passed."""
    if session.config.stash.get(_STALE_COUNT, None) is not None and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Say why, at the end of the report (after the warnings, before the final line)."""
    message = config.stash.get(_STALE_COUNT, None)
    if message is not None:
        terminalreporter.write_line(f"FAILED stale README: {message}", red=True)
