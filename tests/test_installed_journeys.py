"""The documented journeys from an installed package, run from a folder outside the source
tree: the wheel is built and installed into a temporary folder that comes first on the path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.common_testlib import write_corpus

ROOT = Path(__file__).resolve().parents[1]
SKIP = shutil.ignore_patterns(".venv", ".git", "runs", "build", "dist", "*.egg-info", "mutants",
                              "__pycache__", ".pytest_cache", ".ruff_cache", ".cache")  # fmt: skip


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=SKIP)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "w"),
                    str(src)], check=True, cwd=tmp)  # fmt: skip
    wheel = next((tmp / "w").glob("complexformer-*.whl"))
    site = tmp / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True)
    work = tmp / "elsewhere"
    work.mkdir()
    return site, work


def _cli(installed, *argv: str) -> subprocess.CompletedProcess:
    site, work = installed
    env = {**os.environ, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "complexformer", *argv], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_the_installed_package_is_the_one_that_runs(installed):
    site, work = installed
    out = subprocess.run(
        [sys.executable, "-c", "import complexformer; print(complexformer.__file__)"],
        cwd=work, env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True,
    )  # fmt: skip
    assert Path(out.stdout.strip()).is_relative_to(site)


def test_lm_eval_tasks_are_found_in_the_installed_package(installed):
    res = _cli(installed, "evaluate", "--lm-eval-tasks-path")
    assert res.returncode == 0, res.stderr
    path = Path(res.stdout.strip())
    assert path.is_relative_to(installed[0])
    assert (path / "complexformer_mc.yaml").is_file() and (path / "mc_questions.jsonl").is_file()


def test_the_wheel_registers_the_lab_commands_the_offline_tasks_and_the_heads_suite(installed):
    site, work = installed
    found = subprocess.run(
        [sys.executable, "-c", "from importlib.metadata import distribution as d; "
         "print(d('complexformer').read_text('entry_points.txt'))"],
        cwd=work, env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True,
    )  # fmt: skip
    text = found.stdout
    assert "[complexformer.commands]\nlab = complexformer_lab.cli:add_parsers" in text
    for name, obj in [("code-tags", "CODE_TAGS_TASK"), ("docstring-pairs", "DOCSTRING_PAIRS_TASK"),
                      ("docstrings", "DOCSTRINGS_TASK")]:  # fmt: skip
        assert f"{name} = complexformer_lab.cmplxbert.tasks:{obj}" in text
    assert "[complexformer.suites]\nheads = complexformer_lab.evaluation.heads:HeadsSuite" in text
    res = _cli(installed, "cbert-finetune", "--help")
    assert res.returncode == 0, res.stderr
    assert "  code-tags (token): the role of each token" in res.stdout
    res = _cli(installed, "evaluate", "--help")
    assert res.returncode == 0 and "--num-blocks" in res.stdout and "heads" in res.stdout


def test_train_info_generate_evaluate_export_from_another_folder(installed, tmp_path):
    corpus = write_corpus(tmp_path, n_lines=600)
    run = tmp_path / "run"
    res = _cli(installed, "train", "--data", corpus, "--out", str(run), "--max-steps", "2",
               "--batch-size", "2", "--vocab-size", "300", "--threads", "1", "--sample-tokens",
               "0", "--set", "n_layer=1", "d_model=32", "n_head=2", "d_ff=64",
               "max_seq_len=32")  # fmt: skip
    assert res.returncode == 0, res.stderr
    res = _cli(installed, "info", "--model", str(run), "--threads", "1")
    assert res.returncode == 0 and "lm-run" in res.stdout, res.stderr
    res = _cli(installed, "generate", "--model", str(run), "--prompt", "the cat",
               "--max-new-tokens", "3", "--temperature", "0", "--threads", "1")  # fmt: skip
    assert res.returncode == 0 and res.stdout.startswith("the cat"), res.stderr
    res = _cli(installed, "evaluate", "--model", str(run), "--max-blocks", "2", "--json")
    assert res.returncode == 0, res.stderr
    assert (run / "eval" / "ppl.json").is_file()
    pytest.importorskip("transformers")
    export = tmp_path / "export"
    res = _cli(installed, "export", "--model", str(run), "--out", str(export))
    assert res.returncode == 0, res.stderr
    res = _cli(installed, "evaluate", "--model", str(export))
    assert res.returncode == 2 and "records no corpus" in res.stderr
