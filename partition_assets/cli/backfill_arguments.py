"""The arguments of `partition-assets backfill` and its commands (cli/backfill.py runs them)."""

import argparse

from partition_assets.backfill.planning.spec import add_spec_arguments
from partition_assets.deploy.code_root import add_code_root_options


def add_backfill_commands(commands: argparse._SubParsersAction) -> None:
    backfill = commands.add_parser("backfill", help="sparse (asset, partition) backfills")
    actions = backfill.add_subparsers(dest="action", required=True)
    for name, text in (("plan", "dry run: nodes, edges, critical path, ETA"), ("run", "run a backfill")):
        parser = actions.add_parser(name, help=text)
        _add_target(parser)
        add_spec_arguments(parser)
        add_code_root_options(parser)
        if name == "plan":
            parser.add_argument(
                "--json", action="store_true", help="print every node with why it is in the plan, as JSON"
            )
        if name == "run":
            parser.add_argument(
                "--detach",
                action="store_true",
                help="hand the coordinator to the instance's run launcher (a run of the code location's "
                "sparse_backfill job) and return at once",
            )
            parser.add_argument("--by", help="who launches it (its record keeps it; default: the OS user)")
            _add_verbose(parser)
    _add_retract(actions)
    for name, text in (
        ("status", "per-asset heatmap of a backfill"),
        ("resume", "finish a backfill: run every node that has not succeeded"),
        ("retry", "re-run failed nodes and their descendants"),
        ("cancel", "stop launching and cancel runs in flight"),
        ("pause", "stop launching new node runs; runs in flight finish"),
        ("unpause", "launch a paused backfill's node runs again"),
        ("extend", "widen the time range of a paused, canceled, failed or approval-awaiting backfill"),
        ("adopt", "run a backfill launched from the webserver on the engine (the instance starts it)"),
        ("diff", "per (asset, partition): old and new rows, measure sums and checksums"),
        ("publish", "publish a staged backfill whose gate failed, after review"),
        ("approve", "approve a backfill awaiting approval (or, with --force, one whose gate failed) and publish it"),
        ("discard", "delete a staged backfill's staged data"),
        ("ledger", "what a backfill read and wrote, per (asset, partition)"),
        ("rollback", "restore the partitions a published backfill rewrote"),
    ):
        parser = actions.add_parser(name, help=text)
        parser.add_argument("backfill_id")
        add_code_root_options(parser)
        if name == "status":
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
    actions.add_parser("list", help="every backfill: status, priority, share of the capacity, queue position, window")
    actions.add_parser(
        "standby", help="wait, warm, for the webserver's next backfill on stdin, then adopt it (the instance starts it)"
    )
    actions.add_parser(
        "serve",
        help="keep Dagster and the engine imported and run this instance's `backfill` commands as forks of this "
        "process, until SIGTERM or Ctrl-C",
    )


# The fields of a backfill's spec that say which partitions a retract removes.
RETRACT_FIELDS = ("selection", "start", "end", "keys", "downstream")


def _add_retract(actions: argparse._SubParsersAction) -> None:
    """`backfill retract`: the code location and the spec's fields that name partitions (RETRACT_FIELDS)."""
    parser = actions.add_parser(
        "retract",
        help="remove partitions from their tables (one commit per table) and mark them not materialized; "
        "`backfill rollback ID` brings them back",
    )
    _add_target(parser)
    add_spec_arguments(parser, only=RETRACT_FIELDS)
    add_code_root_options(parser)
    parser.add_argument("--by", help="who retracts (its record keeps it; default: the OS user)")


def _add_target(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument("-m", "--module-name", help="code location module (as `dagster -m`)")
    target.add_argument("-f", "--python-file", help="code location file (as `dagster -f`)")
    target.add_argument("-w", "--workspace", help="workspace.yaml whose one python entry is the code location")


def _add_verbose(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="also print Dagster's DEBUG event lines of every node run (always in the runs' logs)",
    )
