"""The renderer: markdown rows and target verdicts from small hand-written records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.install import parse_collected, parse_perplexity, parse_pytest_summary
from benchmarks.render import (
    DOCS_MD,
    README_MD,
    RESULTS_DIR,
    load_record,
    main,
    render_docs,
    render_readme,
)
from benchmarks.render import attention as render_attention
from benchmarks.render import train as render_train
from benchmarks.render._format import replace_section
from benchmarks.render.targets import Target, evaluate, target_lines

ENV = {
    "date": "2026-01-01T00:00:00+00:00",
    "torch": "2.13.0+cpu",
    "device": "cpu",
    "cpu_model": "Test CPU",
    "cpu_count": 2,
    "torch_threads": 1,
    "cpu_capability": "AVX2",
    "load_avg_1m": 0.5,
    "load_avg_1m_end": 0.7,
    "sources": {"complexformer/attention/functional.py": "0123456789abcdef"},
}


def _time(median: float, p25: float, p75: float, n: int) -> dict:
    return {"n": n, "median_ms": median, "p25_ms": p25, "p75_ms": p75}


def _att(method: str, ms: float, mib: float, mode: str = "eager", n: int = 3) -> dict:
    return {
        "T": 1024,
        "mode": mode,
        "method": method,
        "status": "ok",
        "first_call_s": 0.5,
        "time": _time(ms, ms - 1, ms + 1, n),
        "time_ms": ms,
        "peak_mib": mib,
        "memory_method": "profiler-event-tree",
    }


def attention_payload() -> dict:
    records = [
        _att("cmha", 12.0, 3.0),
        _att("rope", 10.0, 2.0),
        _att("reference", 1200.0, 300.0, n=1),
        {"T": 1024, "mode": "compiled", "method": "reference", "status": "skipped",
         "note": "estimated peak 9.0 GiB > limit 8.0 GiB"},
    ]  # fmt: skip
    return {
        "benchmark": "attention",
        "environment": ENV,
        "config": {"argv": "--threads 1", "B": 1, "H": 8, "D": 64, "layout": "halves",
                   "dtype": "float32", "repeats": 3, "warmup": 2},
        "total_seconds": 12.0,
        "records": records,
        # 12 / 10, 3 / 2, 1200 / 12, 300 / 3; compiled: reference skipped
        "ratios": {
            "1024/eager": {"cmha_rope_time": 1.2, "cmha_rope_mem": 1.5, "ref_cmha_time": 100.0,
                           "ref_cmha_mem": 100.0},
            "1024/compiled": {"cmha_rope_time": 1.3, "cmha_rope_mem": None,
                              "ref_cmha_time": None, "ref_cmha_mem": None},
        },
        "notes": [],
    }  # fmt: skip


def test_attention_rows_and_targets():
    md = render_attention.render(attention_payload(), "results/attention.json")
    lines = md.splitlines()
    assert "| 1024 | eager | cmha | 12.00 | 11.0-13.0 | 3 | 3.0 | 1.20x | 1.50x | 1.00x |" in lines
    assert "| 1024 | eager | rope | 10.00 | 9.0-11.0 | 3 | 2.0 | 1.00x | 1.00x | 0.83x |" in lines
    assert (
        "| 1024 | eager | reference | 1,200.00 | - | 1 | 300.0 | 120.00x | 150.00x | 100.00x |"
        in lines
    )
    assert "| 1024 | compiled | reference | skipped | - | - | - | - | - | - |" in lines
    assert "- **FAIL** cmha/rope time, eager, T=1024: 1.20 (target <= 1.08)" in lines
    assert "- **FAIL** cmha/rope time, compiled, T=1024: 1.30 (target <= 1.05)" in lines
    assert (
        "- **N/A** cmha/rope peak memory, eager, T=4096: target <= 1.2; not measured in "
        "this run" in lines
    )
    assert (
        "- **N/A** reference/cmha time (cmha speed-up), compiled, T=1024: target >= 20; "
        "not measured (a method was skipped)" in lines
    )
    assert (
        "- **PASS** reference/cmha time (cmha speed-up), eager, T=1024: 100.00 (target >= 20)"
        in lines
    )
    assert "Command: `python -m benchmarks.attention --threads 1`" in md
    assert "Raw data: `results/attention.json`" in md
    assert "- T=1024 compiled reference: skipped, estimated peak 9.0 GiB > limit 8.0 GiB." in lines


def train_payload() -> dict:
    def tr(scheme, ms, tps):
        return {
            "kind": "train",
            "mode": "eager",
            "scheme": scheme,
            "T": 512,
            "B": 8,
            "median_ms": ms,
            "tokens_per_s": tps,
        }

    def gen(cache, seconds):
        return {
            "kind": "generate",
            "scheme": "cmha",
            "use_cache": cache,
            "new_tokens": 64,
            "seconds": seconds,
            "tokens_per_s": 64 / seconds,
            "same_tokens": True,
        }

    return {
        "benchmark": "train",
        "environment": ENV,
        "config": {"argv": "", "preset": "tiny", "vocab": 8192},
        "records": [tr("cmha", 1600.0, 2560.0), tr("rope", 1280.0, 3200.0),
                    gen(True, 0.5), gen(False, 2.0)],
        "ratios": {"train_cmha_rope/eager": 0.8, "generate_cache_speedup": 4.0},
        "notes": [],
    }  # fmt: skip


def test_train_rows_and_targets():
    md = render_train.render(train_payload(), "train.json")
    lines = md.splitlines()
    assert "| train (eager) | cmha | B=8, T=512 | 1,600.0 | 2,560 | 0.80x |" in lines
    assert "| train (eager) | rope | B=8, T=512 | 1,280.0 | 3,200 | 1.00x |" in lines
    assert "| generate, with KV cache | cmha | 64 new tokens | 500 | 128.0 | - |" in lines
    assert "| generate, no cache (recompute) | cmha | 64 new tokens | 2,000 | 32.0 | - |" in lines
    assert "- **FAIL** training tokens/s cmha/rope, eager: 0.80 (target >= 0.9)" in lines
    assert "- **FAIL** generation with / without KV cache: 4.0x (target >= 5x)" in lines
    assert "Command: `python -m benchmarks.train`." in md


def test_targets_boundaries_and_errors():
    payload = {"benchmark": "train", "ratios": {"train_cmha_rope/eager": 0.9}}
    verdicts = evaluate(payload)
    # 0.9 >= 0.9; generation, the minimal-model comparisons and the loss memory not measured
    assert [v.passed for v in verdicts] == [True, None, None, None, None, None]
    assert verdicts[1].note == "not measured in this run"
    assert evaluate({"benchmark": "no-such", "ratios": {}}) == []
    with pytest.raises(ValueError, match="comparison '<'"):
        Target("train", "x", ("a",), "<", 1.0)
    assert target_lines({"benchmark": "train", "ratios": {}})[0] == (
        "- **N/A** training tokens/s cmha/rope, eager: target >= 0.9; not measured in this run"
    )


def test_replace_section_keeps_prose():
    text = "# T\n\nintro\n<!-- a:start -->\nold\n<!-- a:end -->\n\noutro\n"
    assert replace_section(text, "a", "new\n") == (
        "# T\n\nintro\n<!-- a:start -->\nnew\n<!-- a:end -->\n\noutro\n"
    )
    assert (
        replace_section("# T\n", "b", "body") == "# T\n\n<!-- b:start -->\nbody\n<!-- b:end -->\n"
    )
    with pytest.raises(ValueError, match="unbalanced markers"):
        replace_section("<!-- a:end -->\n", "a", "x")
    with pytest.raises(ValueError, match="bad section name"):
        replace_section("", "a b", "x")


def test_load_record_rejects_unknown_benchmark(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"benchmark": "nope"}')
    with pytest.raises(ValueError, match="'nope'"):
        load_record(path)


def test_committed_records_reproduce_the_docs():
    """The committed JSON files render to exactly the committed docs/benchmarks.md."""
    text = DOCS_MD.read_text(encoding="utf-8")
    new, used = render_docs(text, RESULTS_DIR)
    assert sorted(used) == [
        "attention",
        "cbert",
        "checkpoint",
        "complex_attention",
        "data",
        "init_memory",
        "retrofit",
        "shard",
        "train",
    ]
    assert new == text


def test_committed_records_reproduce_the_readme():
    """The README's install and "Measured here" tables are the committed records' rendering."""
    text = README_MD.read_text(encoding="utf-8")
    assert render_readme(text, RESULTS_DIR) == text, "run `make bench-docs`"
    assert "<!-- measured:start -->\n| what | result |" in text


def test_install_parsers_read_make_run_and_pytest_output():
    out = "step 400\nvalidation perplexity: 151.79\nrun directory: /x\n"
    assert parse_perplexity(out) == 151.79 and parse_perplexity("nothing") is None
    line = "1842 passed, 1 skipped, 15 deselected in 366.12s (0:06:06)"
    assert parse_pytest_summary(f"....\n{line}\n") == {
        "passed": 1842,
        "skipped": 1,
        "deselected": 15,
    }
    failed = "==== 2 failed, 1840 passed, 1 skipped, 15 deselected in 400.00s ===="
    assert parse_pytest_summary(failed) == {
        "failed": 2,
        "passed": 1840,
        "skipped": 1,
        "deselected": 15,
    }


def test_the_slow_count_is_read_from_a_collection():
    assert parse_collected("a::b\n\n23/2115 tests collected (2092 deselected) in 6.78s\n") == 23
    assert parse_collected("1 test collected in 0.1s") == 1
    assert parse_collected("no tests ran in 0.01s") is None


def test_main_writes_and_checks(tmp_path: Path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    (results / "train.json").write_text(json.dumps(train_payload()))
    docs = tmp_path / "bench.md"
    docs.write_text("# Bench\n\nprose kept\n")
    readme = tmp_path / "README.md"
    readme.write_text("# Project\n")
    args = ["--results", str(results), "--docs", str(docs), "--readme", str(readme)]
    assert main([*args, "--check"]) == 1
    assert docs.read_text() == "# Bench\n\nprose kept\n"  # --check writes nothing
    assert main(args) == 0
    text = docs.read_text()
    assert text.startswith("# Bench\n\nprose kept\n\n<!-- train:start -->\n")
    assert "| train (eager) | rope | B=8, T=512 | 1,280.0 | 3,200 | 1.00x |" in text
    assert main([*args, "--check"]) == 0
    assert "<!-- measured:start -->" in readme.read_text()  # the README's tables too
    with pytest.raises(SystemExit, match="no record"):
        main([*args, "cbert"])
    assert "FAIL training tokens/s cmha/rope" in capsys.readouterr().out


def test_install_record_from_the_logs_of_a_cut_short_run(tmp_path):
    from benchmarks.install import from_logs

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "install.log").write_text("pip ...\n")
    (logs / "make_run.log").write_text("step 400\nvalidation perplexity: 151.79\n")
    (logs / "ci_run.log").write_text("....... [ 25%]\n")  # cut short: no closing line
    records, ratios = from_logs(tmp_path, 400)
    assert [r["step"] for r in records] == ["make run's install", "make run after its install"]
    assert ratios["val_ppl"] == 151.79 and ratios["make_run_minutes"] >= 0
    assert "fast_tests" not in ratios
    (logs / "ci_run.log").write_text("1842 passed, 1 skipped, 15 deselected in 366.12s\n")
    records, ratios = from_logs(tmp_path, 400)
    assert records[-1]["pytest"]["passed"] == 1842 and ratios["fast_tests"] == 1843
