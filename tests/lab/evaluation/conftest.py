"""The evaluation tests' tiny corpus and tiny trained runs, for the lab's heads suite."""

from tests.evaluation.conftest import eval_corpus_spec, make_tiny_run, tiny_run  # noqa: F401
