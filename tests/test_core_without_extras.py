"""The main job on the runtime dependencies alone: `train`, `info`, `generate`, `evaluate
--suite ppl` and every command's `--help` run in a process where every optional package is
unimportable (tests/blocked_imports.py); a command that needs an extra names it and exits 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.blocked_imports import runtime_only_path
from tests.common_testlib import write_corpus

ROOT = Path(__file__).resolve().parents[1]
BLOCKER = ROOT / "tests" / "blocked_imports.py"
TINY = ("--set", "n_layer=1", "d_model=32", "n_head=2", "d_ff=64", "max_seq_len=32")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return runtime_only_path(tmp_path_factory.mktemp("runtime-only") / "site")


def _run(site: Path, *argv: str, cwd: Path, code: str | None = None):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{site}{os.pathsep}{ROOT}"}
    env["COMPLEXFORMER_CACHE"] = str(cwd / "cache")
    cmd = [sys.executable, "-S", *(["-c", code] if code else [str(BLOCKER), *argv])]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _explain(res: subprocess.CompletedProcess) -> str:
    blocked = [line for line in res.stderr.splitlines() if "[blocked optional import]" in line]
    return (
        f"exit {res.returncode}; optional imports reached (outermost module first):\n"
        + "\n".join(blocked)
        + f"\n--- stderr tail ---\n{res.stderr[-3000:]}"
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory, site):
    tmp = tmp_path_factory.mktemp("core")
    corpus = write_corpus(tmp, n_lines=600)
    run = tmp / "run"
    res = _run(site, "train", "--data", corpus, "--out", str(run), "--max-steps", "2",
               "--batch-size", "2", "--vocab-size", "300", "--threads", "1",
               "--sample-tokens", "4", "--prompt", "the cat", *TINY, cwd=tmp)  # fmt: skip
    return tmp, run, res


def test_the_optional_packages_are_absent_and_asking_is_recorded(site, tmp_path):
    code = (
        "import importlib.util, tests.blocked_imports as b; b.main(['--help-all'])\n"
        "import torch, tokenizers, safetensors, numpy, tqdm\n"
        "print([n for n in b.BLOCKED if importlib.util.find_spec(n) is not None])\n"
        "import transformers"
    )
    res = _run(site, cwd=tmp_path, code=code)
    assert "No module named 'transformers'" in res.stderr and res.returncode == 1, res.stderr
    assert "\n[]\n" in res.stdout, res.stdout
    assert "[blocked optional import] transformers" in res.stderr


def test_train_without_optional_packages(trained):
    _, run, res = trained
    assert res.returncode == 0, _explain(res)
    assert "validation perplexity" in res.stdout
    assert (run / "model" / "model.safetensors").is_file()


def test_info_generate_evaluate_ppl_without_optional_packages(trained, site):
    tmp, run, res = trained
    assert res.returncode == 0, _explain(res)
    res = _run(site, "info", "--model", str(run), "--threads", "1", cwd=tmp)
    assert res.returncode == 0 and "lm-run" in res.stdout, _explain(res)
    res = _run(site, "generate", "--model", str(run), "--prompt", "the cat",
               "--max-new-tokens", "3", "--temperature", "0", cwd=tmp)  # fmt: skip
    assert res.returncode == 0 and res.stdout.startswith("the cat"), _explain(res)
    res = _run(site, "evaluate", "--model", str(run), "--suite", "ppl", "--max-blocks", "2",
               cwd=tmp)  # fmt: skip
    assert res.returncode == 0, _explain(res)
    assert (run / "eval" / "ppl.json").is_file()


def test_every_help_without_optional_packages(site, tmp_path):
    res = _run(site, "--help-all", cwd=tmp_path)
    assert res.returncode == 0, _explain(res)
    assert "--help of train" in res.stdout and "--help of evaluate" in res.stdout


def test_a_command_that_needs_an_extra_names_it_and_exits_2(trained, site):
    tmp, run, _ = trained
    res = _run(site, "export", "--model", str(run), "--out", str(tmp / "export"), cwd=tmp)
    assert res.returncode == 2, _explain(res)
    assert "pip install 'complexformer[hf]'" in res.stderr, res.stderr
    assert not (tmp / "export").exists()
