"""trust_remote_code=True: the exported directory runs where complexformer cannot be imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

pytest.importorskip("transformers")

from tests.hf.hf_testlib import isolated_code  # noqa: E402

BODY = """
import json
import torch
from transformers import AutoModelForCausalLM, pipeline
model = AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True).eval()
ids = torch.tensor(IDS)
with torch.no_grad():
    logits = model(ids).logits
greedy = model.generate(ids[:1], max_new_tokens=12, do_sample=False, eos_token_id=None)
text = pipeline("text-generation", model=DIR, trust_remote_code=True)(
    "the cat", max_new_tokens=5, do_sample=False
)[0]["generated_text"]
print(json.dumps({"module": type(model).__module__, "logits": logits.tolist(),
                  "greedy": greedy.tolist(), "text": text}))
"""


@pytest.mark.parametrize("scheme", ["cmha", "sinusoidal"])
def test_remote_code_without_complexformer(exported, tmp_path, scheme):
    lm, out = exported(scheme, tie_embeddings=False)
    ids = torch.randint(
        0, lm.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0)
    )
    body = BODY.replace("DIR", repr(str(out))).replace("IDS", repr(ids.tolist()))
    env = {
        **os.environ,
        "HF_MODULES_CACHE": str(tmp_path / "modules"),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    env.pop("PYTHONPATH", None)
    r = subprocess.run(
        [sys.executable, "-I", "-S", "-c", isolated_code(body)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert not res["module"].startswith("complexformer")  # the copy beside the weights
    assert res["module"].endswith("modeling_complexformer")
    with torch.no_grad():
        ours = lm(ids).logits
    torch.testing.assert_close(torch.tensor(res["logits"]), ours, atol=1e-5, rtol=0)
    assert res["greedy"] == lm.generate(ids[:1], 12, temperature=0.0).tolist()
    assert res["text"].startswith("the cat")


def test_isolation_really_hides_complexformer(tmp_path):
    code = isolated_code("import torch, transformers\nprint('ok')")
    r = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
