"""Fixtures of the language model's tests: those of the training tests (the language model
trains on the shared loop), the tiny corpus, configs and the reference run."""

from __future__ import annotations

from tests.training.conftest import (  # noqa: F401  (fixtures)
    corpus_spec,
    make_train_config,
    model_config,
    reference,
)
