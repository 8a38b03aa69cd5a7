"""Fixtures shared by every test directory."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

#: test folders of tiny models: one torch thread (OpenMP barriers only cost time when the
#: machine is shared).
ONE_THREAD_DIRS = ("nn", "cmplxbert", "evaluation")
#: test folders that train runs: a private tokenizer/token cache, no torchrun environment.
PRIVATE_CACHE_DIRS = ("training", "evaluation", "reproduce")


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
