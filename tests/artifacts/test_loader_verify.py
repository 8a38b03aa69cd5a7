"""Nothing loads unverified: every directory the package writes (checkpoint, final model,
tokenizer, export, adaptation, CmplxBERT) is checked against its manifest, tried as an
attacker would: a flipped byte, a deleted manifest (also with the marker deleted), a file
added after the save. Each is an error that names the file; ``verify=False`` /
``--no-verify`` reads it; a directory written by another tool loads as before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from complexformer.artifacts import detect_kind, load_artifact
from complexformer.cli import main
from complexformer.data.tokenizer import META_FILE, Tokenizer
from complexformer.lm import load_run
from complexformer.models import ComplexFormerLM
from complexformer.storage import MANIFEST, ManifestError
from complexformer.training import load_checkpoint
from tests.artifacts.test_loader import TRAIN
from tests.common_testlib import write_corpus


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    corpus = write_corpus(tmp_path_factory.mktemp("corpus"), n_lines=600)
    out = tmp_path_factory.mktemp("lm") / "run"
    assert main(["train", "--data", corpus, "--out", str(out), *TRAIN]) == 0
    return out


@pytest.fixture
def run(lm_run, tmp_path):
    """A private copy of the trained run, to damage."""
    return Path(shutil.copytree(lm_run, tmp_path / "run"))


def _flip(path: Path, offset: int = -8) -> None:
    """Flip one byte (by default in the last tensor's data, where a loader reads it
    without complaint)."""
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x5A
    path.write_bytes(bytes(data))


def _step(run: Path) -> Path:
    return sorted((run / "checkpoints").iterdir())[-1]


def _error(capsys) -> str:
    return capsys.readouterr().err


# ------------------------------------------------------------------------- final model
def test_final_model_without_manifest_and_a_flipped_byte_is_refused_by_name(lm_run, run, capsys):
    model = run / "model"
    (model / MANIFEST).unlink()
    _flip(model / "model.safetensors")
    # What the attack achieved before: unchecked, the damaged weights load without a word.
    loose = ComplexFormerLM.from_pretrained(model, verify=False)
    good = ComplexFormerLM.from_pretrained(lm_run / "model")
    assert any(
        not torch.equal(a, b) for a, b in zip(loose.parameters(), good.parameters(), strict=True)
    )
    with pytest.raises(ValueError, match=rf"{model / MANIFEST} is missing.*--no-verify"):
        load_run(model)
    with pytest.raises(ValueError, match="manifest.json is missing"):
        load_run(run)  # the run directory reads model/ too
    assert (
        main(["generate", "--model", str(model), "--prompt", "the", "--max-new-tokens", "2"]) == 2
    )
    err = _error(capsys)
    assert f"{model / MANIFEST} is missing" in err and "--no-verify" in err
    code = main(["generate", "--model", str(model), "--prompt", "the", "--max-new-tokens", "2",
                 "--no-verify", "--seed", "0"])  # fmt: skip
    assert code == 0


def test_final_model_flipped_byte_is_refused_naming_the_weights(run, capsys):
    weights = run / "model" / "model.safetensors"
    _flip(weights)
    with pytest.raises(ValueError, match=rf"{weights} is corrupted: sha256"):
        load_run(run / "model")
    assert main(["info", "--model", str(run / "model")]) == 2
    assert f"{weights} is corrupted" in _error(capsys)
    assert main(["info", "--model", str(run / "model"), "--no-verify"]) == 0


def test_a_manifest_that_omits_the_weights_is_refused(run):
    mpath = run / "model" / MANIFEST
    manifest = json.loads(mpath.read_text())
    del manifest["files"]["model.safetensors"]
    mpath.write_text(json.dumps(manifest))
    _flip(run / "model" / "model.safetensors")
    with pytest.raises(ValueError, match="model.safetensors is not listed in"):
        load_run(run / "model")


# ------------------------------------------------------------------------------ tokenizer
def test_run_tokenizer_carries_a_manifest_that_is_checked(run):
    tok = run / "tokenizer"
    manifest = json.loads((tok / MANIFEST).read_text())
    assert set(manifest["files"]) == {META_FILE, "tokenizer.json"}
    before = Tokenizer.load(tok).encode("the cat sat")
    data = json.loads((tok / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]  # swap the ids of two tokens: valid, and garbage
    first, second = (t for t, i in vocab.items() if i in (before[0], before[1]))
    vocab[first], vocab[second] = vocab[second], vocab[first]
    (tok / "tokenizer.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=rf"{tok / 'tokenizer.json'} is (truncated or )?corrupted"):
        load_run(run)
    with pytest.raises(ManifestError, match="tokenizer.json is (truncated or )?corrupted"):
        Tokenizer.load(tok)
    assert Tokenizer.load(tok, verify=False).encode("the cat sat") != before


@pytest.mark.parametrize("also_delete_marker", [False, True])
def test_run_tokenizer_without_manifest_is_refused(run, capsys, also_delete_marker):
    tok = run / "tokenizer"
    (tok / MANIFEST).unlink()
    if also_delete_marker:  # now it looks like a bare tokenizer.json of another tool
        (tok / META_FILE).unlink()
    else:
        with pytest.raises(ManifestError, match=rf"{tok / MANIFEST} is missing"):
            Tokenizer.load(tok)
    with pytest.raises(ValueError, match=rf"{tok / MANIFEST} is missing.*--no-verify"):
        load_run(run)  # the run's model is the package's: so is its tokenizer
    assert main(["info", "--model", str(run)]) == 2
    assert f"{tok / MANIFEST} is missing" in _error(capsys)
    assert main(["info", "--model", str(run), "--no-verify"]) == 0
    assert load_run(run, verify=False).tokenizer is not None


def test_a_tokenizer_file_added_after_the_save_is_refused(run):
    tok = run / "tokenizer"
    (tok / "added_tokens.json").write_text('{"<evil>": 5}')
    with pytest.raises(ValueError, match=rf"{tok / 'added_tokens.json'} is not listed"):
        load_run(run)


def test_a_tokenizer_of_another_tool_loads_as_before(tmp_path):
    transformers = pytest.importorskip("transformers")
    from tests.hf.hf_testlib import tiny_tokenizer

    tok = tiny_tokenizer()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok.backend, eos_token=tok.eos_token
    )
    fast.save_pretrained(tmp_path / "hf")  # no marker, no manifest
    assert Tokenizer.load(tmp_path / "hf").encode("the cat") == tok.encode("the cat")
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "tokenizer.json").write_text(tok.backend.to_str())
    assert Tokenizer.load(tmp_path / "bare").vocab_size == tok.vocab_size


# ---------------------------------------------------------------------------- checkpoint
def test_checkpoint_without_manifest_or_with_a_flipped_byte_is_refused(run, capsys):
    step = _step(run)
    _flip(step / "optimizer.safetensors")
    with pytest.raises(ValueError, match=rf"{step / 'optimizer.safetensors'} is corrupted"):
        load_checkpoint(step)
    assert load_checkpoint(step, verify=False).step > 0
    (step / MANIFEST).unlink()
    with pytest.raises(ValueError, match=rf"{step / MANIFEST} is missing"):
        load_run(step)
    assert main(["info", "--model", str(step)]) == 2
    assert f"{step / MANIFEST} is missing" in _error(capsys)
    assert main(["info", "--model", str(step), "--no-verify"]) == 0
    shutil.rmtree(run / "model")  # the run now has only the damaged checkpoint
    with pytest.raises(ValueError, match="no intact checkpoint"):
        load_run(run)
    assert load_run(run, verify=False).kind == "checkpoint"


def test_a_checkpoint_manifest_must_list_every_file_read(run):
    step = _step(run)
    mpath = step / MANIFEST
    manifest = json.loads(mpath.read_text())
    del manifest["files"]["state.json"]
    mpath.write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="state.json is not listed"):
        load_checkpoint(step)


# -------------------------------------------------------------------------------- export
def test_export_without_manifest_or_with_a_flipped_byte_is_refused(run, tmp_path, capsys):
    pytest.importorskip("transformers")
    out = tmp_path / "export"
    assert main(["export", "--model", str(run), "--out", str(out), "--threads", "1"]) == 0
    listed = set(json.loads((out / MANIFEST).read_text())["files"])
    assert {"config.json", "model.safetensors", "tokenizer.json", META_FILE} <= listed
    _flip(out / "tokenizer.json", offset=-40)
    with pytest.raises(ValueError, match=rf"{out / 'tokenizer.json'} is corrupted"):
        load_artifact(out)
    _flip(out / "tokenizer.json", offset=-40)  # back
    (out / MANIFEST).unlink()
    assert detect_kind(out) == "lm-model"  # without its manifest it is refused as a model
    with pytest.raises(ValueError, match=rf"{out / MANIFEST} is missing"):
        load_artifact(out)
    assert main(["export", "--model", str(out), "--out", str(tmp_path / "again")]) == 2
    assert f"{out / MANIFEST} is missing" in _error(capsys)
    assert main(["info", "--model", str(out), "--no-verify"]) == 0
    capsys.readouterr()
    assert main(["export", "--model", str(run), "--out", str(tmp_path / "b"), "--no-verify"]) == 0


def test_source_checked_by_export_and_the_cli_flags(run, tmp_path, capsys):
    pytest.importorskip("transformers")
    _flip(run / "model" / "model.safetensors")
    code = main(["export", "--model", str(run / "model"), "--out", str(tmp_path / "x")])
    assert code == 2 and "model.safetensors is corrupted" in _error(capsys)
    assert not (tmp_path / "x").exists()
    code = main(["evaluate", "--model", str(run / "model"), "--out", str(tmp_path / "e")])
    assert code == 2 and "model.safetensors is corrupted" in _error(capsys)


# ---------------------------------------------------------------------------- adaptation
def test_adaptation_refuses_a_missing_manifest_and_an_added_tokenizer_file(tmp_path):
    transformers = pytest.importorskip("transformers")
    from complexformer.retrofit import RetrofitConfig, load_adaptation, save_adaptation, to_cmha
    from tests.retrofit.retrofit_testlib import build_tiny_base

    base = build_tiny_base(tmp_path / "base")
    model = transformers.AutoModelForCausalLM.from_pretrained(base).eval()
    cfg = RetrofitConfig(base=str(base))
    to_cmha(model, trainable=cfg.trainable)
    tok = transformers.AutoTokenizer.from_pretrained(base)
    ad = save_adaptation(model, tmp_path / "ad", cfg, tokenizer=tok)
    listed = set(json.loads((ad / MANIFEST).read_text())["files"])
    assert any(f.startswith("tokenizer/") for f in listed)
    (ad / "tokenizer" / "added_tokens.json").write_text('{"<evil>": 5}')
    with pytest.raises(ValueError, match=r"tokenizer/added_tokens.json is not listed"):
        load_adaptation(ad)
    (ad / "tokenizer" / "added_tokens.json").unlink()
    _flip(ad / "adaptation.safetensors")
    with pytest.raises(ValueError, match=r"adaptation.safetensors is corrupted"):
        load_artifact(ad)
    (ad / MANIFEST).unlink()
    with pytest.raises(ValueError, match=rf"{ad / MANIFEST} is missing"):
        load_adaptation(ad)
    assert load_artifact(ad, verify=False).retrofit is not None


# ----------------------------------------------------------------------------- CmplxBERT
def test_cmplxbert_directory_carries_a_manifest_that_is_checked(tmp_path, capsys):
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from complexformer.cmplxbert import complexify, load_cmplxbert, load_hf_bert, save_cmplxbert
    from complexformer.cmplxbert.config import ComplexLoRAConfig
    from tests.cmplxbert.lora_testlib import save_tiny_bert_dir

    base = save_tiny_bert_dir(tmp_path / "bert", "BertForMaskedLM")
    model = complexify(load_hf_bert(str(base), "mlm")[0], ComplexLoRAConfig(r=2))
    cb = save_cmplxbert(model, tmp_path / "cb", base=str(base),
                        tokenizer=AutoTokenizer.from_pretrained(str(base)))  # fmt: skip
    listed = set(json.loads((cb / MANIFEST).read_text())["files"])
    assert {"cmplxbert.json", "adapter_model.safetensors", "adapter_config.json"} <= listed
    assert "vocab.txt" in listed or "tokenizer.json" in listed
    load_cmplxbert(cb)  # intact: loads
    (cb / "special_tokens_map.json").unlink(missing_ok=True)
    (cb / "added_tokens.json").write_text('{"[EVIL]": 30522}')
    with pytest.raises(ValueError, match=rf"{cb / 'added_tokens.json'} is not listed"):
        load_cmplxbert(cb)
    (cb / "added_tokens.json").unlink()
    _flip(cb / "adapter_model.safetensors")
    with pytest.raises(ValueError, match=rf"{cb / 'adapter_model.safetensors'} is corrupted"):
        load_artifact(cb)
    (cb / MANIFEST).unlink()
    assert main(["info", "--model", str(cb)]) == 2
    assert f"{cb / MANIFEST} is missing" in _error(capsys)
    assert main(["info", "--model", str(cb), "--no-verify", "--json"]) == 0
    assert main(["cbert-embeddings", "--model", str(cb), "--n", "10",
                 "--out", str(tmp_path / "emb")]) == 2  # fmt: skip
    assert f"{cb / MANIFEST} is missing" in _error(capsys)


def test_every_command_that_reads_an_artifact_has_no_verify():
    from complexformer.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name in ("generate", "evaluate", "info", "export", "train", "cbert-finetune",
                 "cbert-embeddings"):  # fmt: skip
        (flag,) = [a for a in sub.choices[name]._actions if "--no-verify" in a.option_strings]
        assert (flag.dest, flag.default, flag.const) == ("verify", True, False), name
