"""`partition-assets release show|list`: the lake's releases (storage/release_log.py), for
readers outside Dagster that read the tables at the versions of one release."""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING

from partition_assets.cli.help_text import add_command

if TYPE_CHECKING:
    from partition_assets.storage.release_reads import ReleasePin

LAKE_ENV = "PARTITION_ASSETS_LAKE"


def add_release_commands(commands: argparse._SubParsersAction) -> None:
    release = add_command(
        commands,
        "release",
        "list the lake's releases, or show one: the table versions safe to read together",
        ("release list", "release show --table daily_orders"),
    )
    actions = release.add_subparsers(dest="action", required=True, metavar="COMMAND")
    show = add_command(
        actions,
        "show",
        "print the version of each table to read now (or as of --release)",
        ("release show", "release show --release 3f2a1c9e-... --json"),
    )
    show.add_argument("--release", dest="release_id", help="a release id from `release list`")
    show.add_argument("--table", dest="tables", action="append", help="only this table (its folder); repeatable")
    listing = add_command(actions, "list", "list every release, oldest first", ("release list", "release list --json"))
    for parser in (show, listing):
        parser.add_argument("--lake", default=os.environ.get(LAKE_ENV, ".lake"), help=f"the lake root (${LAKE_ENV})")
        parser.add_argument("--json", action="store_true", help="print JSON")


def run_release_command(args: argparse.Namespace) -> int:
    # Imported when run: the parser (`--help`) loads no Delta (cli/main.py).
    from partition_assets.storage.release_reads import pinned_versions, releases

    if args.action == "show":
        pin = pinned_versions(args.lake, args.tables, args.release_id)
        print(json.dumps(pin.to_json(), indent=2) if args.json else _describe(pin))
        return 0
    found = releases(args.lake)
    if args.json:
        print(json.dumps([release.to_json() for release in found], indent=2))
    for release in [] if args.json else found:
        versions = ", ".join(f"{table} v{version}" for table, version in sorted(release.versions.items()))
        print(
            f"{release.release_id}  {release.recorded_at:%Y-%m-%d %H:%M:%S}  {release.operation} "
            f"{release.backfill_id}: {versions or 'no tables'}"
        )
    if not found and not args.json:
        print(f"no release in {args.lake} yet")
    return 0


def _describe(pin: ReleasePin) -> str:
    head = pin.release.release_id if pin.release else "no release yet"
    lines = [f"{pin.lake_root}: {head} (release log v{pin.log_version})"]
    lines += [f"  {table} v{version}" for table, version in sorted(pin.versions.items())]
    return "\n".join(lines)
