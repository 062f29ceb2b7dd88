"""How each command's `--help` reads: one line of what it does, then examples, then its
options by group, each default stated.

`add_command` adds a command whose help opens (after its usage) with its summary, the same line
its parent lists, and two or three examples; a hidden command (run by the instance or the
webserver, not by a person) is not listed by its parent but runs, and answers `--help`, as any.

Not guaranteed: the wording and the groups are for people; scripts read `--json` where a
command has it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

PROG = "partition-assets"
ADVANCED = "advanced"


def add_command(
    commands: argparse._SubParsersAction,
    name: str,
    summary: str,
    examples: Sequence[str],
    *,
    usage: str | None = None,
    hidden: bool = False,
) -> argparse.ArgumentParser:
    """A command `name` of `commands`: its help opens with `summary` and `examples` (each a
    command line after `partition-assets`, optionally ending `  # why`). `hidden`: its parent's
    help does not list it (the parent's subparsers name no choices: `metavar="COMMAND"`)."""
    listing: dict[str, Any] = {} if hidden else {"help": summary}
    return commands.add_parser(
        name, usage=usage, description=described(summary, examples), formatter_class=formatter, **listing
    )


def described(summary: str, examples: Sequence[str]) -> str:
    """A help's opening: `summary`, then `examples` (each after `partition-assets`)."""
    shown = "\n".join(f"  {PROG} {example}" for example in examples)
    return f"{summary}\n\nexamples:\n{shown}"


def formatter(prog: str) -> argparse.HelpFormatter:
    """The summary and examples as written; a flag's help beside flags of up to 32 characters
    (`-m MODULE, --module-name MODULE`), not on a line of its own."""
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=34)
