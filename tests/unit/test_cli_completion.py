"""`kafka-chaos completion bash|zsh`: the printed script names every sub-command and its
options, completes paths where an argument names a file or folder, and, sourced in bash,
completes a word as a user's shell would."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from kafka_chaos.cli import COMMANDS, main


def _script(shell: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


def test_the_bash_script_names_every_subcommand_and_their_options(capsys) -> None:
    script = _script("bash", capsys)
    listed = re.search(r"^_shtab_kafka_chaos_subparsers=\((.*)\)$", script, re.MULTILINE)
    assert listed is not None
    assert listed.group(1).split() == list(COMMANDS)
    assert "completion" in COMMANDS
    options = re.search(r"^_shtab_kafka_chaos_run_option_strings=\((.*)\)$", script, re.MULTILINE)
    assert options is not None
    assert {"--out", "--junit", "--shard", "--fail-on", "--set"} <= set(options.group(1).split())
    # Files and folders complete as paths.
    assert "_shtab_kafka_chaos_run_pos_0_COMPGEN=_shtab_compgen_files" in script
    assert "_shtab_kafka_chaos_run___out_COMPGEN=_shtab_compgen_dirs" in script
    assert "_shtab_kafka_chaos_run___producer_config_COMPGEN=_shtab_compgen_files" in script


def test_the_zsh_script_names_every_subcommand(capsys) -> None:
    script = _script("zsh", capsys)
    assert script.startswith("#compdef kafka-chaos")
    for name, module in COMMANDS.items():
        assert f"{name}:'{module.HELP}" in script, name


def _complete(script: Path, *words: str) -> list[str]:
    """What bash offers for the last of `words` after sourcing the script."""
    line = " ".join(("kafka-chaos", *words))
    program = (
        f"source {script}; COMP_WORDS=(kafka-chaos {' '.join(words)}); "
        f"COMP_CWORD={len(words)}; COMP_LINE='{line}'; COMP_POINT={len(line)}; "
        '_shtab_kafka_chaos; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_bash_completes_subcommands_and_options(tmp_path: Path, capsys) -> None:
    script = tmp_path / "kafka-chaos.bash"
    script.write_text(_script("bash", capsys))
    assert _complete(script, "re") == ["report", "reconcile"]
    assert _complete(script, "report", "--spark") == ["--spark-chunk-rows"]
    assert _complete(script, "completion", "") == ["bash", "zsh"]


def test_an_unknown_shell_is_an_argument_error(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["completion", "fish"])
    assert exited.value.code == 2
    assert "invalid choice: 'fish'" in capsys.readouterr().err
