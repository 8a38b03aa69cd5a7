"""The export's target never follows a link: a linked target folder or a linked manifest."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from complexformer.hf.export import is_export_dir, save_hf
from complexformer.storage import SymlinkRefusedError
from tests.hf.hf_testlib import tiny_lm


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_export_into_a_linked_folder_is_refused(exported, tokenizer, tmp_path):
    _, earlier = exported("cmha")
    victim = tmp_path / "victim"
    shutil.copytree(earlier, victim)  # an export: a linked one would pass the kind check
    before = _tree(victim)
    link = tmp_path / "export"
    link.symlink_to(victim, target_is_directory=True)
    lm = tiny_lm(tokenizer, "alibi")
    with pytest.raises(SymlinkRefusedError) as e:
        save_hf(lm, tokenizer, link)
    assert e.value.link == link
    assert _tree(victim) == before and link.is_symlink()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries


def test_a_linked_manifest_is_neither_read_nor_trusted(exported, tokenizer, tmp_path):
    _, earlier = exported("cmha")
    user = tmp_path / "user"
    user.mkdir()
    (user / "notes.txt").write_text("mine\n")
    (user / "manifest.json").symlink_to(earlier / "manifest.json")  # claims to be an export
    assert not is_export_dir(user)
    lm = tiny_lm(tokenizer, "alibi")
    with pytest.raises(SymlinkRefusedError) as e:
        save_hf(lm, tokenizer, user)
    assert e.value.link == user / "manifest.json"
    assert sorted(p.name for p in user.iterdir()) == ["manifest.json", "notes.txt"]
    assert (user / "notes.txt").read_text() == "mine\n"
