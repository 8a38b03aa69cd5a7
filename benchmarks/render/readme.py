"""The README's install-time and "Measured here" tables, from ``benchmarks/results/*.json``.

``python -m benchmarks.render`` rewrites the README between ``<!-- install:start -->`` /
``<!-- install:end -->`` and ``<!-- measured:start -->`` / ``<!-- measured:end -->`` from
the records present; a row whose record is missing is left out. The test suite checks that
the README equals this rendering, and that the number of fast tests recorded by
``benchmarks.install`` is the number the suite collects.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from complexformer.results import markdown_table

from ._format import fmt_num, fmt_ratio

__all__ = ["SECTIONS", "install_table", "load_results", "measured_table"]

#: README sections rendered here, by marker name.
SECTIONS = ("install", "measured")


def load_results(results_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Every ``<name>.json`` record of ``results_dir``, by benchmark name."""
    out = {}
    for path in sorted(Path(results_dir).glob("*.json")):
        payload = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(payload, dict) and payload.get("benchmark") == path.stem:
            out[path.stem] = payload
    return out


def _install_step(payload: dict[str, Any], step: str) -> dict[str, Any] | None:
    return next((r for r in payload["records"] if r["step"] == step), None)


def install_table(results: dict[str, dict[str, Any]]) -> str:
    """The install-time table (``benchmarks.install``), or a line saying it is not measured."""
    rec = results.get("install")
    if rec is None:
        return "Not measured yet: `python -m benchmarks.install` writes the record."
    install = _install_step(rec, "make run's install")["seconds"]
    run = _install_step(rec, "make run after its install")
    ci = _install_step(rec, ".ci/run")
    rows = [
        ["`make run`'s install (venv, runtime dependencies and matplotlib)", f"{install:.0f} s"],
        [
            f"the whole of `make run` on a fresh clone (install, data preparation, "
            f"{run['steps']} training steps)",
            f"{(install + run['seconds']) / 60:.1f} min",
        ],
        [
            "the whole of `.ci/run` after it (`make run` of 20 steps in a new environment, "
            "`make lint`, the test install, `make test`)",
            "not recorded in this run" if ci is None else f"{ci['seconds'] / 60:.1f} min",
        ],
    ]
    date = rec["environment"]["date"][:10]
    rev = rec["environment"].get("git_revision") or "?"
    head = f"Measured {date} at {str(rev)[:7]} (`python -m benchmarks.install`):\n\n"
    return head + markdown_table(["install step", "wall time"], rows)


def _attention_rows(rec: dict[str, Any]) -> list[list[str]]:
    r = rec["ratios"]

    def peak(method: str) -> float:
        return next(
            x["peak_mib"]
            for x in rec["records"]
            if (x["T"], x["mode"], x["method"], x["status"]) == (1024, "eager", method, "ok")
        )

    return [
        [
            "CMHA vs RoPE, forward + backward, B=1, H=8, D=64, T=1024",
            f"time {fmt_ratio(r['1024/eager']['cmha_rope_time'])} eager, "
            f"{fmt_ratio(r['1024/compiled']['cmha_rope_time'])} compiled",
        ],
        ["CMHA vs RoPE peak memory, T=4096", fmt_ratio(r["4096/eager"]["cmha_rope_mem"])],
        [
            "CMHA vs the literal T×T×J form, T=1024",
            f"{fmt_num(r['1024/eager']['ref_cmha_time'], 0)}× faster, "
            f"{fmt_num(peak('reference') / 1024, 1)} GiB → {fmt_num(peak('cmha'), 0)} MiB",
        ],
    ]


def _train_rows(rec: dict[str, Any]) -> list[list[str]]:
    r, cfg = rec["ratios"], rec["config"]
    return [
        [
            f"LM training tokens/s, cmha / rope, {cfg['preset']} preset, T={cfg['seq_len']}",
            fmt_num(r["train_cmha_rope/eager"], 2),
        ],
        [
            "LM training step, ours / a minimal GPT loop (rope, cmha)",
            f"{fmt_ratio(r['step_vs_minimal/rope'])}, {fmt_ratio(r['step_vs_minimal/cmha'])}",
        ],
        [
            f"generation with / without the KV cache, {cfg['new_tokens']} tokens",
            fmt_ratio(r["generate_cache_speedup"], 1),
        ],
    ]


def _complex_rows(rec: dict[str, Any]) -> list[list[str]]:
    r = rec["ratios"]["1024"]["ct_real/ours_real"]
    return [
        [
            "`complexformer.nn.MultiheadAttention` vs complextorch 2.1.1, T=1024",
            f"{fmt_num(r, 2)}× faster",
        ]
    ]


def _cbert_rows(rec: dict[str, Any]) -> list[list[str]]:
    r, cfg = rec["ratios"], rec["config"]
    shape = f"B={cfg['batch']}, T={cfg['seq_len']}"
    fwd, t, m = r["forward_time_vs_bert"], r["train_time_vs_bert"], r["train_peak_memory_vs_bert"]
    return [
        [
            f"CmplxBERT (r = {cfg['rank']}) forward / the real BERT, MiniLM, {shape}",
            f"{fmt_ratio(fwd['cmplx_modulus'])} modulus score, "
            f"{fmt_ratio(fwd['cmplx_real'])} real score",
        ],
        [
            f"CmplxBERT adapter-only MLM training step / full fine-tuning of the real BERT, "
            f"MiniLM, {shape}",
            f"time {fmt_ratio(t['cmplx_modulus/labelled'])}, peak memory "
            f"{fmt_ratio(m['cmplx_modulus/labelled'])} (head on the labelled tokens); "
            f"{fmt_ratio(t['cmplx_modulus/all'])} and {fmt_ratio(m['cmplx_modulus/all'])} "
            "with the head on every token",
        ],
    ]


def _retrofit_rows(rec: dict[str, Any]) -> list[list[str]]:
    r, cfg = rec["ratios"], rec["config"]
    return [
        [
            f"retrofit of {cfg['base']}: forward of the CMHA model / the original, "
            f"T={cfg['seq_len']}",
            fmt_ratio(r["forward_converted_original"]),
        ]
    ]


def _install_rows(rec: dict[str, Any]) -> list[list[str]]:
    r = rec["ratios"]
    rows = [
        [
            "`make run` on a fresh clone (new venv, empty pip and data caches): install, BPE "
            "and token caches, training steps of the tiny ComplexFormer on the standard library",
            f"{r['make_run_minutes']:.1f} min; validation perplexity {r['val_ppl']:.2f}",
        ]
    ]
    step = _install_step(rec, ".ci/run")
    if step is None:
        return rows
    ci = step["pytest"]
    slow = r.get("slow_tests", ci.get("deselected"))
    slow_text = "" if slow is None else f" ({slow} slow ones run by `make test-slow`)"
    return rows + [
        [
            "`.ci/run` on a fresh clone after it (`make run`, lint, the test suite)",
            f"{r['ci_run_minutes']:.1f} min; {r['fast_tests']} fast tests: "
            f"{ci.get('passed', 0)} passed, {ci.get('skipped', 0)} skipped{slow_text}",
        ],
    ]


def _checkpoint_rows(rec: dict[str, Any]) -> list[list[str]]:
    r, m = rec["ratios"], rec["config"]["model"]
    size = f"{m['n_layer']} layers × {m['d_model']}"
    return [
        [
            f"sharded checkpoint ({size}, gloo): bytes written per rank / one process, 2 and "
            "4 ranks; time an async save blocks training / a sync save",
            f"{fmt_num(r['2']['bytes_vs_one'], 2)} and {fmt_num(r['4']['bytes_vs_one'], 2)}; "
            f"{fmt_num(r['2']['async_vs_sync_blocked'], 2)} and "
            f"{fmt_num(r['4']['async_vs_sync_blocked'], 2)}",
        ]
    ]


def _init_memory_rows(rec: dict[str, Any]) -> list[list[str]]:
    r = rec["ratios"]
    return [
        [
            "memory of the model at the start of a sharded run (meta init) / one process, "
            "2 and 4 ranks",
            f"{fmt_num(r['2/meta']['model_at_start_vs_one'], 2)} and "
            f"{fmt_num(r['4/meta']['model_at_start_vs_one'], 2)}",
        ]
    ]


def _data_rows(rec: dict[str, Any]) -> list[list[str]]:
    r = rec["ratios"]
    return [
        [
            "`complexformer prepare`: 1 worker / the tokenizers library's `encode_batch` on "
            "the same text in memory; 2 workers / 1",
            f"{fmt_num(r['prepare_1_vs_encode_batch'], 2)}; "
            f"{fmt_num(r['prepare_2_vs_1'], 2)} (see docs/benchmarks.md for the machine's load)",
        ],
        [
            "launch to the first training step on a prepared corpus, "
            f"{rec['config']['large_mb']:.0f} MB / {rec['config']['small_mb']:.0f} MB",
            fmt_num(r["first_step_large_vs_small"], 2),
        ],
    ]


_ROWS = {
    "install": _install_rows,
    "attention": _attention_rows,
    "train": _train_rows,
    "complex_attention": _complex_rows,
    "cbert": _cbert_rows,
    "retrofit": _retrofit_rows,
    "checkpoint": _checkpoint_rows,
    "init_memory": _init_memory_rows,
    "data": _data_rows,
}


def measured_table(results: dict[str, dict[str, Any]]) -> str:
    """The "Measured here" table: a few rows per record present, in a fixed order."""
    rows = []
    for name, make in _ROWS.items():
        try:
            rows.extend(make(results[name]) if name in results else [])
        except (KeyError, TypeError, StopIteration):  # a partial record (--quick, a subset)
            continue
    note = (
        "\n\nRendered from `benchmarks/results/*.json` by `python -m benchmarks.render` "
        "(`make bench-docs`); each record names its date, commit and machine load, and "
        "[docs/benchmarks.md](docs/benchmarks.md) has every row of every benchmark."
    )
    return markdown_table(["what", "result"], rows) + note


def render(name: str, results: dict[str, dict[str, Any]]) -> str:
    """The body of README section ``name`` (one of :data:`SECTIONS`)."""
    return install_table(results) if name == "install" else measured_table(results)
