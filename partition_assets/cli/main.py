"""`partition-assets` (also `python -m partition_assets`): backfills, Spark and tables."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from partition_assets.cli.backfill import dagster_home, run_backfill_command
from partition_assets.cli.backfill_arguments import add_backfill_commands
from partition_assets.cli.deploy import add_deploy_commands, run_deploy_command
from partition_assets.cli.lint import add_lint_command, run_lint_command
from partition_assets.cli.release import add_release_commands, run_release_command
from partition_assets.deploy.code_root import exec_in_code_root
from partition_assets.errors import PartitionAssetsError, VacuumRetentionError
from partition_assets.processes.command_server import serve
from partition_assets.spark import SparkResource, find_java
from partition_assets.storage.maintenance import vacuum
from partition_assets.storage.table_format import checked_retention_hours


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _run(args, sys.argv[1:] if argv is None else list(argv))
    except PartitionAssetsError as error:
        # A bad input or environment: one line naming it and the fix, no traceback, exit 2.
        print(f"partition-assets {args.command}: {error}", file=sys.stderr)
        return 2


class _Parser(argparse.ArgumentParser):
    """A parser that refuses an abbreviated long option (argparse otherwise reads any unambiguous
    prefix as the option: a mistyped `--key` was taken for `--keys`). Subcommands' parsers are
    of this class too: `add_subparsers` makes them of their parent's class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="partition-assets")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("java", help="print the Java runtime Spark will use")
    spark = commands.add_parser("spark", help="the shared local Spark Connect server (PARTITION_ASSETS_SPARK_* env)")
    spark.add_argument("action", choices=["start", "stop", "status"])
    add_backfill_commands(commands)
    add_deploy_commands(commands)
    add_lint_command(commands)
    add_release_commands(commands)
    vacuum_cmd = commands.add_parser(
        "vacuum", help="delete files of replaced or killed writes, older than the retention"
    )
    vacuum_cmd.add_argument("table_uri")
    vacuum_cmd.add_argument("--retention-hours", type=retention_hours, default=168)
    vacuum_cmd.add_argument("--dry-run", action="store_true")
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
    try:
        hours = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of hours") from None
    try:
        return checked_retention_hours(hours)
    except VacuumRetentionError as error:  # argparse would replace a ValueError's message
        raise argparse.ArgumentTypeError(str(error)) from None


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    if args.command == "backfill":
        exec_in_code_root(args, argv)  # when asked for
        if args.action == "serve":
            return serve(dagster_home(), main, served_refusal)
        return run_backfill_command(args)
    if args.command in ("deploy", "deploys", "undeploy"):
        return run_deploy_command(args)
    if args.command == "lint":
        return run_lint_command(args)
    if args.command == "release":
        return run_release_command(args)
    if args.command == "vacuum":
        result = vacuum(args.table_uri, args.retention_hours, args.dry_run)
        verb = "would delete" if args.dry_run else "deleted"
        print(f"{verb} {len(result.data_files)} data files, {len(result.staging_folders)} staging folders")
        for dropped in result.dropped_tables:
            print(f"{'would drop' if args.dry_run else 'dropped'} expired previous version {dropped}")
        return 0

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
