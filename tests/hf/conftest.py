"""Fixtures of the transformers tests: one tokenizer and one export per scheme."""

from __future__ import annotations

import pytest

from complexformer.hf import register_auto_classes


@pytest.fixture(scope="session", autouse=True)
def auto_classes():
    """The tests load exports with ``AutoModelForCausalLM.from_pretrained(DIR)`` (and
    ``pipeline``) without ``trust_remote_code``: the explicit registration, once."""
    try:
        register_auto_classes()
    except ImportError:  # without transformers the tests that need it skip themselves
        pass


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
