"""Launchers of the resilience tests: ``torchrun`` with restarts, and bare ranks that report
their exit codes instead of failing the test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from complexformer.training import read_metrics
from complexformer.training.dist import free_local_port

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("resilience_worker.py")


def rank_env(**extra: str) -> dict[str, str]:
    """The environment of a rank: one thread, loopback gloo, this checkout importable."""
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    for var in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "TORCHELASTIC_RESTART_COUNT"):
        env.pop(var, None)
    env.update(extra)
    return env


def _run(cmd: list[str], env: dict[str, str], timeout: float) -> tuple[int | None, str]:
    """Run ``cmd`` in its own session; on timeout the whole session is killed (code None)."""
    with tempfile.TemporaryFile(mode="w+") as log:
        p = subprocess.Popen(
            cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code: int | None = p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            code = None
        log.seek(0)
        return code, log.read()


def torchrun(nproc: int, args: list[str], max_restarts: int = 1, timeout: float = 150):
    """``torchrun --max-restarts`` of the worker with ``args``; ``(exit code, output)`` (the
    output starts with the command line)."""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        f"--nproc-per-node={nproc}",
        f"--max-restarts={max_restarts}",
        "--monitor-interval=0.2",
        # the c10d rendezvous: each restart is a new round with keys of its own (the static
        # one of --master-addr keeps the first attempt's keys, and a restarted rank can read
        # a dead rank's gloo address from them and fail to connect)
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{free_local_port()}",
        str(WORKER),
        *args,
    ]
    code, text = _run(cmd, rank_env(), timeout)
    return code, f"$ {' '.join(cmd)}\n{text}"


def launch_ranks(world: int, args: list[str], timeout: float = 120):
    """The worker as ``world`` ranks without torchrun (nothing ends a rank for the others).

    Returns:
        ``(codes, outputs, seconds)``; a rank still running after ``timeout`` is killed and
        its code is None.
    """
    port, procs, files = free_local_port(), [], []
    t0 = time.monotonic()
    for rank in range(world):
        env = rank_env(
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_WORLD_SIZE=str(world),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
        )
        log = tempfile.TemporaryFile(mode="w+")
        files.append(log)
        cmd = [sys.executable, str(WORKER), *args]
        procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT))
    codes: list[int | None] = []
    for p in procs:
        try:
            codes.append(p.wait(max(0.1, t0 + timeout - time.monotonic())))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            codes.append(None)
    seconds = time.monotonic() - t0
    outputs = []
    for f in files:
        f.seek(0)
        outputs.append(f.read())
        f.close()
    return codes, outputs, seconds


def training_rows(run_dir: Path) -> dict[int, dict]:
    """The metrics rows of the updates by step (event rows left out)."""
    return {r["step"]: r for r in read_metrics(run_dir / "metrics.jsonl") if "event" not in r}


def event_rows(run_dir: Path) -> list[dict]:
    return [r for r in read_metrics(run_dir / "metrics.jsonl") if "event" in r]
