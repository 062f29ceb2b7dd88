"""The arguments of `partition-assets backfill` and its commands (cli/backfill.py runs them).

Each command's help opens with what it does and examples (cli/help_text.py); `plan` and `run`
group their flags: what to backfill, how to run, publishing, then advanced, the groups a
first backfill does not need. `standby` and `adopt` (the webserver's backfills, started by the
instance) are hidden from `backfill --help` and run as any other.
"""

import argparse

from partition_assets.backfill.planning.spec import add_spec_arguments
from partition_assets.cli.help_text import ADVANCED, add_command

_LOCATION = "-m my_project"
_RANGE = "--start 2024-01-01 --end 2024-01-07"

# The help's group of each spec field `plan` and `run` take; a field not named is advanced.
_SPEC_GROUPS = {
    "what to backfill": ("selection", "start", "end", "keys", "downstream", "catch_up"),
    "how to run": ("max_parallel", "batch", "reverse"),
    "publishing": ("publish", "gate"),
}
_GROUP_OF_FIELD = {name: group for group, names in _SPEC_GROUPS.items() for name in names}
_ADVANCED_TEXT = "approval, limits, leases, windows, priorities, history (docs/reference/backfill.md)"

# Each command on a recorded backfill: its summary and examples (after `backfill`).
_ON_RECORD = {
    "status": (
        "show a backfill's per-asset heatmap of node states",
        ("status 3f2a1c9e0b12", "status 3f2a1c9e0b12 --html status.html"),
    ),
    "resume": ("finish a backfill: run every node that has not succeeded, then publish", ("resume 3f2a1c9e0b12",)),
    "retry": ("run a backfill's failed nodes and their descendants again", ("retry 3f2a1c9e0b12",)),
    "cancel": ("stop launching a backfill's nodes and cancel its runs in flight", ("cancel 3f2a1c9e0b12",)),
    "pause": ("stop launching a backfill's nodes; its runs in flight finish", ("pause 3f2a1c9e0b12",)),
    "unpause": ("launch a paused backfill's nodes again", ("unpause 3f2a1c9e0b12",)),
    "extend": (
        "widen the time range of a paused, canceled, failed or approval-awaiting backfill",
        ("extend 3f2a1c9e0b12 --end 2024-01-31", "extend 3f2a1c9e0b12 --start 2023-12-01"),
    ),
    "adopt": (
        "run a backfill launched from the webserver on the engine (the instance starts it)",
        ("adopt 3f2a1c9e0b12",),
    ),
    "diff": (
        "show, per (asset, partition), a staged backfill's old and new rows, sums and checksums",
        ("diff 3f2a1c9e0b12",),
    ),
    "publish": (
        "publish a staged backfill whose gate failed, after review",
        ("diff 3f2a1c9e0b12  # review first", "publish 3f2a1c9e0b12 --force"),
    ),
    "approve": (
        "approve a backfill awaiting approval and publish it",
        ("approve 3f2a1c9e0b12 --by ana", "approve 3f2a1c9e0b12 --by ana --force  # its gate failed"),
    ),
    "discard": ("delete a staged backfill's staged data, publishing nothing", ("discard 3f2a1c9e0b12",)),
    "ledger": (
        "show what a backfill read and wrote, per (asset, partition)",
        ("ledger 3f2a1c9e0b12", "ledger 3f2a1c9e0b12 --json"),
    ),
    "rollback": ("restore the partitions a published backfill rewrote", ("rollback 3f2a1c9e0b12",)),
}


def add_backfill_commands(commands: argparse._SubParsersAction) -> None:
    backfill = add_command(
        commands,
        "backfill",
        "plan and run backfills of (asset, partition) nodes, then read, publish or undo them",
        (
            f"backfill plan {_LOCATION} --select 'key:daily_orders+' {_RANGE}",
            f"backfill run {_LOCATION} --select 'key:daily_orders+' {_RANGE}",
            "backfill status 3f2a1c9e0b12",
        ),
    )
    actions = backfill.add_subparsers(dest="action", required=True, metavar="COMMAND")
    _add_plan_or_run(
        actions,
        "plan",
        "show what a backfill would run (nodes, edges, critical path, ETA) and launch nothing",
        (
            f"backfill plan {_LOCATION} --select 'key:daily_orders+' {_RANGE}",
            f"backfill plan {_LOCATION} --select 'group:revenue' --keys 2024-01-02 --json",
        ),
    )
    _add_plan_or_run(
        actions,
        "run",
        "run a backfill: each (asset, partition) is one Dagster run, in dependency order; then publish",
        (
            f"backfill run {_LOCATION} --select 'key:daily_orders+' {_RANGE}",
            f"backfill run {_LOCATION} --select 'key:daily_orders' {_RANGE} --downstream --max-parallel 8",
            f"backfill run {_LOCATION} --select '*' --catch-up {_RANGE}  # only what is missing or failed",
        ),
    )
    _add_retract(actions)
    for name, (summary, examples) in _ON_RECORD.items():
        parser = add_command(actions, name, summary, [f"backfill {e}" for e in examples], hidden=name == "adopt")
        parser.add_argument("backfill_id", help="the backfill's id, as `backfill run` and `backfill list` print it")
        add_code_root_options(parser.add_argument_group(ADVANCED))
        if name == "status":
            parser.add_argument(
                "--verbose", action="store_true", help="also print its publishing stages, each done, next or pending"
            )
            parser.add_argument("--html", help="also write the heatmap to this HTML file")
            parser.add_argument("--png", help="also write the heatmap to this PNG image")
        if name == "publish":
            parser.add_argument(
                "--force", action="store_true", help="publish despite a failed gate or commits made since it started"
            )
        if name == "approve":
            parser.add_argument("--by", required=True, help="who approves (the ledger records the name)")
            parser.add_argument("--force", action="store_true", help="approve despite a failed gate")
        if name == "rollback":
            parser.add_argument(
                "--force", action="store_true", help="roll back despite later commits to its partitions"
            )
            parser.add_argument(
                "--by",
                help="who asks for it (under an approval policy, someone else approves it; default: the OS user)",
            )
        if name == "extend":
            parser.add_argument("--start", help="the new first day or time (inclusive; default: its own)")
            parser.add_argument("--end", help="the new last day or time (inclusive; default: its own)")
        if name == "ledger":
            parser.add_argument("--json", action="store_true", help="print the rows as a JSON list")
        if name in ("resume", "retry"):
            _add_verbose(parser)
    add_command(
        actions,
        "list",
        "list every backfill: status, priority, share of the capacity, queue position, window",
        ("backfill list",),
    )
    add_command(
        actions,
        "standby",
        "wait, warm, for the webserver's next backfill on stdin, then adopt it (the instance starts it)",
        ("backfill standby",),
        hidden=True,
    )
    add_command(
        actions,
        "serve",
        "keep Dagster and the engine loaded: this instance's later `backfill` commands start in ~0.5 s; until Ctrl-C",
        ("backfill serve  # then any `backfill` command, in a shell with this DAGSTER_HOME",),
    )


def _add_plan_or_run(
    actions: argparse._SubParsersAction, name: str, summary: str, examples: tuple[str, ...]
) -> argparse.ArgumentParser:
    """`plan` or `run`: the code location, the spec's flags and the command's own, by group."""
    parser = add_command(
        actions,
        name,
        summary,
        examples,
        usage=f"partition-assets backfill {name} -m MODULE --select SELECTION [--start DAY --end DAY] [options]",
    )
    groups = {group: parser.add_argument_group(group) for group in (*_SPEC_GROUPS, ADVANCED)}
    groups[ADVANCED].description = _ADVANCED_TEXT
    _add_target(groups["what to backfill"])
    add_spec_arguments(parser, group_of=lambda field: groups[_GROUP_OF_FIELD.get(field, ADVANCED)])
    if name == "plan":
        groups["what to backfill"].add_argument(
            "--json", action="store_true", help="print every node with why it is in the plan, as JSON"
        )
    if name == "run":
        groups["how to run"].add_argument(
            "--detach",
            action="store_true",
            help="return at once: the instance's run launcher runs the backfill",
        )
        _add_verbose(groups["how to run"])
        groups[ADVANCED].add_argument("--by", help="who launches it (its record keeps it; default: the OS user)")
    add_code_root_options(groups[ADVANCED])
    return parser


# The fields of a backfill's spec that say which partitions a retract removes.
RETRACT_FIELDS = ("selection", "start", "end", "keys", "downstream")


def _add_retract(actions: argparse._SubParsersAction) -> None:
    """`backfill retract`: the code location and the spec's fields that name partitions (RETRACT_FIELDS)."""
    parser = add_command(
        actions,
        "retract",
        "remove partitions from their tables (one commit per table) and mark them not materialized",
        (
            f"backfill retract {_LOCATION} --select 'key:daily_orders' --keys 2024-01-10 --downstream",
            "backfill rollback 3f2a1c9e0b12  # brings them back",
        ),
    )
    _add_target(parser)
    add_spec_arguments(parser, only=RETRACT_FIELDS)
    parser.add_argument("--by", help="who retracts (its record keeps it; default: the OS user)")
    add_code_root_options(parser.add_argument_group(ADVANCED))


def _add_target(parser: argparse._ActionsContainer) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument("-m", "--module-name", metavar="MODULE", help="module; default: pyproject's [tool.dagster]")
    target.add_argument("-f", "--python-file", metavar="FILE", help="a Python file, as `dagster -f`")
    target.add_argument("-w", "--workspace", metavar="FILE", help="a workspace.yaml naming the module")


def _add_verbose(parser: argparse._ActionsContainer) -> None:
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="also print Dagster's DEBUG event lines of every node run (always in the runs' logs)",
    )


def add_code_root_options(parser: argparse._ActionsContainer) -> None:
    """`--code-root` / `--location`: the command runs on a deploy's code (deploy/code_root.py runs it)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--code-root", metavar="DIR", help="import the code location from DIR (e.g. a deploy's worktree)"
    )
    where.add_argument(
        "--location", metavar="NAME", help="a deployed location (`partition-assets deploys`), e.g. example@1a2b3c4d5e6f"
    )
