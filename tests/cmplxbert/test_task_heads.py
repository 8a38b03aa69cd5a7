"""The paper's task types on CmplxBERT: token classification, pre-training (MLM + next
sentence) and sentence pairs, against the Hugging Face models they wrap (real scores and
heads reproduce them at step 0), and a modulus-mode token tagger that learns."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.cmplxbert.lora_testlib import batch, tiny_model

pytest.importorskip("transformers")

from complexformer.cmplxbert import complexify  # noqa: E402

REAL = dict(attention_score="real", head_output="real")


def test_token_classification_in_real_mode_equals_hf():
    hf = tiny_model("BertForTokenClassification", num_labels=5)
    ids, mask, tt = batch()
    labels = torch.randint(0, 5, ids.shape, generator=torch.Generator().manual_seed(1))
    labels = labels.masked_fill(mask == 0, -100)
    with torch.no_grad():
        want = hf(ids, attention_mask=mask, token_type_ids=tt, labels=labels)
        cb = complexify(hf, **REAL).eval()
        got = cb(ids, attention_mask=mask, token_type_ids=tt, labels=labels)
    assert cb.task == "token_classification" and got.logits.shape == (*ids.shape, 5)
    assert_close(got.logits, want.logits, atol=2e-5, rtol=1e-4)
    assert_close(got.loss, want.loss, atol=2e-5, rtol=1e-4)


def test_pretraining_in_real_mode_equals_hf_with_both_losses():
    hf = tiny_model("BertForPreTraining")
    ids, mask, tt = batch()
    g = torch.Generator().manual_seed(2)
    labels = torch.where(torch.rand(ids.shape, generator=g) < 0.3, ids, -100)
    nsp = torch.tensor([0, 1, 1])
    with torch.no_grad():
        want = hf(
            ids, attention_mask=mask, token_type_ids=tt, labels=labels, next_sentence_label=nsp
        )
        cb = complexify(hf, **REAL).eval()
        got = cb(
            ids, attention_mask=mask, token_type_ids=tt, labels=labels, next_sentence_label=nsp
        )
    assert cb.task == "pretraining"
    assert_close(got.logits, want.prediction_logits, atol=2e-5, rtol=1e-4)
    assert_close(got.seq_relationship_logits, want.seq_relationship_logits, atol=2e-5, rtol=1e-4)
    assert_close(got.loss, want.loss, atol=2e-5, rtol=1e-4)
    mlm_only = torch.nn.functional.cross_entropy(
        got.logits.reshape(-1, got.logits.shape[-1]), labels.reshape(-1), ignore_index=-100
    )
    nsp_only = torch.nn.functional.cross_entropy(got.seq_relationship_logits, nsp)
    assert_close(got.loss, mlm_only + nsp_only)  # both losses, summed as HF does
    assert nsp_only > 0.05 and mlm_only > 0.05
    with torch.no_grad():
        no_nsp = cb(ids, attention_mask=mask, token_type_ids=tt, labels=labels)
    assert no_nsp.loss is None and no_nsp.seq_relationship_logits is not None


def test_pretraining_heads_get_adapters_and_the_nsp_head_trains():
    cb = complexify(tiny_model("BertForPreTraining"), r=2)
    names = {n for n, p in cb.named_parameters() if p.requires_grad}
    nsp = {"cls.seq_relationship.lora_A", "cls.seq_relationship.lora_B"}
    assert nsp | {"cls.seq_relationship.bias_c"} <= names
    assert any(n.startswith("cls.predictions.decoder.lora_") for n in names)


def _pair_model():
    hf = tiny_model("BertForSequenceClassification", num_labels=3)
    with torch.no_grad():  # segment embeddings as large as BERT's trained ones (not 0.02)
        hf.bert.embeddings.token_type_embeddings.weight.normal_(0.0, 1.0)
    return hf


def test_pair_inputs_follow_hf_in_real_mode_and_change_the_modulus_output():
    ids, mask, tt = batch()  # tt: segment A, then segment B from the middle
    zeros = torch.zeros_like(tt)
    hf = _pair_model()
    with torch.no_grad():
        want = [hf(ids, attention_mask=mask, token_type_ids=t) for t in (tt, zeros)]
        want_h = [hf.bert(ids, attention_mask=mask, token_type_ids=t)[0] for t in (tt, zeros)]
        cb = complexify(hf, **REAL).eval()
        got = [cb(ids, attention_mask=mask, token_type_ids=t) for t in (tt, zeros)]
    for g, w, wh in zip(got, want, want_h, strict=True):
        assert_close(g.logits, w.logits, atol=2e-5, rtol=1e-4)
        assert_close(g.last_hidden_state.real, wh, atol=2e-5, rtol=1e-4)
    seg_b = (tt == 1) & (mask == 1)
    assert (want_h[0] - want_h[1])[seg_b].abs().max() > 0.1
    cb = complexify(_pair_model(), r=2).eval()  # the paper's modulus scores and heads
    with torch.no_grad():
        a = cb(ids, attention_mask=mask, token_type_ids=tt)
        b = cb(ids, attention_mask=mask, token_type_ids=zeros)
    assert (a.last_hidden_state - b.last_hidden_state)[seg_b].abs().max() > 0.1
    assert (a.logits - b.logits).abs().max() > 0  # and, through attention, the head


def test_modulus_token_tagger_learns_a_tiny_bio_task():
    """Tag B-X on token id 7, I-X on the token after it, O elsewhere: the modulus-mode
    model's training loss falls by half within 40 steps."""
    hf = tiny_model("BertForTokenClassification", num_labels=3, hidden_dropout_prob=0.0)
    cb = complexify(hf, r=4).train()
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(8, 99, (16, 12), generator=g)
    for row in range(16):
        ids[row, row % 10] = 7
    tags = torch.zeros_like(ids)
    tags[ids == 7] = 1
    tags[:, 1:][ids[:, :-1] == 7] = 2
    params = [p for p in cb.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.0)
    losses = []
    torch.manual_seed(0)
    for _ in range(40):
        loss = cb(ids, labels=tags).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses[::8]
