"""The registration with transformers' auto classes is an explicit call:
``import complexformer`` installs no import hook and does not import transformers, and
``complexformer.hf.register_auto_classes()`` makes the auto classes resolve
``model_type="complexformer"``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: A tiny model of every auto class: AutoConfig.for_model, then AutoModelForCausalLM.
RESOLVE = (
    "from transformers import AutoConfig, AutoModelForCausalLM\n"
    "cfg = AutoConfig.for_model('complexformer', vocab_size=40, n_layer=1, n_head=2,"
    " d_model=16, d_ff=32)\n"
    "m = AutoModelForCausalLM.from_config(cfg)\n"
    "print(type(cfg).__name__, type(m).__name__)\n"
)


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def test_import_complexformer_installs_no_hook_and_does_not_import_transformers():
    code = (
        "import sys\n"
        "before = list(sys.meta_path)\n"
        "import complexformer\n"
        "print(sys.meta_path == before)\n"
        "print([type(f).__module__ for f in sys.meta_path])\n"
        "print('transformers' in sys.modules)\n"
    )
    r = _run(code)
    assert r.returncode == 0, r.stderr
    same, modules, transformers_imported = r.stdout.strip().splitlines()[-3:]
    assert same == "True"
    assert "complexformer" not in modules
    assert transformers_imported == "False"


def test_auto_classes_resolve_complexformer_after_register_auto_classes():
    pytest.importorskip("transformers")
    code = (
        "import complexformer\n"
        "from complexformer.hf import register_auto_classes\n"
        "register_auto_classes()\n"
        "register_auto_classes()  # idempotent\n" + RESOLVE
    )
    r = _run(code)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-2:] == ["ComplexFormerConfig", "ComplexFormerForCausalLM"]


def test_auto_classes_do_not_know_complexformer_without_the_call():
    pytest.importorskip("transformers")
    r = _run("import complexformer\n" + RESOLVE)
    assert r.returncode != 0
    assert "complexformer" in r.stderr


def test_register_after_transformers_was_imported_fills_the_causal_lm_mapping():
    pytest.importorskip("transformers")
    code = (
        "from transformers import AutoModelForCausalLM, AutoConfig\n"
        "from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING\n"
        "from complexformer.hf import register_auto_classes\n"
        "from complexformer.hf.configuration_complexformer import ComplexFormerConfig\n"
        "register_auto_classes()\n"
        "print(MODEL_FOR_CAUSAL_LM_MAPPING[ComplexFormerConfig].__name__)\n"
    )
    r = _run(code)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "ComplexFormerForCausalLM"


def test_without_transformers_the_import_works_and_the_call_names_the_extra():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] == 'transformers':\n"
        "            raise ImportError('transformers hidden for this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import complexformer\n"
        "from complexformer.hf import register_auto_classes\n"
        "try:\n"
        "    register_auto_classes()\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    r = _run(code)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "pip install 'complexformer[hf]'" in r.stdout
