"""Shared helpers for the scripts in ``benchmarks/``.

Everything a benchmark needs besides the thing it measures:

* :func:`time_interleaved` - wall-clock timing with warm-up runs and the median of N repeats,
  several functions interleaved round-robin so that drift on a shared machine hits all of them
  alike (``time.perf_counter``; ``torch.cuda.synchronize`` around each call on CUDA).
* :func:`peak_memory` - peak of the bytes allocated by one call, over what was live before it.
  CUDA: ``torch.cuda.max_memory_allocated`` minus ``torch.cuda.memory_allocated`` before the
  call. CPU: the torch profiler with ``profile_memory=True``; every allocation and free done by
  the c10 CPU allocator during the call (on any thread: operators, autograd, Inductor buffers,
  the SDPA kernels' scratch space) is replayed in time order, a free counting only when its
  pointer was allocated inside the call, and the peak of the running sum is returned. Memory
  that does not go through the torch allocator (Python objects, compiled code, the C++
  runtime's own malloc) is not seen; tensors that live across the call (inputs, weights) are
  excluded by construction.
* :func:`try_compile` - ``torch.compile`` that reports failure instead of raising.
* :func:`environment` - torch / Python / CPU / device description for the JSON record, and
  :func:`source_fingerprint` - hashes of the measured source files.
* :func:`record` and :func:`write_record` - the JSON record every benchmark writes (written
  atomically with :func:`complexformer.results.write_json`).
* :func:`add_common_args`, :func:`resolve_device`, :func:`resolve_dtype` - CLI plumbing.

The scripts only measure and write JSON; ``python -m benchmarks.render`` turns the JSON files
into the tables of ``docs/benchmarks.md`` and judges the targets. The module depends on torch,
the standard library and ``complexformer``'s shared report helpers.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import hashlib
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

try:  # private API (the profiler's event tree); without it the raw [memory] events are used
    from torch._C._profiler import _EventType
except ImportError:  # pragma: no cover - depends on the torch version
    _EventType = None

from complexformer.results import write_json
from complexformer.training.dist import free_local_port

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
MIB = 2**20
GIB = 2**30

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


# --------------------------------------------------------------------------- CLI plumbing


def add_common_args(
    parser: argparse.ArgumentParser,
    *,
    default_json: Path | str,
    default_repeats: int = 5,
    default_warmup: int = 2,
    quick_repeats: int | None = None,
    quick_warmup: int | None = None,
) -> None:
    """Options shared by every benchmark script (device, dtype, repeats, compile, output).

    ``--repeats`` and ``--warmup`` default to None so that a script can tell an explicit value
    from the default; resolve them with :func:`resolve_counts`. ``quick_repeats`` /
    ``quick_warmup`` are the values used instead in a script's ``--quick`` mode, if it has one.
    """
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="device to run on (default: cpu). On cuda, times are synchronised and peak "
        "memory is torch.cuda.max_memory_allocated.",
    )
    parser.add_argument(
        "--dtype",
        choices=tuple(_DTYPES),
        default="float32",
        help="dtype of the benchmark inputs (default: float32).",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        metavar="N",
        help=f"timed repeats per measurement; the median is reported "
        f"(default: {default_repeats}{_quick(quick_repeats)}).",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=None,
        metavar="N",
        help=f"untimed warm-up calls before timing, after the first (compiling) call "
        f"(default: {default_warmup}{_quick(quick_warmup)}).",
    )
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="skip the torch.compile variants (eager only).",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="torch.set_num_threads(N) before measuring (default: torch's default).",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="random seed for the inputs (default: 0)."
    )
    parser.add_argument(
        "--out-json",
        type=str,
        default=None,
        metavar="PATH",
        help=f"where to write the JSON record; parent directories are created "
        f"(default: {_rel(Path(default_json))}; 'none' disables).",
    )
    parser.set_defaults(
        _counts={
            "repeats": (default_repeats, quick_repeats),
            "warmup": (default_warmup, quick_warmup),
        }
    )


def _quick(value: int | None) -> str:
    return "" if value is None else f"; {value} with --quick"


def resolve_counts(args: argparse.Namespace, *, quick: bool = False) -> None:
    """Fill ``args.repeats`` / ``args.warmup`` left at None with their (quick) defaults."""
    for name, (default, quick_default) in args._counts.items():
        if getattr(args, name) is None:
            use_quick = quick and quick_default is not None
            setattr(args, name, quick_default if use_quick else default)
    if args.repeats < 1 or args.warmup < 0:
        raise SystemExit("--repeats must be >= 1 and --warmup >= 0")


def optional_path(value: str | None, default: Path | None) -> Path | None:
    """``None`` -> ``default``; ``'none'``/``''`` -> ``None``; else the path."""
    if value is None:
        return default
    if value.strip().lower() in ("", "none", "-"):
        return None
    return Path(value)


def resolve_device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda requested but torch.cuda.is_available() is False")
    return torch.device(name)


def resolve_dtype(name: str) -> torch.dtype:
    return _DTYPES[name]


# --------------------------------------------------------------------------- timing


def synchronize(device: torch.device | str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def summarize(times_s: Sequence[float]) -> dict[str, Any]:
    """Median / min / max / quartiles of a list of durations, in milliseconds."""
    ms = sorted(t * 1e3 for t in times_s)
    if not ms:
        return {"n": 0, "median_ms": None}
    q = statistics.quantiles(ms, n=4) if len(ms) >= 2 else [ms[0], ms[0], ms[0]]
    return {
        "n": len(ms),
        "median_ms": statistics.median(ms),
        "min_ms": ms[0],
        "max_ms": ms[-1],
        "p25_ms": q[0],
        "p75_ms": q[2],
        "samples_ms": ms,
    }


def time_call(fn: Callable[[], Any], device: torch.device | str) -> float:
    """Seconds taken by one call of ``fn`` (synchronised on CUDA)."""
    synchronize(device)
    t0 = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - t0


def time_interleaved(
    fns: Mapping[str, Callable[[], Any]],
    *,
    device: torch.device | str,
    warmup: int | Mapping[str, int] = 2,
    repeats: int | Mapping[str, int] = 5,
    min_repeats: int = 3,
    max_seconds: float | None = None,
) -> dict[str, dict[str, Any]]:
    """Time several zero-argument callables, interleaved, and summarise each.

    Each function gets ``warmup`` untimed calls, then rounds of one timed call per function
    follow (the order rotates every round) until each has ``repeats`` samples (``warmup`` and
    ``repeats`` are ints or per-name mappings). When
    ``max_seconds`` is given, a function whose timed calls already add up to more than that
    stops after ``min_repeats`` samples (slow baselines do not dominate the run time).

    Returns ``{name: summarize(samples) | {"warmup": ...}}``; the median is the headline.
    """
    names = list(fns)
    n_warm = {n: warmup.get(n, 0) if isinstance(warmup, Mapping) else warmup for n in names}
    n_rep = {n: repeats.get(n, 1) if isinstance(repeats, Mapping) else repeats for n in names}
    for name in names:
        for _ in range(n_warm[name]):
            fns[name]()
    synchronize(device)
    samples: dict[str, list[float]] = {n: [] for n in names}
    gc.collect()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(max(n_rep.values(), default=0)):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                done = samples[name]
                if len(done) >= n_rep[name] or (
                    max_seconds is not None and len(done) >= min_repeats and sum(done) > max_seconds
                ):
                    continue
                done.append(time_call(fns[name], device))
    finally:
        if gc_was_enabled:
            gc.enable()
    return {n: {**summarize(samples[n]), "warmup": n_warm[n]} for n in names}


# --------------------------------------------------------------------------- memory


def _cpu_peak_from_profile(prof: torch.profiler.profile) -> tuple[int, str]:
    """Peak of live bytes allocated inside a profiled region (see the module docstring)."""
    results = prof.profiler.kineto_results
    try:
        if _EventType is None:
            raise RuntimeError("torch._C._profiler._EventType is not available")
        events: list[tuple[int, int, int]] = []
        stack = list(results.experimental_event_tree())
        while stack:
            node = stack.pop()
            stack.extend(node.children)
            if node.tag == _EventType.Allocation:
                f = node.extra_fields
                if str(f.device).startswith("cpu"):
                    events.append((node.start_time_ns, f.ptr, f.alloc_size))
        events.sort(key=lambda e: e[0])
        live: dict[int, int] = {}
        cur = peak = 0
        for _, ptr, size in events:
            if size > 0:
                live[ptr] = size
                cur += size
            elif ptr in live:  # frees of memory allocated before the region are ignored
                cur -= live.pop(ptr)
            peak = max(peak, cur)
        return peak, "profiler-event-tree"
    except Exception:  # private API changed: fall back to the raw [memory] events
        mem = [e for e in results.events() if e.name() == "[memory]"]
        mem.sort(key=lambda e: e.start_ns())
        cur = peak = 0
        for e in mem:
            cur += e.nbytes()
            peak = max(peak, cur)
        return peak, "profiler-memory-events"


def peak_memory(fn: Callable[[], Any], device: torch.device | str) -> dict[str, Any]:
    """Peak bytes allocated by one call of ``fn`` over what was allocated before it.

    Returns ``{"peak_bytes": int, "peak_mib": float, "method": str}``.
    """
    device = torch.device(device)
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        method = "torch.cuda.max_memory_allocated"
    else:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            fn()
        peak, method = _cpu_peak_from_profile(prof)
    return {"peak_bytes": int(peak), "peak_mib": peak / MIB, "method": method}


def memory_available_bytes(device: torch.device | str) -> int | None:
    """Free memory on ``device`` (CUDA: free device memory; CPU: MemAvailable), if known."""
    device = torch.device(device)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info()
        return int(free)
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


# --------------------------------------------------------------------------- compile


def try_compile(fn: Callable, **kwargs: Any) -> tuple[Callable | None, str | None]:
    """``torch.compile(fn, **kwargs)``; returns ``(compiled, None)`` or ``(None, reason)``.

    Compilation is lazy, so a failure usually shows on the first call: wrap that call with
    :func:`first_line` of the exception for the note, as the attention benchmark does.
    """
    if not hasattr(torch, "compile"):
        return None, "torch.compile is not available in this torch build"
    try:
        return torch.compile(fn, **kwargs), None
    except Exception as exc:  # pragma: no cover - depends on the installation
        return None, f"torch.compile failed: {first_line(exc)}"


def first_line(exc: BaseException, limit: int = 160) -> str:
    msg = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {msg[0] if msg else ''}".strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------- environment


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_revision() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def source_fingerprint(paths: Iterable[Path | str]) -> dict[str, str | None]:
    """``{repo-relative path: sha256 prefix}`` of the measured source files (None if missing).

    Recorded with the results so that numbers can be tied to a version of the code even in an
    uncommitted tree, and compared before / after a run to detect edits made meanwhile.
    """
    out: dict[str, str | None] = {}
    for p in paths:
        p = Path(p)
        p = p if p.is_absolute() else REPO_ROOT / p
        try:
            out[_rel(p)] = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
        except OSError:
            out[_rel(p)] = None
    return out


def environment(device: torch.device | str) -> dict[str, Any]:
    """What the numbers were measured on."""
    device = torch.device(device)
    env: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": str(device),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "git_revision": _git_revision(),
    }
    try:
        env["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except Exception:
        env["cpu_capability"] = None
    try:
        env["load_avg_1m"] = round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        env["load_avg_1m"] = None
    total = memory_available_bytes("cpu")
    env["host_mem_available_gib"] = None if total is None else round(total / GIB, 1)
    if device.type == "cuda":
        env["cuda_device"] = torch.cuda.get_device_name(device)
        env["cuda_version"] = torch.version.cuda
    return env


# --------------------------------------------------------------------------- output


def load_avg() -> float | None:
    """The 1-minute load average, rounded, or None where the platform has none."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def display_path(path: Path | None) -> str | None:
    """``path`` relative to the repository root where it lies inside it (None stays None)."""
    return None if path is None else _rel(path)


def record(
    name: str,
    *,
    environment: dict[str, Any],
    config: dict[str, Any],
    records: list[dict[str, Any]],
    ratios: dict[str, Any],
    notes: Sequence[str] = (),
    total_seconds: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The JSON record of one benchmark run; every script writes this shape.

    Args:
        name: the benchmark (``attention``, ``train``, ...); ``benchmarks.render`` looks its
            renderer up by it.
        environment: :func:`environment` plus ``sources`` (and ``load_avg_1m_end``).
        config: the options of the run, with ``argv`` (the command-line arguments as a string).
        records: one dict per measurement, with the raw timings (``samples_ms``).
        ratios: the ratios the benchmark is about (nested dicts of floats or None); the
            targets in ``benchmarks/render/targets.py`` are judged on these.
        notes: free-text remarks (skipped variants, code edited during the run).
        total_seconds: wall time of the whole run.
        **extra: further top-level fields (e.g. where a model came from).
    """
    return {
        "benchmark": name,
        "environment": environment,
        "config": config,
        "total_seconds": total_seconds,
        "records": records,
        "ratios": ratios,
        "notes": list(notes),
        **extra,
    }


def write_record(path: Path | None, payload: dict[str, Any]) -> Path | None:
    """Write ``payload`` to ``path`` as JSON, atomically (nothing when ``path`` is None)."""
    if path is None:
        return None
    out = write_json(path, payload)
    print(f"wrote {out}", flush=True)
    return out


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def launch_ranks(world: int, cmd: Sequence[str], what: str) -> None:
    """Run ``cmd`` as ``world`` local ranks (torchrun's environment variables, gloo on
    127.0.0.1, one thread each) and wait for all of them.

    Raises:
        RuntimeError: a rank exited non-zero (``what`` and the world size named).
    """
    port = free_local_port()
    procs = []
    for rank in range(world):
        env = dict(
            os.environ,
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_WORLD_SIZE=str(world),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            OMP_NUM_THREADS="1",
        )
        procs.append(subprocess.Popen(list(cmd), env=env))
    for p in procs:
        if p.wait() != 0:
            raise RuntimeError(f"{what} with {world} ranks failed (exit {p.returncode})")
