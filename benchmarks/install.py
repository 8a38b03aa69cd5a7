"""The README's two commands on a fresh clone, timed: ``python -m benchmarks.install``.

Clones the committed ``HEAD`` of this repository into a temporary folder and runs there, with
an empty pip cache (``PIP_NO_CACHE_DIR=1``) and an empty data cache:

1. ``make .venv/.installed-run`` - `make run`'s install (venv, runtime dependencies,
   matplotlib);
2. ``make run`` - data preparation and the 400 training steps, on that install alone (its
   validation perplexity is parsed from the output);
3. ``bash .ci/run`` - what CI runs: `make run` with few steps in a new environment, then
   ``make lint`` and ``make test`` (whose install adds the test dependencies to ``.venv``); the
   pytest summary (passed, failed, skipped, deselected) is parsed from its output.

Writes ``benchmarks/results/install.json``; ``python -m benchmarks.render`` renders it into the
README's install-time table and its "Measured here" table, and the test suite checks that
the number of fast tests recorded there is the number the suite collects. About 25 minutes
on 2 cores. The clone, its environments and the three logs are in a temporary folder that is
removed at the end (``--keep`` keeps it).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS_DIR, environment, record, write_record

REPO_ROOT = Path(__file__).resolve().parent.parent
_SUMMARY = re.compile(r"\d+ (passed|failed)\b.* in [\d.]+s")


def _run(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[float, str]:
    """Run ``cmd``; its output goes to ``log`` and is returned with the wall time."""
    print(f"$ {' '.join(cmd)}  (log: {log})", flush=True)
    t0 = time.perf_counter()
    with log.open("w", encoding="utf-8") as fh:
        res = subprocess.run(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - t0
    text = log.read_text(encoding="utf-8", errors="replace")
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {res.returncode}):\n{text[-4000:]}")
    return seconds, text


def parse_perplexity(text: str) -> float | None:
    """The last ``validation perplexity: X`` printed by `make run`."""
    found = re.findall(r"^validation perplexity: ([\d.]+)$", text, flags=re.MULTILINE)
    return float(found[-1]) if found else None


def parse_pytest_summary(text: str) -> dict[str, int]:
    """The counts of pytest's closing line (``1842 passed, 1 skipped, 15 deselected in ...``)."""
    for line in reversed(text.splitlines()):
        if _SUMMARY.search(line):
            counts = re.findall(r"(\d+) (passed|failed|skipped|deselected|errors?|xfailed)", line)
            return {kind.rstrip("s") if kind == "errors" else kind: int(n) for n, kind in counts}
    return {}


def parse_collected(text: str) -> int | None:
    """The count of ``pytest --collect-only -q -m slow``'s closing line
    (``23/2115 tests collected (2092 deselected) in 6.78s``)."""
    found = re.search(r"(\d+)(?:/\d+)? tests? collected", text)
    return int(found.group(1)) if found else None


def count_slow_tests(clone: Path, env: dict[str, str]) -> int | None:
    """How many tests ``make test-slow`` runs, collected with the clone's environment (pytest
    in several worker processes does not report the slow tests it deselects)."""
    python = clone / ".venv" / "bin" / "python"
    if not python.is_file():
        return None
    cmd = [str(python), "-m", "pytest", "--collect-only", "-q", "-m", "slow"]
    res = subprocess.run(cmd, cwd=clone, env=env, capture_output=True, text=True)
    return parse_collected(res.stdout)


def measure(workdir: Path, run_steps: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    clone = workdir / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO_ROOT), str(clone)], check=True)
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1", "COMPLEXFORMER_CACHE": str(workdir / "cache")}
    env.pop("VIRTUAL_ENV", None)
    logs = workdir / "logs"
    logs.mkdir()
    install_s, _ = _run(["make", ".venv/.installed-run"], clone, env, logs / "install.log")
    run_s, run_text = _run(
        ["make", "run", f"RUN_STEPS={run_steps}"], clone, env, logs / "make_run.log"
    )
    # .ci/run's suite checks the README's count of fast tests, which this run is recording.
    ci_env = {**env, "COMPLEXFORMER_RECORDING_TEST_COUNT": "1"}
    ci_s, ci_text = _run(["bash", ".ci/run"], clone, ci_env, logs / "ci_run.log")
    summary = parse_pytest_summary(ci_text)
    records = [
        {"step": "make run's install", "seconds": install_s},
        {"step": "make run after its install", "seconds": run_s, "steps": run_steps},
        {"step": ".ci/run", "seconds": ci_s, "pytest": summary},
    ]
    ratios = {
        "make_run_minutes": (install_s + run_s) / 60,
        "ci_run_minutes": ci_s / 60,
        "val_ppl": parse_perplexity(run_text),
        "fast_tests": summary.get("passed", 0)
        + summary.get("failed", 0)
        + summary.get("skipped", 0),
        "slow_tests": count_slow_tests(clone, env),
    }
    return records, ratios


def from_logs(workdir: Path, run_steps: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The records of an earlier run kept with ``--keep`` (or still going), from its logs: each
    step's time is its log's birth to its last write; a ``.ci/run`` that has not printed
    pytest's closing line is recorded without a time and a count."""
    logs = workdir / "logs"

    def span(name: str) -> tuple[float, str]:
        path = logs / name
        # a file's birth time: os.stat has none on Linux before Python 3.12, stat(1) reads it
        out = subprocess.run(["stat", "-c", "%W", str(path)], capture_output=True, text=True)
        born = float(out.stdout.strip() or 0)
        if born <= 0:
            raise SystemExit(f"{path}: the file system records no birth time; cannot time it")
        return path.stat().st_mtime - born, path.read_text(encoding="utf-8", errors="replace")

    install_s, _ = span("install.log")
    run_s, run_text = span("make_run.log")
    records = [
        {"step": "make run's install", "seconds": install_s},
        {"step": "make run after its install", "seconds": run_s, "steps": run_steps},
    ]
    ratios: dict[str, Any] = {
        "make_run_minutes": (install_s + run_s) / 60,
        "val_ppl": parse_perplexity(run_text),
    }
    if (logs / "ci_run.log").is_file():
        ci_s, ci_text = span("ci_run.log")
        summary = parse_pytest_summary(ci_text)
        if summary:
            records.append({"step": ".ci/run", "seconds": ci_s, "pytest": summary})
            ratios["ci_run_minutes"] = ci_s / 60
            ratios["fast_tests"] = sum(summary.get(k, 0) for k in ("passed", "failed", "skipped"))
            ratios["slow_tests"] = count_slow_tests(workdir / "clone", os.environ.copy())
    return records, ratios


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.install",
        description="Time the README's two commands (make run, then .ci/run) on a fresh clone "
        "of HEAD with an empty pip cache; writes benchmarks/results/install.json.",
    )
    p.add_argument(
        "--run-steps", type=int, default=400, help="make run's RUN_STEPS (default: 400)."
    )
    p.add_argument(
        "--json",
        default=str(RESULTS_DIR / "install.json"),
        help="where to write the record (default: benchmarks/results/install.json).",
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary clone and its logs.")
    p.add_argument(
        "--from-logs",
        type=Path,
        metavar="DIR",
        help="record an earlier run's folder (kept with --keep, or cut short) from its logs "
        "instead of measuring; its .ci/run is left out unless it finished.",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    env = environment("cpu")
    t0 = time.perf_counter()
    if args.from_logs is not None:
        records, ratios = from_logs(args.from_logs, args.run_steps)
    else:
        workdir = Path(tempfile.mkdtemp(prefix="complexformer-install-"))
        try:
            records, ratios = measure(workdir, args.run_steps)
        finally:
            if args.keep:
                print(f"kept {workdir}")
            else:
                shutil.rmtree(workdir, ignore_errors=True)
    payload = record(
        "install",
        environment=env,
        config={"argv": " ".join(sys.argv[1:]), "run_steps": args.run_steps},
        records=records,
        ratios=ratios,
        total_seconds=time.perf_counter() - t0,
    )
    write_record(Path(args.json), payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
