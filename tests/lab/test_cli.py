"""The lab's commands reach ``complexformer`` through the ``complexformer.commands``
entry-point group, after the library's own; a provider that fails to load is left out with
one warning and the library's commands go on."""

from __future__ import annotations

import argparse
from importlib.metadata import EntryPoint

from complexformer.cli import COMMANDS_GROUP, build_parser
from complexformer.runtime import plugins

LIBRARY = ("train", "prepare", "generate", "evaluate", "info", "export", "retrofit",
           "cbert-complexify", "cbert-predict")  # fmt: skip
LAB = ("reproduce", "cbert-finetune", "cbert-study", "cbert-start", "cbert-embeddings")


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def test_the_lab_is_an_entry_point_and_its_commands_follow_the_library_s():
    names = {ep.name: ep.value for ep in plugins.entry_points(group=COMMANDS_GROUP)}
    assert names.get("lab") == "complexformer_lab.cli:add_parsers"
    assert _commands(build_parser()) == [*LIBRARY, *LAB]


def test_a_broken_provider_warns_once_and_the_commands_go_on(monkeypatch, capsys):
    real = list(plugins.entry_points(group=COMMANDS_GROUP))
    broken = EntryPoint("broken", "no_such_module_of_complexformer:add_parsers", COMMANDS_GROUP)
    original = plugins.entry_points
    monkeypatch.setattr(
        plugins,
        "entry_points",
        lambda group: [broken, *real] if group == COMMANDS_GROUP else original(group=group),
    )
    monkeypatch.setattr(plugins, "_warned", set())
    for _ in range(2):
        parser = build_parser()
        assert _commands(parser) == [*LIBRARY, *LAB]
    err = capsys.readouterr().err
    assert err.count("warning") == 1, err
    assert "'broken'" in err and "no_such_module_of_complexformer" in err
    assert parser.parse_args(["info", "--model", "x"]).command == "info"


def test_without_providers_the_library_s_commands_stand_alone(monkeypatch):
    original = plugins.entry_points
    monkeypatch.setattr(
        plugins,
        "entry_points",
        lambda group: [] if group == COMMANDS_GROUP else original(group=group),
    )
    assert _commands(build_parser()) == list(LIBRARY)
