"""The attention benchmark end to end at its smallest sizes: a valid JSON record, no docs."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from benchmarks import attention
from benchmarks.render import DOCS_MD, render_section
from complexformer.runtime import cpu_settings

REPEATS = 2


def test_attention_writes_a_record(tmp_path):
    out = tmp_path / "out" / "attention.json"
    docs_before = DOCS_MD.read_text(encoding="utf-8")
    argv = ["--seq-lens", "16", "--heads", "2", "--head-dim", "8", "--repeats", str(REPEATS),
            "--warmup", "0", "--no-compile", "--threads", "1", "--out-json", str(out)]  # fmt: skip
    with cpu_settings():  # restores the thread count main() sets
        assert attention.main(argv) == 0
    assert DOCS_MD.read_text(encoding="utf-8") == docs_before
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["attention.json"]

    payload = json.loads(out.read_text())
    assert list(payload) == [
        "benchmark", "environment", "config", "total_seconds", "records", "ratios", "notes",
    ]  # fmt: skip
    assert payload["benchmark"] == "attention"
    env = payload["environment"]
    for key in ("torch", "python", "cpu_model", "cpu_count", "torch_threads", "date", "sources"):
        assert key in env
    assert env["torch_threads"] == 1
    assert set(env["sources"]) == set(attention.SOURCES)
    cfg = payload["config"]
    assert cfg["argv"] == " ".join(argv)
    shape = (cfg["B"], cfg["H"], cfg["D"], cfg["seq_lens"], cfg["modes"])
    assert shape == (1, 2, 8, [16], ["eager"])

    recs = {r["method"]: r for r in payload["records"]}
    assert sorted(recs) == ["cmha", "reference", "rope"]
    for r in recs.values():
        assert r["status"] == "ok" and r["T"] == 16 and r["mode"] == "eager"
        samples = r["time"]["samples_ms"]
        assert len(samples) == REPEATS and all(s > 0 for s in samples)
        assert math.isclose(r["time_ms"], statistics.median(samples))
        assert r["peak_bytes"] > 0
    ratios = payload["ratios"]["16/eager"]
    assert math.isclose(ratios["cmha_rope_time"], recs["cmha"]["time_ms"] / recs["rope"]["time_ms"])
    assert math.isclose(
        ratios["ref_cmha_mem"], recs["reference"]["peak_mib"] / recs["cmha"]["peak_mib"]
    )
    assert "torch.compile variants not run (--no-compile)." in payload["notes"]

    md = render_section(payload, "attention.json")
    assert "| 16 | eager | rope |" in md and "not measured in this run" in md


def test_retrofit_writes_a_record_on_a_tiny_base(tmp_path):
    pytest.importorskip("transformers")
    from benchmarks import retrofit
    from tests.retrofit.retrofit_testlib import build_tiny_base

    base = build_tiny_base(tmp_path / "base")
    out = tmp_path / "retrofit.json"
    argv = ["--base", str(base), "--seq-len", "16", "--repeats", "2", "--warmup", "0",
            "--threads", "1", "--out-json", str(out)]  # fmt: skip
    with cpu_settings():
        assert retrofit.main(argv) == 0
    payload = json.loads(out.read_text())
    kinds = [(r["kind"], r["model"]) for r in payload["records"]]
    assert kinds == [
        ("forward", "original"),
        ("forward", "converted"),
        ("train_step", "original_norms"),
        ("train_step", "converted_adaptation"),
    ]
    med = {k: r["median_ms"] for k, r in zip(kinds, payload["records"], strict=True)}
    ratios = payload["ratios"]
    assert ratios["forward_converted_original"] == pytest.approx(
        med[("forward", "converted")] / med[("forward", "original")]
    )
    assert payload["records"][3]["trainable"] == 2 * (2 * 8 + 4 * 8)  # δ per KV head, b per head
    md = render_section(payload, "retrofit.json")
    assert "forward time converted / original, T=512" in md


def test_train_writes_a_record_with_the_minimal_model(tmp_path):
    from benchmarks import train

    out = tmp_path / "train.json"
    argv = ["--preset", "micro", "--vocab", "64", "--seq-len", "16", "--batch", "2",
            "--new-tokens", "8", "--repeats", "2", "--ref-repeats", "2", "--warmup", "0",
            "--threads", "1", "--profile", "--memory", "--memory-preset", "micro",
            "--memory-batch", "2", "--memory-seq-len", "16", "--out-json", str(out)]  # fmt: skip
    with cpu_settings():
        assert train.main(argv) == 0
    payload = json.loads(out.read_text())
    ratios = payload["ratios"]
    for key in ("step_vs_minimal/rope", "step_vs_minimal/cmha", "generate_vs_minimal",
                "loss_memory/chunked_vs_sliced", "loss_memory/plain_vs_sliced"):  # fmt: skip
        assert ratios[key] > 0, key
    recs = payload["records"]
    ref = {r["model"]: r for r in recs if r["kind"] == "vs_reference"}
    assert ref["rope"]["parameters"] == ref["minimal"]["parameters"]
    # the same weights: the same initial loss and the same greedy tokens
    assert math.isclose(ref["rope"]["initial_loss"], ref["minimal"]["initial_loss"], rel_tol=1e-5)
    assert all(r["same_tokens"] for r in recs if r["kind"] == "generate_vs_reference")
    mem = {r["loss"]: r for r in recs if r["kind"] == "loss_memory"}
    assert math.isclose(mem["chunked"]["value"], mem["sliced_logits"]["value"], rel_tol=1e-5)
    md = render_section(payload, "train.json")
    assert "| ours, rope | B=2, T=16 |" in md and "| `aten::" in md
