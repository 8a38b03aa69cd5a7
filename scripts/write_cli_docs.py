"""Write docs/cli.md from the command line's parsers (``--check``: fail when it is stale).

Usage: python scripts/write_cli_docs.py [--check]
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from complexformer.cli import build_parser
from complexformer.cli.options import VOCABULARY

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"

#: Commands and options renamed before the first release, old -> new (the old names are gone).
RENAMED_COMMANDS = {
    "complexify": "cbert-complexify",
    "finetune": "cbert-finetune",
    "analyze-embeddings": "cbert-embeddings",
}
RENAMED_OPTIONS = {
    "--ckpt": "--model",
    "--init-from": "--base",
    "--max-len": "--seq-len",
    "--lora-r": "--rank",
    "--dtype": "--set dtype=",
}

#: One example per command; each is parsed by the test of this file.
EXAMPLES = {
    "train": "complexformer train --preset tiny --out runs/cmha --max-steps 600",
    "prepare": "complexformer prepare --data text:corpus/**/*.jsonl --out data/corpus --workers 8",
    "generate": "complexformer generate --model runs/cmha --prompt 'def main():' --seed 0",
    "evaluate": "complexformer evaluate --model runs/cmha --split test",
    "info": "complexformer info --model runs/cmha",
    "export": "complexformer export --model runs/cmha --out exports/cmha",
    "retrofit": "complexformer retrofit --base smollm2 --train adaptation --out runs/rf",
    "reproduce": "complexformer reproduce --table 1 4 --scale tiny --seeds 0 1 2 --dry-run",
    "cbert-complexify": "complexformer cbert-complexify --base minilm --data stdlib "
    "--out runs/cbert8 --rank 8",
    "cbert-finetune": "complexformer cbert-finetune --model runs/cbert8/model --task docstrings "
    "--out runs/ft8",
    "cbert-predict": "complexformer cbert-predict --model runs/ft8/train/cmplxbert-seed0/model "
    "--input new.jsonl --output predictions.jsonl",
    "cbert-study": "complexformer cbert-study --base minilm --out runs/study --recipe paper",
    "cbert-start": "complexformer cbert-start --base minilm --out runs/start",
    "cbert-embeddings": "complexformer cbert-embeddings --model runs/cbert8/model",
}


def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise RuntimeError("no subcommands")


def _visible(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in p._actions
        if a.option_strings and a.dest != "help" and a.help != argparse.SUPPRESS
    ]


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def render() -> str:
    subs = subparsers()
    users: dict[str, list[str]] = {}
    for name, p in subs.items():
        for a in _visible(p):
            users.setdefault(a.option_strings[0], []).append(name)
    shared = {f for f, names in users.items() if len(names) > 1}
    lines = [
        "# Command line",
        "",
        "<!-- written by scripts/write_cli_docs.py from the parsers; do not edit by hand -->",
        "",
        "`complexformer COMMAND --help` explains every option; this page lists them all. One "
        "setting has one flag on every command:",
        "",
        "- `--model PATH` is an artifact to read (a ComplexFormer run, checkpoint or final "
        "model, a transformers export, a retrofit run or adaptation, a CmplxBERT directory); "
        "`--base MODEL` is a model to convert or start from.",
        "- Lists are written with spaces: `--seeds 0 1 2`, `--table 1 4`, `--k 1 10 100`; "
        "repeating the flag appends. A comma is refused with the spelling to use.",
        "- `--seeds` is always the list of seeds to run; `--seed` is the seed of one run.",
        "- `--preset` is a named model configuration (`train --help` lists them), `--scale` a "
        "reproduction scale (a preset with its data, budget and evaluation), `--recipe` a "
        "named set of CmplxBERT defaults (`library` or `paper`).",
        "- `--set KEY=VALUE ...` overrides any field of the configs a command builds "
        "(`NAME.KEY=VALUE` where two configs share a field); the fields are listed in each "
        "command's `--set` help.",
        "- `--config FILE` reads the same fields from a TOML file (`KEY = VALUE` lines, or "
        '`[NAME]` tables where two configs share a field; `preset = "NAME"` on `train`, '
        '`recipe = "NAME"` on the CmplxBERT commands). Later sources win: the preset or '
        "recipe, the file, the options given, `--set`.",
        "- Options that set a config field are declared by the field: their type, default "
        "and help come from the config dataclass and its `Attributes:` documentation.",
        "- The named configurations are TOML files shipped in `complexformer/configs/` "
        "(`presets.toml`, `cmplxbert_recipes.toml`), each table a base plus its differences "
        "(`extends`); a file of your own in the same format is a `--config` file.",
        "- Bad input ends with one line, `complexformer COMMAND: error: ...`, and exit status 2.",
        "",
        "Renamed before the first release (the old names are not accepted):",
        "",
        "| old | new |",
        "| --- | --- |",
    ]
    lines += [f"| `{old}` (command) | `{new}` |" for old, new in RENAMED_COMMANDS.items()]
    lines += [f"| `{old}` | `{new}` |" for old, new in RENAMED_OPTIONS.items()]
    lines += ["", "## Shared options", "", "| option | meaning | commands |", "| --- | --- | --- |"]
    for flag in sorted(shared):
        lines.append(f"| `{flag}` | {_cell(VOCABULARY[flag])} | {', '.join(users[flag])} |")
    for name, p in subs.items():
        lines += ["", f"## `complexformer {name}`", "", _cell(p.description or ""), ""]
        lines += ["```", EXAMPLES[name], "```", ""]
        own = [a for a in _visible(p) if a.option_strings[0] not in shared]
        if not own:
            lines.append("Only shared options.")
            continue
        lines += ["| option | what it sets | default |", "| --- | --- | --- |"]
        for a in own:
            default = "" if a.default in (None, False, [], argparse.SUPPRESS) else a.default
            if isinstance(default, list):
                default = " ".join(map(str, default))
            choices = f" ({', '.join(map(str, a.choices))})" if a.choices else ""
            req = " Required." if a.required else ""
            lines.append(
                f"| `{a.option_strings[0]}` | {_cell(a.help)}{choices}{req} | {_cell(default)} |"
            )
    return "\n".join(lines) + "\n"


def example_argv(command: str) -> list[str]:
    """The example of ``command`` as an argv for ``complexformer.cli.main``."""
    return shlex.split(EXAMPLES[command])[1:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write docs/cli.md from the parsers.")
    parser.add_argument("--check", action="store_true", help="fail when docs/cli.md is stale")
    check = parser.parse_args(argv).check
    text = render()
    if check:
        if not DOC.is_file() or DOC.read_text(encoding="utf-8") != text:
            print(f"{DOC} is stale: run python scripts/write_cli_docs.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
