"""CmplxBERT as transformers classes: outputs equal to the CmplxBert's, save_pretrained and
Auto loading round trips, peft's conventions (trainable parameters, adapter-only files on
top of the base, merge_and_unload) and the four pipelines against our own outputs."""

from __future__ import annotations

import json

import pytest
import torch
from torch.testing import assert_close

pytest.importorskip("transformers")

from complexformer.cmplxbert import complexify, save_cmplxbert, trainable_parameter_counts  # noqa: E402
from tests.cmplxbert.lora_testlib import batch, save_tiny_bert_dir, tiny_model  # noqa: E402

KINDS = {
    "BertModel": ("AutoModel", "last_hidden_state"),
    "BertForMaskedLM": ("AutoModelForMaskedLM", "logits"),
    "BertForPreTraining": ("AutoModelForPreTraining", "prediction_logits"),
    "BertForSequenceClassification": ("AutoModelForSequenceClassification", "logits"),
    "BertForTokenClassification": ("AutoModelForTokenClassification", "logits"),
}


def _trained(model, seed: int = 0):
    """Move every trainable tensor off its start, as training would."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.05 * torch.randn(p.shape, generator=g))
    return model


def _cmplx(kind: str, **kw):
    extra = {"num_labels": 3} if "Classification" in kind else {}
    return _trained(complexify(tiny_model(kind, **extra), r=2, **kw)).eval()


@pytest.mark.parametrize("kind", list(KINDS))
def test_classes_equal_the_cmplxbert_and_round_trip_through_auto(tmp_path, kind):
    import transformers

    from complexformer.hf.cmplxbert import to_transformers

    ids, mask, tt = batch()
    model = _cmplx(kind)
    hf = to_transformers(model).eval()
    assert type(hf).__name__ == "CmplxBert" + kind.removeprefix("Bert")
    with torch.no_grad():
        ref = model(ids, attention_mask=mask, token_type_ids=tt, output_hidden_states=True)
        out = hf(input_ids=ids, attention_mask=mask, token_type_ids=tt, output_hidden_states=True)
    auto, field = KINDS[kind]
    mine = ref.last_hidden_state if field == "last_hidden_state" else ref.logits
    assert_close(out[field], mine, rtol=0, atol=0)
    assert len(out.hidden_states) == 3
    for a, b in zip(out.hidden_states, ref.hidden_states, strict=True):
        assert_close(a, b, rtol=0, atol=0)
    if kind == "BertForPreTraining":
        assert_close(out.seq_relationship_logits, ref.seq_relationship_logits)
    if kind == "BertForSequenceClassification":  # the loss is BERT's cross-entropy
        y = torch.tensor([0, 2, 1])
        loss = hf(input_ids=ids, attention_mask=mask, labels=y).loss
        logits = hf(input_ids=ids, attention_mask=mask).logits
        assert_close(loss, torch.nn.functional.cross_entropy(logits, y))
    with pytest.raises(ValueError, match="output_attentions"):
        hf(input_ids=ids, output_attentions=True)
    # save_pretrained: safetensors + manifest; the Auto class loads it back bit for bit
    d = tmp_path / "hf"
    hf.save_pretrained(d)
    names = sorted(p.name for p in d.iterdir())
    assert names == ["config.json", "manifest.json", "model.safetensors"]
    manifest = json.loads((d / "manifest.json").read_text())
    assert set(manifest["files"]) == {"config.json", "model.safetensors"}
    assert json.loads((d / "config.json").read_text())["model_type"] == "cmplxbert"
    back = getattr(transformers, auto).from_pretrained(d).eval()
    assert type(back) is type(hf)
    with torch.no_grad():
        again = back(input_ids=ids, attention_mask=mask, token_type_ids=tt)
    assert_close(again[field], out[field], rtol=0, atol=0)
    assert trainable_parameter_counts(back) == trainable_parameter_counts(hf)


def test_wrong_class_is_refused_by_name():
    from complexformer.hf.cmplxbert import CmplxBertForSequenceClassification

    with pytest.raises(ValueError, match="this one is 'mlm': use CmplxBertForMaskedLM"):
        CmplxBertForSequenceClassification.from_cmplxbert(_cmplx("BertForMaskedLM"))


def test_peft_conventions_adapters_on_the_base_and_merge(tmp_path, capsys):
    from complexformer.hf.cmplxbert import CmplxBertForSequenceClassification, to_transformers

    base = save_tiny_bert_dir(tmp_path / "bert", "BertModel")
    from complexformer.cmplxbert import load_hf_bert

    real, _ = load_hf_bert(str(base), "classification", 3)
    model = _trained(complexify(real, r=2))
    model.classifier.base_layer.requires_grad_(True)
    hf = to_transformers(model).eval()
    line = hf.print_trainable_parameters()
    t, a = trainable_parameter_counts(model)
    assert line == f"CmplxBERTLoRA_2: trainable params: {t:,} || all params: {a:,} || " + (
        f"trainable%: {100 * t / a:.4f}"
    )
    assert capsys.readouterr().out.strip() == line
    assert hf.get_nb_trainable_parameters() == (t, a)
    # adapter-only save: only what trains, loaded back on top of the base's path
    ad = hf.save_adapters(tmp_path / "adapters")
    from safetensors import safe_open

    with safe_open(str(ad / "adapter_model.safetensors"), "pt") as f:
        keys = set(f.keys())
    trains = {n for n, p in model.named_parameters() if p.requires_grad}
    assert keys == trains  # the frozen real weights are not in the file
    back = CmplxBertForSequenceClassification.from_adapters(ad).eval()
    assert back.config.base_model_name_or_path == str(base)
    ids, mask, tt = batch(vocab=1000)
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits
        assert_close(back(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits, ref)
        merged = hf.merge_and_unload()
        folded = merged(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits
    assert merged is hf and not any(p.requires_grad for p in hf.parameters())
    assert_close(folded, ref, atol=1e-5, rtol=1e-5)
    assert all(m.merged for _, m in __import__(
        "complexformer.cmplxbert", fromlist=["complex_lora_layers"]
    ).complex_lora_layers(hf))  # fmt: skip


def test_kept_fine_tuned_directory_becomes_a_transformers_model(tmp_path):
    from complexformer.cmplxbert import load_cmplxbert
    from complexformer.hf.cmplxbert import CmplxBertForSequenceClassification

    base = save_tiny_bert_dir(tmp_path / "bert", "BertModel")
    real, _ = tiny_model("BertModel"), None
    from complexformer.cmplxbert import load_hf_bert

    real, _ = load_hf_bert(str(base), "classification", 2)
    model = _trained(complexify(real, r=2))
    model.classifier.base_layer.requires_grad_(True)
    model.pooling = "mean"
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(base))
    d = save_cmplxbert(model, tmp_path / "kept", str(base), tok,
                       extra={"labels": ["neg", "pos"], "num_labels": 2})  # fmt: skip
    hf = CmplxBertForSequenceClassification.from_cmplxbert_dir(d).eval()
    assert hf.config.id2label == {0: "neg", 1: "pos"} and hf.config.pooling == "mean"
    ref = load_cmplxbert(d)[0].eval()
    ids, mask, tt = batch(vocab=1000)
    with torch.no_grad():
        assert_close(hf(input_ids=ids, attention_mask=mask).logits,
                     ref(ids, attention_mask=mask).logits, rtol=0, atol=0)  # fmt: skip


def test_pipelines_give_the_models_own_outputs(tmp_path):
    from transformers import AutoTokenizer, pipeline

    from complexformer.cmplxbert import load_hf_bert
    from complexformer.hf.cmplxbert import to_transformers

    base = save_tiny_bert_dir(tmp_path / "bert", "BertModel")
    tok = AutoTokenizer.from_pretrained(str(base))
    text = "the parser reads a file"

    def ours(model, enc):
        with torch.no_grad():
            return model.eval()(**enc)

    # text classification: the softmax of the logits, labels from id2label
    real, _ = load_hf_bert(str(base), "classification", 3)
    seq = to_transformers(_trained(complexify(real, r=2))).eval()
    seq.config.id2label = {0: "a", 1: "b", 2: "c"}
    seq.save_pretrained(tmp_path / "seq")
    tok.save_pretrained(tmp_path / "seq")
    got = pipeline("text-classification", model=str(tmp_path / "seq"), top_k=None)([text])[0]
    probs = torch.softmax(ours(seq, tok(text, return_tensors="pt")).logits[0], -1)
    assert {r["label"]: r["score"] for r in got} == pytest.approx(
        {n: float(probs[i]) for i, n in seq.config.id2label.items()}, abs=1e-6
    )
    # token classification: the argmax tag of each token and its probability
    real, _ = load_hf_bert(str(base), "token_classification", 3)
    tagger = to_transformers(_trained(complexify(real, r=2))).eval()
    tagger.config.id2label = {0: "O", 1: "B-X", 2: "I-X"}
    pipe = pipeline("token-classification", model=tagger, tokenizer=tok)
    got = pipe(text)
    enc = tok(text, return_tensors="pt")
    p = torch.softmax(ours(tagger, enc).logits[0], -1)
    want = [(i, tagger.config.id2label[int(p[i].argmax())], float(p[i].max()))
            for i in range(1, enc["input_ids"].shape[1] - 1)]  # fmt: skip
    want = [w for w in want if w[1] != "O"]
    assert [(r["index"], r["entity"]) for r in got] == [(i, e) for i, e, _ in want]
    assert [r["score"] for r in got] == pytest.approx([s for *_, s in want], abs=1e-6)
    # fill-mask: the top tokens of the MLM logits at [MASK]
    mlm = to_transformers(_cmplx_mlm(base)).eval()
    masked = f"the parser {tok.mask_token} a file"
    got = pipeline("fill-mask", model=mlm, tokenizer=tok, top_k=3)(masked)
    enc = tok(masked, return_tensors="pt")
    at = int((enc["input_ids"][0] == tok.mask_token_id).nonzero())
    p = torch.softmax(ours(mlm, enc).logits[0, at], -1)
    top = p.topk(3)
    assert [r["token"] for r in got] == top.indices.tolist()
    assert [r["score"] for r in got] == pytest.approx(top.values.tolist(), abs=1e-6)
    # feature extraction: the complex last hidden states
    enc_model = to_transformers(_trained(complexify(load_hf_bert(str(base), "base")[0], r=2)))
    got = pipeline("feature-extraction", model=enc_model.eval(), tokenizer=tok)(text)
    h = ours(enc_model, tok(text, return_tensors="pt")).last_hidden_state
    assert_close(torch.tensor(got), h, atol=1e-6, rtol=1e-6)


def _cmplx_mlm(base):
    from complexformer.cmplxbert import load_hf_bert

    real, _ = load_hf_bert(str(base), "base")
    from transformers import BertForMaskedLM

    mlm = BertForMaskedLM(real.config)
    mlm.bert.load_state_dict(real.state_dict(), strict=False)
    return _trained(complexify(mlm.eval(), r=2))
