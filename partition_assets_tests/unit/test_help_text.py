"""The command line's help as a person reads it (cli/help_text.py): each command opens with what
it does and examples that run, `plan` and `run` group their flags and state their defaults, and
the commands the instance runs itself are not listed."""

import argparse
import shlex
from collections.abc import Iterator

import pytest

from partition_assets.cli.main import build_parser


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command of `parser`, listed or hidden, with the words that name it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                yield (*path, name), command
                yield from _commands(command, (*path, name))


@pytest.fixture(autouse=True)
def _eighty_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # argparse wraps to the terminal's width


def _help(words: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*words, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_each_command_opens_with_what_it_does_then_examples_that_parse(capsys):
    commands = [((), build_parser()), *_commands(build_parser())]
    assert len(commands) > 25
    for words, _ in commands:
        text = _help(list(words), capsys)
        after_usage = text.split("\n\n")[1:]
        summary, examples = after_usage[0], after_usage[1].splitlines()
        assert len(summary.splitlines()) == 1 and summary[0].islower(), (words, summary)
        assert examples[0] == "examples:" and len(examples) >= 2, (words, examples)
        for example in examples[1:]:
            argv = shlex.split(example.split("  #")[0])
            assert argv[0] == "partition-assets", (words, example)
            if "--help" in argv:
                _help(argv[1:-1], capsys)
            else:
                build_parser().parse_args(argv[1:])  # an example that does not parse exits 2 here


def test_internal_commands_are_hidden_from_backfill_help_but_run(capsys):
    listing = _help(["backfill"], capsys)
    assert "standby" not in listing and "adopt" not in listing
    assert "serve" in listing and "retract" in listing
    assert build_parser().parse_args(["backfill", "standby"]).action == "standby"
    assert build_parser().parse_args(["backfill", "adopt", "3f2a1c9e0b12"]).backfill_id == "3f2a1c9e0b12"


def test_run_help_fits_a_screen_before_its_advanced_options(capsys):
    lines = _help(["backfill", "run"], capsys).splitlines()
    groups = [line for line in lines if line.endswith(":") and not line.startswith(" ")]
    assert groups == ["examples:", "options:", "what to backfill:", "how to run:", "publishing:", "advanced:"]
    assert lines.index("advanced:") <= 50, lines[:60]


def test_flags_state_their_defaults_and_no_batch_says_what_it_does(capsys):
    text = " ".join(_help(["backfill", "run"], capsys).split())
    assert "--max-parallel N node runs at once (default: 4)" in text
    assert "--no-batch one run per partition" in text
    assert "--publish staged|per-node staged:" in text and "(default: staged)" in text
