"""Fixtures of the transformers tests: one tokenizer and one export per scheme."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tokenizer():
    from tests.hf.hf_testlib import tiny_tokenizer

    return tiny_tokenizer()


@pytest.fixture(scope="session")
def exported(tmp_path_factory, tokenizer):
    """``exported(pos_scheme, **overrides) -> (ComplexFormerLM, export directory)``, made once
    per distinct arguments."""
    from complexformer.hf.export import save_hf
    from tests.hf.hf_testlib import tiny_lm

    made = {}

    def make(pos_scheme: str = "cmha", **overrides):
        key = (pos_scheme, tuple(sorted(overrides.items())))
        if key not in made:
            lm = tiny_lm(tokenizer, pos_scheme, **overrides)
            out = save_hf(lm, tokenizer, tmp_path_factory.mktemp(f"hf_{pos_scheme}") / "export")
            made[key] = (lm, out)
        return made[key]

    return make
