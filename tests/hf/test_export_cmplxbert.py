"""``complexformer export`` of CmplxBERT directories: the export loads with
``AutoModelFor...from_pretrained(DIR, trust_remote_code=True)`` in a process where
complexformer cannot be imported, and its outputs equal the package's (1e-5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.testing import assert_close

pytest.importorskip("transformers")

from complexformer.cli import main  # noqa: E402
from complexformer.cmplxbert import complexify, load_cmplxbert, load_hf_bert, save_cmplxbert  # noqa: E402
from tests.cmplxbert.lora_testlib import save_tiny_bert_dir  # noqa: E402
from tests.hf.test_cmplxbert import _trained  # noqa: E402

#: The tasks exported and loaded in the process without complexformer (every class is
#: compared in process below).
TASKS = {
    "classification": "AutoModelForSequenceClassification",
    "mlm": "AutoModelForMaskedLM",
}

BLOCKED = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "complexformer" or name.startswith("complexformer."):
                raise ImportError("complexformer is blocked in this process")
            return None

    sys.meta_path.insert(0, Block())
    try:
        import complexformer  # noqa: F401
        raise SystemExit("complexformer was importable")
    except ImportError:
        pass
    import torch, transformers
    jobs = json.loads(sys.argv[1])
    out = {}
    for task, (auto, path) in jobs.items():
        model = getattr(transformers, auto).from_pretrained(path, trust_remote_code=True).eval()
        tok = transformers.AutoTokenizer.from_pretrained(path, trust_remote_code=True)
        enc = tok(["the parser reads a file", "a path"], padding=True, return_tensors="pt")
        with torch.no_grad():
            out[task] = model(**enc).logits.tolist()
        out[task + ":class"] = type(model).__module__
    print(json.dumps(out))
    """
)


def _kept(tmp_path, base, task):
    n = 3 if "classification" in task else None
    real, new_head = load_hf_bert(str(base), task, n)
    model = complexify(real, r=2, add_mlm_head=new_head)
    if n:  # a fine-tuned classifier's new head trains, and is saved (as cbert-finetune's)
        model.classifier.base_layer.requires_grad_(True)
    model = _trained(model)
    if task == "classification":
        model.pooling = "mean"
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(base))
    extra = {"labels": ["a", "b", "c"], "num_labels": 3} if n else {}
    return save_cmplxbert(model, tmp_path / task, str(base), tok, extra=extra)


def test_export_loads_without_complexformer_and_equals_ours(tmp_path, capsys):
    base = save_tiny_bert_dir(tmp_path / "bert", "BertModel")
    jobs, ours = {}, {}
    for task, auto in TASKS.items():
        src = _kept(tmp_path, base, task)
        out = tmp_path / f"export-{task}"
        assert main(["export", "--model", str(src), "--out", str(out)]) == 0
        names = {p.name for p in out.iterdir()}
        assert {"config.json", "model.safetensors", "manifest.json", "modeling_cmplxbert.py",
                "configuration_cmplxbert.py", "tokenizer.json"} <= names  # fmt: skip
        assert json.loads((out / "manifest.json").read_text())["kind"] == "cmplxbert-export"
        jobs[task] = (auto, str(out))
        model, tok, _ = load_cmplxbert(src)
        enc = tok(["the parser reads a file", "a path"], padding=True, return_tensors="pt")
        with torch.no_grad():
            ours[task] = model.eval()(**enc).logits
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "hf_modules"), "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)  # the package must not be found
    proc = subprocess.run(
        [sys.executable, "-c", BLOCKED, json.dumps(jobs)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    for task in TASKS:
        assert got[task + ":class"].startswith("transformers_modules")
        assert_close(torch.tensor(got[task]), ours[task], atol=1e-5, rtol=1e-5)
    # a second export over the first replaces it; another non-empty folder is refused
    src = tmp_path / "classification"
    assert main(["export", "--model", str(src), "--out", str(tmp_path / "export-mlm")]) == 0
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    capsys.readouterr()
    assert main(["export", "--model", str(src), "--out", str(other)]) != 0
    assert "not a CmplxBERT export" in capsys.readouterr().err
    assert (other / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize(
    "kind, variant",
    [
        ("BertModel", {}),
        ("BertForMaskedLM", {}),
        ("BertForPreTraining", {}),
        ("BertForSequenceClassification", {}),
        ("BertForTokenClassification", {}),
        ("BertForSequenceClassification", dict(attention_score="real", head_output="real",
                                               whiten="full", activation="split")),
        ("BertForMaskedLM", dict(heads="linear", activation="split")),
    ],
)  # fmt: skip
def test_self_contained_classes_equal_the_package(tmp_path, kind, variant):
    """modeling_cmplxbert.py (what an export runs) against the package's classes, every
    task and the choices that change the forward pass: outputs and hidden states."""
    import complexformer.hf.modeling_cmplxbert as remote
    from complexformer.hf.cmplxbert import to_transformers
    from tests.cmplxbert.lora_testlib import batch
    from tests.hf.test_cmplxbert import _cmplx

    ids, mask, tt = batch()
    hf = to_transformers(_cmplx(kind, **variant)).eval()
    hf.save_pretrained(tmp_path)
    cls = getattr(remote, type(hf).__name__)
    other = cls.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        a = hf(input_ids=ids, attention_mask=mask, token_type_ids=tt, output_hidden_states=True)
        b = other(input_ids=ids, attention_mask=mask, token_type_ids=tt, output_hidden_states=True)
    assert_close(b[0], a[0], atol=1e-5, rtol=1e-5)
    for x, y in zip(b.hidden_states, a.hidden_states, strict=True):
        assert_close(x, y, atol=1e-5, rtol=1e-5)
