"""Manifests of saved directories: each kind of damage detected, updates that keep the other
entries as recorded."""

from __future__ import annotations

import json

import pytest

from complexformer.storage import ManifestError, update_manifest, verify_manifest, write_manifest


def test_manifest_detects_each_kind_of_damage(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"\x00" * 100)
    (tmp_path / "b.json").write_text("{}")
    write_manifest(tmp_path, ["a.bin", "b.json"], kind="model")
    m = verify_manifest(tmp_path)
    assert m["kind"] == "model" and set(m["files"]) == {"a.bin", "b.json"}
    (tmp_path / "a.bin").write_bytes(b"\x00" * 99 + b"\x01")  # same size, one byte changed
    with pytest.raises(ManifestError, match="a.bin is corrupted: sha256"):
        verify_manifest(tmp_path)
    (tmp_path / "a.bin").write_bytes(b"\x00" * 10)
    with pytest.raises(ManifestError, match="truncated"):
        verify_manifest(tmp_path)
    (tmp_path / "a.bin").unlink()
    with pytest.raises(ManifestError, match="a.bin is missing"):
        verify_manifest(tmp_path)
    (tmp_path / "manifest.json").unlink()
    assert verify_manifest(tmp_path, required=False) is None
    with pytest.raises(ManifestError, match="manifest.json is missing"):
        verify_manifest(tmp_path)


def test_update_manifest_keeps_the_other_entries_as_recorded(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"\x00" * 100)
    write_manifest(tmp_path, ["a.bin"], kind="model", step=3)
    (tmp_path / "a.bin").write_bytes(b"\x00" * 99 + b"\x01")  # changed after the save
    (tmp_path / "new.json").write_text("{}")
    update_manifest(tmp_path, ["new.json"], kind="adapters")
    m = json.loads((tmp_path / "manifest.json").read_text())
    assert m["kind"] == "model" and m["step"] == 3  # the folder's own fields
    assert set(m["files"]) == {"a.bin", "new.json"}
    with pytest.raises(ManifestError, match="a.bin is corrupted"):  # not re-blessed
        verify_manifest(tmp_path)
    (tmp_path / "a.bin").write_bytes(b"\x00" * 100)
    assert verify_manifest(tmp_path)["files"]["new.json"]["bytes"] == 2
    (tmp_path / "manifest.json").unlink()  # none there: a new one of the files given
    update_manifest(tmp_path, ["new.json"], kind="adapters")
    m = verify_manifest(tmp_path)
    assert m["kind"] == "adapters" and set(m["files"]) == {"new.json"}
