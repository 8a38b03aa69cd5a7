"""Shared fixtures of the training tests: a tiny JSONL corpus and tiny configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from complexformer.models import GPTConfig
from complexformer.training import TrainConfig
from tests.training.training_testlib import REFERENCE_MODEL, REFERENCE_TRAIN, write_corpus


@pytest.fixture(scope="session")
def corpus_spec(tmp_path_factory) -> str:
    return write_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture()
def model_config() -> GPTConfig:
    return GPTConfig(**REFERENCE_MODEL)


@pytest.fixture()
def make_train_config(corpus_spec, tmp_path):
    def make(out: str | Path | None = None, **kw) -> TrainConfig:
        base = {**REFERENCE_TRAIN, "out_dir": str(out or tmp_path / "run"), "data": corpus_spec}
        return TrainConfig(**{**base, **kw})

    return make


@pytest.fixture(scope="session")
def reference(tmp_path_factory, corpus_spec, session_cache):
    """One uninterrupted single-process 12-step run, shared by the comparison tests.

    Returns:
        ``(run_dir, summary)``.
    """
    from complexformer.lm import train

    mp = pytest.MonkeyPatch()
    mp.setenv("COMPLEXFORMER_CACHE", str(session_cache))
    try:
        out = tmp_path_factory.mktemp("reference") / "run"
        tcfg = TrainConfig(out_dir=str(out), data=corpus_spec, **REFERENCE_TRAIN)
        summary = train(GPTConfig(**REFERENCE_MODEL), tcfg, log=None)
    finally:
        mp.undo()
    return out, summary
