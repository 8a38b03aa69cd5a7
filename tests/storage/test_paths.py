"""Telling a local path from a hub name before anything is downloaded."""

from __future__ import annotations

import pytest

from complexformer.storage import looks_local, require_local_or_hub


def test_local_paths_and_hub_names(tmp_path):
    assert looks_local("/x/y") and looks_local("./x") and looks_local("~/x") and looks_local("..")
    assert looks_local(tmp_path)  # exists
    assert not looks_local("gpt2") and not looks_local("HuggingFaceTB/SmolLM2-135M")
    require_local_or_hub("gpt2", "model")  # a hub name: left to the hub
    require_local_or_hub(tmp_path, "model")
    with pytest.raises(FileNotFoundError, match=r"model .*nope: no such file or directory"):
        require_local_or_hub(tmp_path / "nope", "model")
