"""Shared fixtures of the evaluation tests: a tiny corpus and tiny trained runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.evaluation.evaluation_testlib import TINY_MODEL, TINY_TRAIN, write_corpus


@pytest.fixture(scope="session")
def eval_corpus_spec(tmp_path_factory) -> str:
    """``text:`` spec of a tiny JSONL corpus (train/val/test splits come from hashing)."""
    return write_corpus(tmp_path_factory.mktemp("eval_corpus"))


@pytest.fixture(scope="session")
def make_tiny_run(tmp_path_factory, eval_corpus_spec, session_cache):
    """``make_tiny_run(pos_scheme="cmha", **model_overrides) -> run_dir``: trains (once per
    distinct argument set, 20 steps, ~2 s) a tiny model on the tiny corpus."""
    from complexformer.lm import train
    from complexformer.models import GPTConfig
    from complexformer.training import TrainConfig

    made: dict[tuple, Path] = {}

    def make(pos_scheme: str = "cmha", **overrides) -> Path:
        key = (pos_scheme, tuple(sorted(overrides.items())))
        if key not in made:
            mp = pytest.MonkeyPatch()
            mp.setenv("COMPLEXFORMER_CACHE", str(session_cache))
            try:
                out = tmp_path_factory.mktemp(f"run_{pos_scheme}") / "run"
                mcfg = GPTConfig(**{**TINY_MODEL, "pos_scheme": pos_scheme, **overrides})
                tcfg = TrainConfig(out_dir=str(out), data=eval_corpus_spec, **TINY_TRAIN)
                train(mcfg, tcfg, log=None)
            finally:
                mp.undo()
            made[key] = out
        return made[key]

    return make


@pytest.fixture(scope="session")
def tiny_run(make_tiny_run) -> Path:
    """Run directory of a tiny trained CMHA model (load it with ``load_run``)."""
    return make_tiny_run("cmha")
