"""CmplxBERT's plots (finetune.png, study.png, start.png) never write through a planted link,
and its fine-tuning runs remove their checkpoints only inside the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from complexformer.storage import SymlinkRefusedError
from complexformer_lab.cmplxbert import finetune, start_report, study

pytest.importorskip("matplotlib")

FINETUNE = {
    "summary": {"cbert": {}, "real": {}},
    "runs": [
        {"model": "cbert", "test": {"accuracy": 0.7}},
        {"model": "real", "test": {"accuracy": 0.6}},
    ],
    "majority": {"accuracy": 0.5},
    "task": "toy",
}
STUDY = {
    "points": [
        {"step": 0, "accuracy_mean": 0.6, "accuracy_std": 0.01, "val_loss": 3.0},
        {"step": 10, "accuracy_mean": 0.7, "accuracy_std": 0.02, "val_loss": 2.5},
    ],
    "references": {"real": {"accuracy_mean": 0.65}},
    "majority": {"accuracy": 0.5},
}
START = {"layers": {"cbert": {"cosine": [0.1, 0.2], "rel_error": [0.01, 0.02]}}}


def _plots():
    return [
        ("finetune.png", lambda path: finetune._plot(FINETUNE, "accuracy", path)),
        ("study.png", lambda path: study._plot(STUDY, path)),
        ("start.png", lambda path: start_report._plot(START, path)),
    ]


@pytest.mark.parametrize("name,plot", _plots(), ids=[n for n, _ in _plots()])
def test_plot_is_written_and_never_through_a_link(tmp_path, name, plot):
    out = tmp_path / "out"
    out.mkdir()
    plot(out / name)
    assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    victim = tmp_path / "victim.txt"
    victim.write_text("SECRET\n")
    (out / name).unlink()
    (out / name).symlink_to(victim)
    with pytest.raises(SymlinkRefusedError) as e:
        plot(out / name)
    assert e.value.link == Path(out / name)
    assert victim.read_text() == "SECRET\n" and (out / name).is_symlink()
    assert sorted(p.name for p in out.iterdir()) == [name]  # no temporary left
