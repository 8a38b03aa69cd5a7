"""``--shard`` (FSDP2) under two gloo processes: the first 20 losses equal the single-process
run's with the same global batch (the LM with cmha and with rope), gradient clipping uses the
global norm, and a checkpoint written by two sharded ranks resumes on one process and on two
sharded ranks with the losses of the uninterrupted run."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import torch.distributed as tdist

from complexformer.lm import load_run, train
from complexformer.models import GPTConfig
from complexformer.training import TrainConfig
from tests.training.test_loop_ddp import launch, step_losses, train_command
from tests.training.training_testlib import REFERENCE_MODEL, REFERENCE_TRAIN

pytestmark = pytest.mark.skipif(
    not tdist.is_available() or not tdist.is_gloo_available(), reason="needs gloo"
)

STEPS = 20
#: 2 layers, so that there are two shard units below the root; clipping at 0.5 is active in
#: most steps (the norms are above it), so a per-rank norm would change the losses.
MODEL = {**REFERENCE_MODEL, "n_layer": 2}
TRAIN = {
    **REFERENCE_TRAIN,
    "max_steps": STEPS,
    "eval_every": 10,
    "save_every": 10,
    "grad_clip": 0.5,
}


def losses(run_dir, key="train_loss", steps=STEPS) -> torch.Tensor:
    rows = step_losses(run_dir)
    assert sorted(rows) == list(range(1, steps + 1))
    return torch.tensor([rows[s][key] for s in range(1, steps + 1)], dtype=torch.float64)


def one_process(model: dict, out, corpus_spec):
    tc = TrainConfig(out_dir=str(out), data=corpus_spec, **TRAIN)
    return train(GPTConfig(**model), tc, log=None)


#: The full ComplexFormer: the phase contrastive loss is computed inside each attention
#: layer's forward, where FSDP2 has gathered its pcl_weight (PCL dropout 0: the views of a
#: global batch and of two half batches would differ only by their random masks).
PCL = {"pos_scheme": "cmha", "pcl": True, "pcl_dropout": 0.0}
#: With PCL the final validation loss moves with the reduction order as much as the last train
#: losses (held to 1e-4 below). Measured, sharded on 2 ranks against one process: 3.2e-5 here
#: with OMP_NUM_THREADS 1 and 2, 6.5e-5 in a clean-clone run on another CPU (it failed the
#: former bound of 1e-5): held to 3x the largest seen.
VAL_RTOL_PCL = 2e-4


@pytest.mark.parametrize(
    "variant", [{"pos_scheme": "cmha"}, {"pos_scheme": "rope"}, PCL], ids=["cmha", "rope", "pcl"]
)
def test_sharded_lm_matches_one_process(variant, corpus_spec, tmp_path):
    model = {**MODEL, **variant}
    ref = tmp_path / "one"
    ref_summary = one_process(model, ref, corpus_spec)
    out = tmp_path / "shard"
    cmd = train_command(model, TRAIN, out, corpus_spec) + ["--shard"]
    outputs = launch(2, cmd)
    assert "sharded" in outputs[0] and f"done: {STEPS} steps" in outputs[0]

    # With PCL (τ = 0.1) the rounding of another reduction order grows after about 8 steps,
    # for DDP as much as for sharding (against one process, the largest of 20 steps: train
    # loss 1.5e-5 and 1.7e-5 relative, gradient norm 3.5e-2 and 3.6e-2): the first 8 steps are
    # held to 1e-5 and the 20 losses to 1e-4; without PCL all 20 to 1e-5.
    exact = 8 if variant is PCL else STEPS
    for key in ("train_loss", "grad_norm", "lr"):
        got, want = losses(out, key), losses(ref, key)
        torch.testing.assert_close(got[:exact], want[:exact], rtol=1e-5, atol=0, msg=key)
        if key != "grad_norm":
            torch.testing.assert_close(got, want, rtol=1e-4, atol=0, msg=key)
    assert (losses(ref, "grad_norm") > TRAIN["grad_clip"]).sum() >= STEPS // 2  # clipping bites
    want = json.loads((ref / "summary.json").read_text())
    got = json.loads((out / "summary.json").read_text())
    assert ref_summary["val_loss"] == want["val_loss"]
    rel = abs(got["val_loss"] - want["val_loss"]) / abs(want["val_loss"])
    print(f"val_loss relative difference, sharded vs one process: {rel:.2e}")
    assert rel <= (VAL_RTOL_PCL if variant is PCL else 1e-5), (got["val_loss"], want["val_loss"])

    # the final model is the usual single-file safetensors + manifest, equal to the reference
    # (atol 1e-5: the key biases get no gradient but rounding noise, which AdamW normalises
    # into steps of lr whose sign depends on the summation order; measured 4e-6)
    run, ref_run = load_run(out), load_run(ref)
    got_sd, want_sd = run.model.state_dict(), ref_run.model.state_dict()
    assert sorted(got_sd) == sorted(want_sd)
    if variant is PCL:  # weights apart by up to 1.3e-3 after 20 steps; the
        return  # losses and the final validation loss above are the comparison
    for name in want_sd:
        torch.testing.assert_close(
            got_sd[name], want_sd[name], rtol=1e-4, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}"
        )


def test_sharded_checkpoint_resumes_on_one_and_on_two_ranks(corpus_spec, tmp_path):
    ref = tmp_path / "one"
    one_process(MODEL, ref, corpus_spec)
    want = losses(ref)
    out = tmp_path / "shard"
    cmd = train_command(MODEL, TRAIN, out, corpus_spec) + ["--shard"]
    launch(2, cmd)
    state = json.loads((out / "checkpoints" / "step_0000010" / "state.json").read_text())
    assert state["world_size"] == 2 and state["train_config"]["shard"] is True
    # written in parts, one per rank, the AdamW state by parameter name
    assert state["sharded"] is True
    names = [n for g in state["optimizer"]["param_groups"] for n in g["params"]]
    assert "wte.weight" in names and "blocks.0.attn.qkv.weight" in names
    parts = sorted(p.name for p in (out / "checkpoints" / "step_0000010" / "parts").iterdir())
    assert parts == [f"shard-0000{r}-model-00001-of-00001.safetensors" for r in (1, 2)]
    manifest = json.loads((out / "checkpoints" / "step_0000010" / "manifest.json").read_text())
    assert {f"parts/{p}" for p in parts} <= set(manifest["files"])
    assert not (out / "checkpoints" / "step_0000010" / "model.safetensors").exists()

    # two ranks wrote step 10: resume it sharded on two ranks ...
    two = tmp_path / "two"
    shutil.copytree(out, two)
    shutil.rmtree(two / "checkpoints" / "step_0000020")
    shutil.rmtree(two / "model")
    launch(
        2, cmd[: cmd.index("--out") + 1] + [str(two)] + cmd[cmd.index("--out") + 2 :] + ["--resume"]
    )
    torch.testing.assert_close(losses(two), want, rtol=1e-5, atol=0)

    # ... and in one process, unsharded
    shutil.rmtree(out / "checkpoints" / "step_0000020")
    shutil.rmtree(out / "model")
    msgs = []
    tc = TrainConfig(out_dir=str(out), data=corpus_spec, **TRAIN)
    summary = train(GPTConfig(**MODEL), tc, resume=True, log=msgs.append)
    assert summary["resumed_from"] == 10
    torch.testing.assert_close(losses(out), want, rtol=1e-5, atol=0)
    assert load_run(out).step == STEPS


def test_shard_on_one_process_trains_unsharded_with_a_note(corpus_spec, tmp_path):
    short = {**TRAIN, "max_steps": 3, "eval_every": 3, "save_every": 3}
    ref = tmp_path / "one"
    train(GPTConfig(**MODEL), TrainConfig(out_dir=str(ref), data=corpus_spec, **short), log=None)
    msgs = []
    tc = TrainConfig(out_dir=str(tmp_path / "s"), data=corpus_spec, shard=True, **short)
    train(GPTConfig(**MODEL), tc, log=msgs.append)
    assert any("nothing to shard over" in m for m in msgs)
    torch.testing.assert_close(
        losses(tmp_path / "s", steps=3), losses(ref, steps=3), rtol=0, atol=0
    )


@pytest.mark.slow  # inductor compiles the blocks on each rank: 3 minutes on a shared 2-core CPU
def test_compiled_blocks_under_shard_train_as_the_eager_sharded_run(corpus_spec, tmp_path):
    """``--compile --shard``: each block's forward is compiled after ``fully_shard``; the
    losses are those of the eager sharded run up to the rounding of the fused kernels."""
    short = {**TRAIN, "max_steps": 6, "eval_every": 6, "save_every": 6}
    runs = {}
    for name, extra in (("eager", []), ("compiled", ["--compile"])):
        cmd = train_command(MODEL, short, tmp_path / name, corpus_spec) + ["--shard", *extra]
        outputs = launch(2, cmd, timeout=400)
        assert "done: 6 steps" in outputs[0], outputs[0]
        runs[name] = outputs
    assert "compile: the forward of each of 2 sharded block(s) is compiled" in runs["compiled"][0]
    for key in ("train_loss", "grad_norm"):
        got = losses(tmp_path / "compiled", key, steps=6)
        want = losses(tmp_path / "eager", key, steps=6)
        # measured: 8.7e-8 (train loss) and 9.0e-8 (gradient norm) relative, float32 rounding
        # of the fused kernels; held to 1e-5, the bound of the sharded-vs-one-process test
        print(f"{key}: largest relative difference {((got - want) / want).abs().max():.2e}")
        torch.testing.assert_close(got, want, rtol=1e-5, atol=0, msg=key)


@pytest.mark.parametrize("keep", [True, False])
def test_bf16_shard_gathers_the_phase_parameters_in_float32(keep, tmp_path):
    """Under --shard --bf16 the attention layers holding δ and b are units of their own that
    gather in float32 (the block's other parameters in bfloat16); without the names, δ would
    be gathered in bfloat16 like everything else."""
    from complexformer.lm import LMTask
    from complexformer.models import ComplexFormerLM
    from complexformer.training.shard import shard_model, transformer_blocks

    store = tdist.FileStore(str(tmp_path / "store"), 1)
    tdist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        model = ComplexFormerLM(GPTConfig(**{**MODEL, "pcl": True}))
        names = LMTask.shard_fp32_parameters if keep else ()
        shard_model(model, transformer_blocks(model), torch.device("cpu"), 1, True, (), names)
        seen = []
        for block in model.blocks:
            block.attn.register_forward_pre_hook(
                lambda m, a: seen.append(
                    (m.adapt_delta.dtype, m.adapt_bias.dtype, m.pcl_weight.dtype)
                )
            )
            block.mlp.register_forward_pre_hook(lambda m, a: seen.append((m.fc.weight.dtype,)))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(torch.randint(0, MODEL["vocab_size"], (2, 8)))
        assert torch.isfinite(out.logits.float()).all()
        want = torch.float32 if keep else torch.bfloat16
        attn = [s for s in seen if len(s) == 3]
        assert len(attn) == MODEL["n_layer"] and all(d == want for s in attn for d in s)
        assert all(s == (torch.bfloat16,) for s in seen if len(s) == 1)
        # the stored shards keep their own dtype
        assert model.blocks[0].attn.adapt_delta.dtype == torch.float32
    finally:
        tdist.destroy_process_group()
