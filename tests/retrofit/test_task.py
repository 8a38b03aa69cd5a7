"""Saving and loading adaptations, and retrofit runs on the shared training loop: exact resume,
what trains, the command line (retrofit, generate, evaluate)."""

from __future__ import annotations

import json

import pytest
import torch
from torch.testing import assert_close

from complexformer.cli import main
from complexformer.retrofit import (
    ADAPTATION_FILE,
    RetrofitConfig,
    RetrofitTask,
    load_adaptation,
    save_adaptation,
    to_cmha,
)
from complexformer.retrofit.evaluate import retrofit_perplexity
from complexformer.retrofit.io import load_adaptation_tensors
from complexformer.training import TrainConfig, list_checkpoints, read_metrics, train_task
from tests.common_testlib import write_corpus
from tests.retrofit.retrofit_testlib import build_tiny_base

transformers = pytest.importorskip("transformers")

IDS = torch.randint(0, 300, (2, 20), generator=torch.Generator().manual_seed(2))


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    return build_tiny_base(tmp_path_factory.mktemp("tiny_llama"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"), n_lines=800)


def _fresh_modules(run):
    model, _, _ = load_adaptation(run)
    return [layer.self_attn for layer in model.model.layers]


def _fresh(base_dir):
    return transformers.AutoModelForCausalLM.from_pretrained(base_dir).eval()


def _perturbed(base_dir, train="adaptation"):
    model = _fresh(base_dir)
    cfg = RetrofitConfig(base=str(base_dir), train=train)
    to_cmha(model, trainable=cfg.trainable)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.3 * torch.randn(p.shape, generator=g))
    return model, cfg


@pytest.mark.parametrize("train", ["adaptation", "adaptation+norms", "norms"])
def test_save_then_load_onto_a_fresh_base_gives_identical_logits(base_dir, tmp_path, train):
    model, cfg = _perturbed(base_dir, train)
    save_adaptation(model, tmp_path / "ad", cfg)
    with torch.no_grad():
        want = model(IDS).logits
        onto, _, got_cfg = load_adaptation(tmp_path / "ad", base=_fresh(base_dir))
        by_spec, tok, _ = load_adaptation(tmp_path / "ad")  # the base from its recorded spec
        assert_close(onto(IDS).logits, want, atol=0, rtol=0)
        assert_close(by_spec(IDS).logits, want, atol=0, rtol=0)
        assert (by_spec(IDS).logits - _fresh(base_dir)(IDS).logits).abs().max() > 1e-3
    assert got_cfg == cfg and tok is not None
    meta = json.loads((tmp_path / "ad" / "adaptation_config.json").read_text())
    assert meta["retrofit"]["train"] == train and meta["base_class"] == "LlamaForCausalLM"


def test_a_damaged_or_foreign_adaptation_is_refused(base_dir, tmp_path):
    model, cfg = _perturbed(base_dir)
    save_adaptation(model, tmp_path / "ad", cfg)
    f = tmp_path / "ad" / ADAPTATION_FILE
    data = bytearray(f.read_bytes())
    data[-1] ^= 1
    f.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="cannot load the adaptation .*sha256"):
        load_adaptation(tmp_path / "ad")
    with pytest.raises(FileNotFoundError, match="not a CMHA adaptation"):
        load_adaptation(tmp_path)
    model2, _ = _perturbed(base_dir)
    with pytest.raises(ValueError, match="no parameter in the model"):
        load_adaptation_tensors(model2, {"model.layers.0.self_attn.q_proj.lora_A": IDS}, "x")
    with pytest.raises(ValueError, match=r"cmha_delta has shape \(3,\)"):
        load_adaptation_tensors(model2, {"model.layers.0.self_attn.cmha_delta": IDS[0, :3]}, "x")
    with pytest.raises(ValueError, match="not converted"):
        save_adaptation(_fresh(base_dir), tmp_path / "x", cfg)


def _tc(out, corpus, **kw):
    base = dict(
        out_dir=str(out),
        data=corpus,
        max_steps=8,
        batch_size=2,
        lr=0.05,
        weight_decay=0.1,
        eval_every=4,
        eval_blocks=4,
        save_every=3,
        log_every=1,
        keep_last=2,
    )
    return TrainConfig(**{**base, **kw})


class Killed(Exception):
    pass


def _kill_at(step):
    def callback(info):
        if info["step"] == step:
            raise Killed

    return callback


def test_retrofit_run_trains_only_the_adaptation_and_resumes_exactly(base_dir, corpus, tmp_path):
    cfg = RetrofitConfig(base=str(base_dir), seq_len=32)
    ref = train_task(RetrofitTask(cfg), _tc(tmp_path / "ref", corpus), log=None)
    assert ref["steps"] == 8
    with pytest.raises(Killed):
        train_task(RetrofitTask(cfg), _tc(tmp_path / "cut", corpus), log=None, callback=_kill_at(5))
    again = train_task(RetrofitTask(cfg), _tc(tmp_path / "cut", corpus), resume=True, log=None)
    assert again["resumed_from"] == 3
    want = {r["step"]: r for r in read_metrics(tmp_path / "ref" / "metrics.jsonl")}
    got = {r["step"]: r for r in read_metrics(tmp_path / "cut" / "metrics.jsonl")}
    assert sorted(got) == sorted(want) == list(range(1, 9))
    for s in want:
        assert got[s]["train_loss"] == want[s]["train_loss"]
        assert got[s]["grad_norm"] == want[s]["grad_norm"]
    # checkpoints hold the trained tensors only
    _, ckpt = list_checkpoints(tmp_path / "ref" / "checkpoints")[-1]
    from safetensors.torch import load_file

    names = set(load_file(str(ckpt / "model.safetensors")))
    assert names and all(n.endswith(("cmha_delta", "cmha_bias")) for n in names)
    # the base is untouched, δ moved, weight decay did not pull δ towards 0
    model, _, _ = load_adaptation(tmp_path / "ref")
    params = dict(model.named_parameters())
    for name, q in _fresh(base_dir).named_parameters():
        assert torch.equal(params[name], q), name
    delta = model.model.layers[0].self_attn.cmha_delta
    assert (delta - 1).abs().max() > 1e-3 and delta.mean() > 0.5


def test_norms_control_keeps_the_rotation(base_dir, corpus, tmp_path):
    cfg = RetrofitConfig(base=str(base_dir), seq_len=32, train="norms")
    train_task(RetrofitTask(cfg), _tc(tmp_path / "n", corpus, max_steps=3), log=None)
    model, _, _ = load_adaptation(tmp_path / "n")
    attn = model.model.layers[0].self_attn
    assert torch.equal(attn.cmha_delta, torch.ones_like(attn.cmha_delta))
    assert torch.equal(attn.cmha_bias, torch.zeros_like(attn.cmha_bias))
    fresh = _fresh(base_dir).model.layers[0]
    layer = model.model.layers[0]
    assert not torch.equal(layer.input_layernorm.weight, fresh.input_layernorm.weight)
    assert torch.equal(layer.post_attention_layernorm.weight, fresh.post_attention_layernorm.weight)


def test_lora_mode_trains_lora_factors(base_dir, corpus, tmp_path):
    cfg = RetrofitConfig(base=str(base_dir), seq_len=32, train="lora", lora_r=2)
    train_task(RetrofitTask(cfg), _tc(tmp_path / "l", corpus, max_steps=3), log=None)
    model, _, _ = load_adaptation(tmp_path / "l")
    trained = json.loads((tmp_path / "l" / "model" / "adaptation_config.json").read_text())
    assert any("lora_B" in n for n in trained["tensors"])
    assert model.model.layers[0].self_attn.q_proj.lora_B.abs().max() > 0


def test_command_line_retrofit_generate_evaluate(base_dir, corpus, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["retrofit", "--base", str(base_dir), "--data", corpus, "--out", str(out)]
    args += ["--max-steps", "2", "--seq-len", "32", "--batch-size", "2", "--eval-every", "2"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    first = json.loads((out / "start_eval.json").read_text())
    assert summary["start_val_loss"] == first["loss"]
    assert f"validation perplexity: base {summary['start_val_ppl']:.3f} -> " in printed
    tok = transformers.AutoTokenizer.from_pretrained(base_dir)  # the unconverted base itself
    loaded = (_fresh(base_dir), tok, RetrofitConfig(base=str(base_dir), seq_len=32))
    base = retrofit_perplexity(out, corpus, "val", 4, 16, loaded=loaded, log=None)
    assert base["loss"] == pytest.approx(first["loss"], rel=0, abs=1e-5)
    assert main(["generate", "--model", str(out), "--prompt", "the cat", "--temperature", "0",
                 "--max-new-tokens", "5"]) == 0  # fmt: skip
    text = capsys.readouterr().out
    assert text.startswith("the cat")
    summary = json.loads((out / "summary.json").read_text())
    assert main(["evaluate", "--model", str(out / "model"), "--data", corpus, "--split", "val",
                 "--max-blocks", "16", "--json"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    res = json.loads(printed[printed.index("{") :])
    assert res["split"] == "val" and res["data"] == corpus
    assert res["loss"] == pytest.approx(summary["val_loss"], rel=0, abs=1e-5)
    single = tmp_path / "one.txt"  # one short text file: no test split under the chunk rule
    single.write_text("the cat sat on the mat and the dog ran home.\n" * 600)
    assert main(["evaluate", "--model", str(out), "--data", f"text:{single}", "--split",
                 "test"]) == 2  # fmt: skip
    assert "cut into chunks of 32 KiB" in capsys.readouterr().err
    assert main(["evaluate", "--model", str(out), "--suite", "text"]) == 2
    assert "retrofit" in capsys.readouterr().err
    assert main(["info", "--model", str(out), "--json"]) == 0  # info and export: every kind
    info = json.loads(capsys.readouterr().out)
    assert info["kind"] == "retrofit" and info["config"]["base"] == str(base_dir)
    n_adapt = sum(m.cmha_delta.numel() + m.cmha_bias.numel() for m in _fresh_modules(out))
    assert info["parameters"]["adaptation"] == n_adapt
    assert main(["export", "--model", str(out), "--out", str(tmp_path / "exp")]) == 2
    assert "is a retrofit adaptation" in capsys.readouterr().err
    assert not (tmp_path / "exp").exists()
    with pytest.raises(SystemExit):
        main(["retrofit", "--base", str(base_dir), "--out", str(tmp_path / "x"), "--train", "all"])
    assert "invalid choice: 'all'" in capsys.readouterr().err
