"""`partition-assets` (also `python -m partition_assets`): backfills, Spark and tables.

The parser (every command's flags and help) imports the standard library and the modules
that define flags only: `--help`, a typo and a bad flag answer at once, without Dagster,
Spark or Delta. A command imports what it runs once parsed (`loaded`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

from partition_assets.cli.backfill_arguments import add_backfill_commands
from partition_assets.cli.deploy import add_deploy_commands, run_deploy_command
from partition_assets.cli.help_text import PROG, add_command, described, formatter
from partition_assets.cli.lint import add_lint_command, run_lint_command
from partition_assets.cli.release import add_release_commands, run_release_command
from partition_assets.errors import CodeImportError, PartitionAssetsError, VacuumRetentionError


def main(argv: list[str] | None = None) -> int:
    """Runs the command of `argv` (default: the process's arguments); returns its exit code."""
    return loaded(argv)()


def loaded(argv: list[str] | None = None) -> Callable[[], int]:
    """The command of `argv`, parsed, with the modules it runs imported: calling it runs it and
    returns its exit code, 2 with one line on stderr on a PartitionAssetsError (a bad input or
    environment; nothing written). `--help` and a bad flag exit here (argparse's SystemExit),
    having imported the parser only. `python -m partition_assets` loads a command's modules
    with the cyclic collector off, then freezes them (__main__.py)."""
    args = build_parser().parse_args(argv)
    run = _runner(args, sys.argv[1:] if argv is None else list(argv))

    def command() -> int:
        try:
            return run()
        except PartitionAssetsError as error:
            # A bad input or environment: one line naming it and the fix, exit 2; no traceback but
            # the user's own, when their code raised.
            if isinstance(error, CodeImportError):
                print(error.frames, end="", file=sys.stderr)
            print(f"partition-assets {args.command}: {error}", file=sys.stderr)
            return 2

    return command


class _Parser(argparse.ArgumentParser):
    """A parser that refuses an abbreviated long option (argparse otherwise reads any unambiguous
    prefix as the option: a mistyped `--key` was taken for `--keys`). Subcommands' parsers are
    of this class too: `add_subparsers` makes them of their parent's class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description=described(
            "backfill partitioned Dagster assets, one run per (asset, partition), and publish them safely",
            (
                "backfill plan -m my_project --select 'key:daily_orders+' --start 2024-01-01 --end 2024-01-07",
                "backfill run -m my_project --select 'key:daily_orders+' --start 2024-01-01 --end 2024-01-07",
                "backfill --help  # every backfill command",
            ),
        ),
        formatter_class=formatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_backfill_commands(commands)
    add_release_commands(commands)
    spark = add_command(
        commands,
        "spark",
        "start, stop or check the local Spark Connect server the assets' Spark sessions use",
        ("spark start", "spark status"),
    )
    spark.add_argument("action", choices=["start", "stop", "status"])
    add_command(commands, "java", "print the Java runtime Spark will use", ("java",))
    add_deploy_commands(commands)
    add_lint_command(commands)
    vacuum_cmd = add_command(
        commands,
        "vacuum",
        "delete a table's files of replaced or killed writes, older than the retention",
        ("vacuum .lake/daily_orders --dry-run", "vacuum .lake/daily_orders --retention-hours 24"),
    )
    vacuum_cmd.add_argument("table_uri", help="the table's folder or URI")
    vacuum_cmd.add_argument(
        "--retention-hours", type=retention_hours, default=168, help="keep younger files (default: 168, a week)"
    )
    vacuum_cmd.add_argument("--dry-run", action="store_true", help="list what it would delete, delete nothing")
    return parser


def served_refusal(argv: list[str]) -> str | None:
    """Why the command server does not run `argv` (its client runs it), if so: a command
    on another code root imports it in a new interpreter."""
    args = build_parser().parse_args(argv)
    if getattr(args, "code_root", None) or getattr(args, "location", None):
        return "a command on another code root runs in an interpreter of its own"
    return None


def retention_hours(text: str) -> float:
    """An argparse type: a number of hours `checked_retention_hours` accepts."""
    from partition_assets.storage.table_format import checked_retention_hours  # only `vacuum` parses it

    try:
        hours = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of hours") from None
    try:
        return checked_retention_hours(hours)
    except VacuumRetentionError as error:  # argparse would replace a ValueError's message
        raise argparse.ArgumentTypeError(str(error)) from None


def _runner(args: argparse.Namespace, argv: list[str]) -> Callable[[], int]:
    """The parsed command, ready to run: a `backfill` command's Dagster and engine imported now
    (the other commands' modules, lighter, as they run)."""
    if args.command == "backfill":
        from partition_assets.cli.backfill import run_backfill_command

        return partial(run_backfill_command, args, argv)
    runs: dict[str, Callable[[argparse.Namespace], int]] = {
        "deploy": run_deploy_command,
        "deploys": run_deploy_command,
        "undeploy": run_deploy_command,
        "lint": run_lint_command,
        "release": run_release_command,
        "vacuum": _vacuum,
    }
    return partial(runs.get(args.command, _spark), args)


def _vacuum(args: argparse.Namespace) -> int:
    from partition_assets.storage.maintenance import vacuum

    result = vacuum(args.table_uri, args.retention_hours, args.dry_run)
    verb = "would delete" if args.dry_run else "deleted"
    print(f"{verb} {len(result.data_files)} data files, {len(result.staging_folders)} staging folders")
    for dropped in result.dropped_tables:
        print(f"{'would drop' if args.dry_run else 'dropped'} expired previous version {dropped}")
    return 0


def _spark(args: argparse.Namespace) -> int:
    """`java` and `spark start|stop|status`."""
    from partition_assets.spark import SparkResource, find_java

    if args.command == "java":
        print(find_java().describe())
        return 0
    server = SparkResource.from_env().local_server()
    if args.action == "start":
        print(f"Spark: {find_java().describe()}")
        print(f"Spark Connect server at {server.ensure_running()} (log: {server.log_path})")
    elif args.action == "stop":
        print(server.stop().message)
    else:
        running = server.is_running()
        print(f"{server.url}: {'running' if running else 'not running'}")
        return 0 if running else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
