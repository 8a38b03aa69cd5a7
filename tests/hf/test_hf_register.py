"""``import complexformer`` registers with the auto classes without importing transformers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def test_import_complexformer_does_not_import_transformers():
    r = _run("import sys, complexformer; print('transformers' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_auto_classes_know_complexformer_after_import():
    pytest.importorskip("transformers")
    code = (
        "import complexformer\n"
        "from transformers import AutoConfig, AutoModelForCausalLM\n"
        "cfg = AutoConfig.for_model('complexformer', vocab_size=40, n_layer=1, n_head=2,"
        " d_model=16, d_ff=32)\n"
        "m = AutoModelForCausalLM.from_config(cfg)\n"
        "print(type(cfg).__name__, type(m).__name__)\n"
    )
    r = _run(code)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-2:] == ["ComplexFormerConfig", "ComplexFormerForCausalLM"]


def test_registration_when_transformers_was_imported_first():
    pytest.importorskip("transformers")
    code = (
        "from transformers import AutoModelForCausalLM, AutoConfig\n"
        "import complexformer\n"
        "from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING\n"
        "from complexformer.hf.configuration_complexformer import ComplexFormerConfig\n"
        "print(MODEL_FOR_CAUSAL_LM_MAPPING[ComplexFormerConfig].__name__)\n"
    )
    r = _run(code)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "ComplexFormerForCausalLM"


def test_import_complexformer_without_transformers():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] == 'transformers':\n"
        "            raise ImportError('transformers hidden for this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import complexformer\n"
        "try:\n"
        "    import transformers\n"
        "except ImportError:\n"
        "    print('ok')\n"
    )
    r = _run(code)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "ok"
