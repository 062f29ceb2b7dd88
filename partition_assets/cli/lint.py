"""`partition-assets lint [-m MODULE | -f FILE]`: wall-clock reads in asset logic."""

import argparse
import sys

from partition_assets.cli.help_text import add_command
from partition_assets.errors import CodeLocationError


def add_lint_command(commands: argparse._SubParsersAction) -> None:
    lint = add_command(
        commands,
        "lint",
        "find wall-clock reads (datetime.now, current_date, ...) in asset logic; exit 1 if any",
        ("lint", "lint -m my_project", "lint -f my_project/assets.py"),
    )
    target = lint.add_mutually_exclusive_group()
    target.add_argument(
        "-m",
        "--module-name",
        help="module to import; its Definitions' and module-level assets are checked "
        "(default: [tool.dagster] module_name)",
    )
    target.add_argument("-f", "--python-file", help="file to read without importing; its @asset functions are checked")


def run_lint_command(args: argparse.Namespace) -> int:
    """Prints one line per finding: exit 1 with findings, 0 without. A target that cannot be
    read, or that defines no assets, raises CodeLocationError."""
    # Imported when run: the parser (`--help`) loads no Dagster (cli/main.py).
    from partition_assets.code_location import configured_module
    from partition_assets.lint import lint_file, lint_module

    if args.python_file:
        target = args.python_file
        report = lint_file(target)
    else:
        target = args.module_name or configured_module()
        report = lint_module(target)
    if not report.assets:
        raise CodeLocationError(f"{target} defines no assets: check -m / -f; nothing was checked")
    for finding in report.findings:
        print(finding)
    if report.findings:
        print(f"{len(report.findings)} wall-clock read(s) in {len(report.assets)} assets of {target}", file=sys.stderr)
        return 1
    print(f"{target}: no wall clock in the logic of {len(report.assets)} assets")
    return 0
