"""Complex Transformer layers/stacks, incremental decoding, ViT, and a 2-process DDP step."""

from __future__ import annotations

import gc
import os
import tempfile
import time

import pytest
import torch
import torch.multiprocessing as mp
from torch.testing import assert_close

import complexformer.nn as cnn
from complexformer.models.vit import ViT
from complexformer.training.dist import free_local_port


def _crandn(*shape, dtype=torch.complex128, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=g)


@pytest.mark.parametrize("norm_first", [False, True])
def test_nn_encoder_layer_structure(norm_first):
    torch.manual_seed(0)
    layer = cnn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=norm_first)
    layer = layer.double().eval()
    x = _crandn(2, 5, 8)
    sa = layer.self_attn
    if norm_first:
        h = x + sa(layer.norm1(x), layer.norm1(x), layer.norm1(x))
        ref = h + layer.ffn(layer.norm2(h))
    else:
        h = layer.norm1(x + sa(x, x, x))
        ref = layer.norm2(h + layer.ffn(h))
    assert_close(layer(x), ref)
    ffn = layer.ffn
    assert_close(ffn(x), ffn.linear2(cnn.CGELU()(ffn.linear1(x))))


@pytest.mark.parametrize("pos_encoding", [None, "rotary", "sinusoidal", "cope", "learned"])
def test_nn_transformer_forward_shapes_and_masks(pos_encoding):
    torch.manual_seed(0)
    model = cnn.Transformer(8, 2, 2, 2, 16, dropout=0.0, pos_encoding=pos_encoding, max_len=32)
    src = torch.randn(2, 6, 8, dtype=torch.cfloat)
    tgt = torch.randn(2, 4, 8, dtype=torch.cfloat)
    out = model(src, tgt, tgt_is_causal=True)
    assert out.shape == (2, 4, 8) and out.dtype == torch.cfloat
    # padded source keys never matter to the decoder output
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[0, 4:] = True
    a = model(src, tgt, src_key_padding_mask=pad, memory_key_padding_mask=pad, tgt_is_causal=True)
    src2 = src.clone()
    src2[0, 4:] = 100.0
    b = model(src2, tgt, src_key_padding_mask=pad, memory_key_padding_mask=pad, tgt_is_causal=True)
    assert_close(a, b)


def test_nn_transformer_batch_first_false():
    torch.manual_seed(0)
    model = cnn.Transformer(8, 2, 1, 1, 16, dropout=0.0).eval()
    src, tgt = torch.randn(2, 6, 8, dtype=torch.cfloat), torch.randn(2, 4, 8, dtype=torch.cfloat)
    ref = model(src, tgt, tgt_is_causal=True)
    model.batch_first = False
    out = model(src.transpose(0, 1), tgt.transpose(0, 1), tgt_is_causal=True)
    assert_close(out.transpose(0, 1), ref)


@pytest.mark.parametrize("pos_encoding", ["rotary", "sinusoidal", "learned"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_nn_decoder_kv_cache_equals_full_recomputation(pos_encoding, norm_first):
    torch.manual_seed(0)
    model = cnn.Transformer(
        8,
        2,
        1,
        2,
        16,
        dropout=0.0,
        pos_encoding=pos_encoding,
        max_len=16,
        norm_first=norm_first,
        score="modulus",
    )
    model = model.double().eval()
    src, tgt = _crandn(2, 5, 8, seed=1), _crandn(2, 7, 8, seed=2)
    full = model(src, tgt, tgt_is_causal=True)
    memory = model.encode(src)
    cache = model.new_cache()
    outs = [model.decode(tgt[:, :3], memory, tgt_is_causal=True, cache=cache)]
    for t in range(3, 7):
        outs.append(model.decode(tgt[:, t : t + 1], memory, tgt_is_causal=True, cache=cache))
    assert cache.offset == 7
    assert_close(torch.cat(outs, 1), full)
    # dropping a batch row from the cache keeps decoding consistent
    cache2 = model.new_cache()
    model.decode(tgt[:, :6], memory, tgt_is_causal=True, cache=cache2)
    cache2.reorder(torch.tensor([1]))
    last = model.decode(tgt[1:, 6:7], memory[1:], tgt_is_causal=True, cache=cache2)
    assert_close(last, full[1:, 6:7])


def test_nn_transformer_trains():
    torch.manual_seed(0)
    model = cnn.Transformer(8, 2, 1, 1, 16, dropout=0.1, pos_encoding="rotary")
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    src, tgt = torch.randn(4, 6, 8, dtype=torch.cfloat), torch.randn(4, 5, 8, dtype=torch.cfloat)
    target = tgt.roll(1, dims=1)
    losses = []
    for _ in range(30):
        loss = (model(src, tgt, tgt_is_causal=True) - target).abs().pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]


@pytest.mark.parametrize("pos_encoding", ["learned", "sinusoidal", "rotary"])
@pytest.mark.parametrize("logits", ["modulus", "real"])
def test_nn_vit_shapes(pos_encoding, logits):
    torch.manual_seed(0)
    vit = ViT(
        8,
        4,
        in_channels=2,
        num_classes=3,
        dim=8,
        depth=1,
        heads=2,
        pos_encoding=pos_encoding,
        logits=logits,
    )
    x = torch.randn(5, 2, 8, 8, dtype=torch.cfloat)
    y = vit(x)
    assert y.shape == (5, 3) and y.dtype == torch.float32
    if logits == "modulus":
        assert (y >= 0).all()
    real_img = torch.randn(5, 2, 8, 8)  # real images are lifted (Im = 0)
    assert_close(vit(real_img), vit(real_img.to(torch.cfloat)))
    feats = ViT(8, 4, 2, 0, dim=8, depth=1, heads=2)(x)
    assert feats.shape == (5, 8) and feats.is_complex()


def test_nn_vit_patchify_matches_complex_conv():
    torch.manual_seed(0)
    vit = ViT(8, 4, in_channels=2, num_classes=3, dim=6, depth=1, heads=2)
    x = torch.randn(2, 2, 8, 8, dtype=torch.cfloat)
    tokens = vit.patch_embed(vit.patchify(x))  # (B, 4, 6)
    w = vit.patch_embed.complex_weight.reshape(6, 2, 4, 4)
    b = torch.view_as_complex(vit.patch_embed.bias)
    conv = torch.nn.functional.conv2d(x, w, b, stride=4)  # (B, 6, 2, 2), complex conv
    assert_close(tokens, conv.flatten(2).transpose(1, 2), rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- DDP


def _make_model_and_data():
    torch.manual_seed(0)
    model = cnn.Transformer(8, 2, 1, 1, 16, dropout=0.0, pos_encoding="rotary")
    g = torch.Generator().manual_seed(1)
    src = torch.randn(4, 5, 8, dtype=torch.cfloat, generator=g)
    tgt = torch.randn(4, 3, 8, dtype=torch.cfloat, generator=g)
    return model, src, tgt


def _loss(model, src, tgt):
    return (model(src, tgt, tgt_is_causal=True) - tgt).abs().pow(2).mean()


def _ddp_worker(rank: int, world: int, port: int, out_path: str) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    done, ddp, opt, loss = False, None, None, None
    try:
        model, src, tgt = _make_model_and_data()
        ddp = DDP(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.5)
        shard = slice(rank * 2, rank * 2 + 2)  # each rank sees half of the batch
        loss = _loss(ddp, src[shard], tgt[shard])
        opt.zero_grad()
        loss.backward()  # DDP all-reduces (averages) the real gradients
        opt.step()
        if rank == 0:
            torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, out_path)
        done = True
    finally:
        # the DDP reducer holds the process group: freed after the group is destroyed, it
        # destroys the group with the GIL held while a gloo thread waits for the GIL (a hang)
        ddp = opt = loss = None
        gc.collect()
        if done:
            dist.barrier()
        dist.destroy_process_group()


def test_nn_ddp_two_processes_match_one_process():
    model, src, tgt = _make_model_and_data()
    assert not any(p.is_complex() for p in model.parameters())
    before = {k: v.clone() for k, v in model.state_dict().items()}
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    loss = _loss(model, src, tgt)  # full batch: the mean of the two half-batch means
    opt.zero_grad()
    loss.backward()
    opt.step()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ddp_state.pt")
        ctx = mp.spawn(_ddp_worker, args=(2, free_local_port(), path), nprocs=2, join=False)
        deadline = time.monotonic() + 120
        while not ctx.join(timeout=1):  # raises if a rank failed
            if time.monotonic() > deadline:
                for proc in ctx.processes:
                    proc.kill()
                pytest.fail("the two DDP processes did not finish within 120 s")
        ddp_state = torch.load(path)
    changed = 0
    for k, v in model.state_dict().items():
        assert_close(ddp_state[k], v, rtol=1e-5, atol=1e-6, msg=f"parameter {k} differs")
        changed += int(not torch.equal(v, before[k]))
    assert changed > 10  # the step really updated the parameters
