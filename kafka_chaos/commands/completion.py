"""`kafka-chaos completion bash|zsh`: the shell's completion script, generated from the
argument parser itself by shtab, so every sub-command and option completes as `--help` lists
it; file and folder arguments complete as paths."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.settings import Settings
from kafka_chaos.commands.common import EXIT_OK

NAME = "completion"
HELP = "print the shell completion script (bash or zsh)"
SHELLS = ("bash", "zsh")
# Arguments that name folders whatever their type: run directories (or a parent), --runs-dir.
FOLDERS = ("runs", "runs_dir")
# Where each shell picks the printed script up (the docs say the same: docs/cli.md).
INSTALL = {
    "bash": "kafka-chaos completion bash > ~/.local/share/bash-completion/completions/kafka-chaos",
    "zsh": "kafka-chaos completion zsh > ~/.zfunc/_kafka-chaos  (with fpath+=~/.zfunc in ~/.zshrc)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The shell."""
    parser.add_argument(
        "shell",
        choices=SHELLS,
        help="; ".join(f"{shell}: {line}" for shell, line in INSTALL.items()),
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the script for args.shell on stdout, of the command line args.parser (the whole
    parser, which kafka_chaos.cli hands every command)."""
    print(script(args.shell, args.parser), end="")
    return EXIT_OK


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script of the command line `parser` for `shell`."""
    import shtab

    _complete_paths(parser, shtab)
    return shtab.complete(parser, shell=shell)


def _complete_paths(parser: argparse.ArgumentParser, shtab) -> None:
    """Mark the arguments that name files (a Path type: experiment files, property files) or
    folders (metavar DIR, FOLDERS) for the shell to complete as such, in every sub-command."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                _complete_paths(sub, shtab)
        elif action.metavar == "DIR" or action.dest in FOLDERS:
            action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
        elif action.type is Path:
            action.complete = shtab.FILE  # type: ignore[attr-defined]
