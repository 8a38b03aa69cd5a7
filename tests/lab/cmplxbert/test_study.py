"""The CmplxBERT convergence study on a 3-step, 2-point run of a tiny BERT: its JSON, table
and plot, points that match the MLM run's checkpoints, and a repeated command that redoes
nothing."""

from __future__ import annotations

import json

import pytest

from tests.cmplxbert.lora_testlib import save_tiny_bert_dir, write_docstring_corpus
from tests.cmplxbert.test_lora_finetune import _task_dir

pytest.importorskip("transformers")

from complexformer.cmplxbert import ComplexLoRAConfig  # noqa: E402
from complexformer.cmplxbert.io import adapter_state_dict  # noqa: E402
from complexformer.cmplxbert.loading import load_cmplxbert  # noqa: E402
from complexformer_lab.cmplxbert.study import StudyConfig, run_study  # noqa: E402


def test_study_on_a_three_step_two_point_run_writes_json_table_and_plot(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPLEXFORMER_CACHE", str(tmp_path / "cache"))
    base = str(save_tiny_bert_dir(tmp_path / "bert", "BertModel"))
    cfg = StudyConfig(
        base=base,
        data=write_docstring_corpus(tmp_path / "corpus.jsonl"),
        task=_task_dir(tmp_path / "task"),
        lora=ComplexLoRAConfig(r=2),
        max_steps=3,
        every=3,
        batch_size=4,
        max_len=32,
        lr=1e-3,
        seeds=(0,),
        ft_epochs=1,
        ft_lr=1e-3,
        ft_batch_size=8,
        max_train_examples=24,
        max_eval_examples=16,
        pooling="cls",
        num_threads=1,
        device="cpu",
    )
    assert cfg.steps == [0, 3]
    out = tmp_path / "study"
    p = run_study(cfg, out, log=None)
    assert [x["step"] for x in p["points"]] == [0, 3]
    assert set(p["references"]) == {"real BERT", "real LoRA", "CmplxBERT, real mode, no MLM"}
    for x in [*p["points"], *p["references"].values()]:
        assert 0.0 <= x["accuracy_mean"] <= 1.0 and x["accuracy_std"] == 0.0  # one seed
    saved = json.loads((out / "study.json").read_text())
    assert saved["points"] == p["points"]
    assert (out / "study.png").stat().st_size > 10_000
    assert "majority class" in (out / "study.md").read_text()
    # the MLM references on the same masked tokens: the unigram baseline, the real-mode run
    v = p["validation"]
    assert v["masked_tokens"] > 0 and 0.0 < v["unigram_loss"] < 20.0
    assert set(v["real_mode_loss"]) == {"0", "3"}
    assert all(x["val_loss"] is not None for x in p["points"])
    assert "unigram (token-prior) baseline" in (out / "study.md").read_text()
    assert (out / "mlm-real-mode" / "model").is_dir()
    # each point against each reference, paired over the seeds (one seed: a difference, no test)
    for x in p["points"]:
        for name, ref in p["references"].items():
            d = x["paired"][name]
            assert d["n"] == 1 and d["p"] is None
            assert d["mean"] == pytest.approx(x["accuracy_mean"] - ref["accuracy_mean"])
    assert "vs real LoRA" in (out / "study.md").read_text()
    # the step-3 point holds the adapters of the MLM run's final model, step 0 fresh ones
    final = load_cmplxbert(out / "mlm" / "model")[0]
    point = load_cmplxbert(out / "points" / "step3")[0]
    fresh = load_cmplxbert(out / "points" / "step0")[0]
    a, b, c = (adapter_state_dict(m) for m in (final, point, fresh))
    assert all(a[k].equal(b[k]) for k in a)
    assert any(not a[k].equal(c[k]) for k in a)
    # a repeated command resumes: nothing is trained again
    before = {f: f.stat().st_mtime_ns for f in (out / "finetune").rglob("*-seed0.json")}
    assert len(before) == 5  # two points, real, real LoRA, real mode
    again = run_study(cfg, out, log=None)
    assert again["points"] == p["points"] and again["references"] == p["references"]
    assert all(f.stat().st_mtime_ns == t for f, t in before.items())


def test_study_config_names_bad_values():
    with pytest.raises(ValueError, match="every must be an integer >= 1, got 0"):
        StudyConfig(every=0)
    with pytest.raises(ValueError, match=r"max_steps must be an integer >= every \(500\), got 10"):
        StudyConfig(max_steps=10)
    assert StudyConfig(max_steps=1200, every=500).steps == [0, 500, 1000, 1200]


def test_paired_differences_match_scipy_ttest_rel():
    stats = pytest.importorskip("scipy.stats")
    from complexformer_lab.cmplxbert.study import _paired

    point = {"accuracy_by_seed": {"0": 0.30, "1": 0.42, "2": 0.35, "3": 0.5}}
    refs = {
        "real BERT": {"accuracy_by_seed": {"0": 0.55, "1": 0.60, "2": 0.52}},  # seed 3 missing
        "same": {"accuracy_by_seed": {"0": 0.20, "1": 0.32, "2": 0.25}},  # equal differences
    }
    out = _paired(point, refs)
    a, b = [0.30, 0.42, 0.35], [0.55, 0.60, 0.52]
    ref = stats.ttest_rel(a, b)
    r = out["real BERT"]
    assert r["n"] == 3
    assert r["mean"] == pytest.approx(sum(x - y for x, y in zip(a, b, strict=True)) / 3)
    assert r["t"] == pytest.approx(ref.statistic, rel=1e-9)
    assert r["p"] == pytest.approx(ref.pvalue, rel=1e-7)
    assert out["same"]["mean"] == pytest.approx(0.1) and out["same"]["p"] is None
    assert "equal" in out["same"]["note"]


@pytest.mark.parametrize(
    ("preset", "extra", "want"),
    [("library", [], (1e-3, 0.3)), ("paper", [], (1e-4, 1.0)),
     ("paper", ["--ft-lr", "5e-4"], (5e-4, 1.0))],
)  # fmt: skip
def test_study_fine_tuning_rates_follow_the_preset(tmp_path, monkeypatch, preset, extra, want):
    import complexformer_lab.cmplxbert.study as study
    from complexformer.cli import main

    seen = {}

    def fake(cfg, out, log=print):
        seen["cfg"] = cfg
        (tmp_path / "s").mkdir(exist_ok=True)
        (tmp_path / "s" / "study.md").write_text("x")

    monkeypatch.setattr(study, "run_study", fake)
    args = ["cbert-study", "--base", "minilm", "--out", str(tmp_path / "s"), "--recipe", preset]
    assert main(args + extra) == 0
    assert (seen["cfg"].ft_lr, seen["cfg"].ft_base_lr_ratio) == want
    paper = preset == "paper"
    assert seen["cfg"].lora.init == ("zero_b" if paper else "zero_a")
    assert seen["cfg"].model.start == ("paper" if paper else "keep")
