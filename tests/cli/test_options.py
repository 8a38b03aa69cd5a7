"""One command-line vocabulary: every subcommand's flags come from ``cli.options.VOCABULARY``
(one meaning per flag), no flag is hidden, the names renamed before the first release are
gone, lists are space-separated and ``--seeds`` is always a list."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from complexformer.cli import build_parser, main
from complexformer.cli.options import VOCABULARY


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


SUBS = _subparsers()


def _options(p: argparse.ArgumentParser):
    for a in p._actions:
        if a.option_strings and a.dest != "help":
            yield a


@pytest.mark.parametrize("command", sorted(SUBS))
def test_every_flag_is_in_the_vocabulary(command):
    for action in _options(SUBS[command]):
        for flag in action.option_strings:
            assert action.help != argparse.SUPPRESS, f"{command}: {flag} is hidden"
            assert flag in VOCABULARY, f"{command}: {flag} is outside the vocabulary"


@pytest.mark.parametrize("command", sorted(SUBS))
def test_one_name_per_setting(command):
    visible: dict[str, list[str]] = {}
    for action in _options(SUBS[command]):
        assert len(action.option_strings) == 1, f"{command}: {action.option_strings}"
        visible.setdefault(action.dest, []).extend(action.option_strings)
    twice = {dest: flags for dest, flags in visible.items() if len(flags) > 1}
    assert not twice, f"{command}: two flags for one setting: {twice}"


def test_vocabulary_has_one_flag_per_meaning():
    meanings: dict[str, str] = {}
    for flag, meaning in VOCABULARY.items():
        assert meaning not in meanings, f"{flag} and {meanings[meaning]} mean the same"
        meanings[meaning] = flag


@pytest.mark.parametrize("command", sorted(SUBS))
def test_lists_are_space_separated_and_seeds_a_list(command):
    for action in _options(SUBS[command]):
        repeated = isinstance(action, argparse._AppendAction)
        spaced = isinstance(action, argparse._ExtendAction) and action.nargs == "+"
        assert spaced or not repeated, (
            f"{command}: {action.option_strings} is a repeated flag; lists take spaces"
        )
        if action.option_strings == ["--seeds"]:
            assert action.nargs == "+", f"{command}: --seeds must be a list"


def test_renamed_commands_and_options_are_gone(capsys):
    docs = _cli_docs()
    for old, new in docs.RENAMED_COMMANDS.items():
        assert new in SUBS and old not in SUBS
        with pytest.raises(SystemExit) as e:
            main([old, "--help"])
        assert e.value.code == 2
        assert f"invalid choice: '{old}'" in capsys.readouterr().err
    for old, new in docs.RENAMED_OPTIONS.items():
        assert old not in VOCABULARY and new.split()[0] in VOCABULARY, (old, new)
    for argv in (
        ["generate", "--model", "m", "--ckpt", "x"],
        ["train", "--out", "o", "--max-len", "8"],
    ):
        with pytest.raises(SystemExit):
            main(argv)
        assert "unrecognized arguments" in capsys.readouterr().err
    args = build_parser().parse_args(["evaluate", "--model", "a", "--model", "b"])
    assert args.model == ["a", "b"]


def test_a_missing_model_is_named(capsys):
    with pytest.raises(SystemExit) as e:
        main(["info"])
    assert e.value.code == 2
    assert "complexformer info: error: the following arguments are required: --model" in (
        capsys.readouterr().err
    )


def test_seeds_are_a_list_everywhere():
    p = build_parser()
    assert p.parse_args(["reproduce", "--seeds", "3"]).seeds == [3]
    assert p.parse_args(["reproduce", "--seeds", "0", "1", "2"]).seeds == [0, 1, 2]
    assert p.parse_args(["cbert-finetune", "--base", "x", "--seeds", "3"]).seeds == [3]


def test_a_comma_in_a_list_is_refused_with_the_spelling(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["reproduce", "--seeds", "0,1"])
    assert "write 0 1" in capsys.readouterr().err


def test_unknown_option_names_the_subcommand(capsys):
    with pytest.raises(SystemExit) as e:
        main(["info", "--model", "x", "--bogus"])
    assert e.value.code == 2
    assert "complexformer info: error: unrecognized arguments: --bogus" in capsys.readouterr().err


def _cli_docs():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "write_cli_docs.py"
    spec = importlib.util.spec_from_file_location("write_cli_docs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_cli_lists_every_option_and_is_current():
    docs = _cli_docs()
    assert docs.render() == docs.DOC.read_text(encoding="utf-8"), (
        "docs/cli.md is stale: run python scripts/write_cli_docs.py"
    )
    text = docs.DOC.read_text(encoding="utf-8")
    for name, p in SUBS.items():
        assert f"## `complexformer {name}`" in text
        for action in _options(p):
            assert f"`{action.option_strings[0]}`" in text, (name, action.option_strings)


@pytest.mark.parametrize("command", sorted(SUBS))
def test_each_command_has_an_example_that_parses(command):
    docs = _cli_docs()
    args = build_parser().parse_args(docs.example_argv(command))
    assert args.command == command


def test_set_reaches_the_configs_of_reproduce_and_retrofit():
    from complexformer.cli.options import build_configs
    from complexformer.retrofit.config import RetrofitConfig
    from complexformer.training import TrainConfig
    from complexformer_lab.reproduce.cli import scale_of

    p = build_parser()
    args = p.parse_args(["reproduce", "--set", "dropout=0.2", "lr=3e-4", "--max-steps", "7"])
    scale = scale_of(args)
    assert scale.model["dropout"] == scale.gpt2_model["dropout"] == 0.2
    assert (scale.train["lr"], scale.train["max_steps"]) == (3e-4, 7)
    args = p.parse_args(["retrofit", "--out", "o", "--bf16", "--set", "gqa=query", "lr=0.5"])
    kw = build_configs(args, {"retrofit": RetrofitConfig, "train": TrainConfig})
    assert kw["retrofit"]["gqa"] == "query" and kw["train"]["lr"] == 0.5
    with pytest.raises(ValueError, match="did you mean 'lr'"):
        build_configs(p.parse_args(["train", "--out", "o", "--set", "lrr=1"]),
                      {"train": TrainConfig})  # fmt: skip


def test_evaluate_set_reaches_fields_without_an_option():
    from complexformer.evaluation.cli import register_suites, suite_overrides
    from complexformer.evaluation.suite import get_suite

    register_suites()
    heads, text = get_suite("heads"), get_suite("text")
    args = build_parser().parse_args(
        ["evaluate", "--model", "r", "--set", "block_len=32", "text.num_prompts=3"]
    )
    got = suite_overrides(args, [heads, text])
    assert got == {"heads": {"block_len": 32}, "text": {"num_prompts": 3}}
    assert heads.config_from_args(args).replace(**got["heads"]).block_len == 32
    with pytest.raises(ValueError, match="block_lne"):
        suite_overrides(build_parser().parse_args(["evaluate", "--model", "r", "--set",
                                                   "block_lne=3"]), [heads])  # fmt: skip


def _flag_literals(tree: ast.AST):
    """The flags a module writes out: the first argument of ``add_argument`` and of a suite's
    ``option``, and the flags of ``flags=`` and ``*_FLAGS`` tables of ``add_fields``."""
    for node in ast.walk(tree):
        found: list[ast.AST] = []
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            if name in ("add_argument", "option") and node.args:
                found.append(node.args[0])
            for kw in node.keywords:
                if kw.arg == "flags" and isinstance(kw.value, ast.Dict):
                    found += kw.value.values
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            if any(isinstance(t, ast.Name) and t.id.endswith("FLAGS") for t in node.targets):
                found += node.value.values
        for value in found:
            if isinstance(value, ast.Constant) and str(value.value).startswith("--"):
                yield value.value, value.lineno


def test_no_flag_is_declared_in_two_places():
    """Each flag is written out once in the package and the lab: by a config field (through
    ``add_fields``), by one shared definition in cli/options.py, or by the one command that
    has it. The shared definitions count once, wherever they are used."""
    import complexformer
    import complexformer_lab

    sites: dict[str, set[str]] = {}
    for package in (complexformer, complexformer_lab):
        root = Path(package.__file__).parent
        for path in sorted(root.rglob("*.py")):
            shared = path.relative_to(root).as_posix() == "cli/options.py"
            for flag, line in _flag_literals(ast.parse(path.read_text(encoding="utf-8"))):
                where = "cli/options.py" if shared else f"{path.relative_to(root.parent)}:{line}"
                sites.setdefault(flag, set()).add(where)
    assert len(sites) > 40, "the scan found too few flags to be reading the parsers"
    twice = {flag: sorted(where) for flag, where in sites.items() if len(where) > 1}
    assert not twice, f"flags declared in more than one place: {twice}"


def test_the_scan_finds_a_flag_declared_twice():
    tree = ast.parse(
        "p.add_argument('--lr', type=float)\n"
        "q.add_argument('--lr', type=float)\n"
        "add_fields(p, C, 'r', flags={'r': '--rank'})\n"
    )
    assert sorted(_flag_literals(tree)) == [("--lr", 1), ("--lr", 2), ("--rank", 3)]


def _scaled(x: float, factor: float = 2.0, *, verbose: bool = True) -> float:
    """A documented function whose parameters become options.

    Args:
        x: the value.
        factor: what x is multiplied by.
        verbose: print what is done.
    """
    return x * factor


def test_add_fields_declares_a_functions_parameters_with_their_defaults():
    from complexformer.cli.options import add_fields

    p = argparse.ArgumentParser()
    add_fields(p, _scaled, "x", "factor", required=("x",))
    add_fields(p, _scaled, "verbose", flags={"verbose": "--no-verbose"})
    args = p.parse_args(["--x", "3"])
    assert (args.x, args.factor, args.verbose) == (3.0, 2.0, True)
    assert p.parse_args(["--x", "1", "--no-verbose", "--factor", "4"]).verbose is False
    helps = {a.dest: a.help for a in p._actions}
    assert helps["factor"] == "what x is multiplied by; default 2.0"
    assert helps["verbose"] == "turn verbose off (print what is done); default true"
    with pytest.raises(SystemExit):
        p.parse_args([])  # --x is required


def test_add_fields_leaves_a_config_fields_default_to_the_config():
    from complexformer.cli.options import add_fields
    from complexformer.cmplxbert.config import ComplexLoRAConfig

    p = argparse.ArgumentParser()
    add_fields(p, ComplexLoRAConfig, "r", "target_modules")
    args = p.parse_args([])
    assert (args.r, args.target_modules) == (None, None)  # the recipe or the config decides
    help_of = {a.dest: a.help for a in p._actions}
    assert help_of["r"].endswith("; default 8")
    assert "word_embeddings" in help_of["target_modules"]  # a default_factory's value is said
    assert p.parse_args(["--rank", "4", "--target-modules", "query", "value"]).r == 4
