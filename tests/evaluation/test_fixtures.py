"""The shared tiny run loads and has a tokenizer (the other evaluation tests build on it)."""

from complexformer.lm import load_run


def test_tiny_run_loads(tiny_run):
    run = load_run(tiny_run)
    assert run.tokenizer is not None
    assert run.model_config.pos_scheme == "cmha"
    assert run.model_config.max_seq_len == 64
