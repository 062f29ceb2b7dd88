"""Selecting by history at scale: `--stale` and `--produced-by` over 2,000 daily assets x 365
partitions (730,000 partitions, each materialized once, plus 6,000 made again).

The instance (SQLite, the repo's storages) is filled by partition_assets_tests/support/
generated_history.py (shared with the memory test in integration/test_history.py) with
materialization events written in
batches of 500 rows (`prepare_insert_event_batch`): the `event_logs` rows the selection reads,
each a real serialized EventLogEntry with its `git_sha` metadata and `dagster/code_version`
tag, and each asset's summary row (its latest event: the assets the instance lists, which the
index reads). Left out: Dagster's tag index (written by `store_event`, read by neither
selection), the runs (the events record their commit, so no run tag is read), and
loading a code location: the 2,000 assets are built in the process (200 chains of 10, identity
mappings), every 7th with a new code version. Every 10th asset (each chain's head) has its last
30 days made again by the newer commit: their readers' partitions are stale through them.

Each step runs in a fresh process, its wall and CPU time and peak resident memory measured:
today's full scan of the event log (for comparison), the provenance index's first build
(dagster_instance/provenance_index.py), each selection planned from it (`plan_by_history`, as `backfill
plan` does it: candidates, index, rules, graph), then the index's update after `--new-events`
more materializations (each asset's last days made again by the newer commit).

Usage: python bench/history_selection_bench.py [--assets 2000] [--days 365] [--new-events 1000]
       [--out bench/results/history_selection.md]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg

from partition_assets_tests.support.generated_history import (
    BATCH,
    CHAIN,
    NEW_VERSION_EVERY,
    asset_keys,
    days_of,
    definitions,
    write_events,
)

REPO = Path(__file__).resolve().parents[1]
REMADE_DAYS = 30


def fill(instance: dg.DagsterInstance, defs: dg.Definitions, old: str, new: str) -> int:
    """Writes every partition of every asset once (commit `old`, version v1), then each chain
    head's last days again (commit `new`); returns the events written."""
    keys = asset_keys(defs)
    days = days_of(defs)
    wanted = [(key, day, old) for key in keys for day in days]
    wanted += [(key, day, new) for n, key in enumerate(keys) if n % CHAIN == 0 for day in days[-REMADE_DAYS:]]
    return write_events(instance, wanted)


def fill_more(instance: dg.DagsterInstance, defs: dg.Definitions, new: str, count: int) -> int:
    """Writes `count` more materializations (commit `new`): each asset's last day again, then
    the day before, and so on; returns the events written."""
    keys, days = asset_keys(defs), days_of(defs)
    wanted = [(keys[n % len(keys)], days[-1 - n // len(keys)], new) for n in range(count)]
    return write_events(instance, wanted)


def measure(home: str, assets: int, days: int, fields: dict) -> dict:
    """Does one step in this process: its wall and CPU seconds, what it counted (nodes planned,
    events read) and peak memory. `fields` is a selection's spec fields, or {"step": ...}: the
    index's first build, its update, or today's full scan of every asset's materializations."""
    from partition_assets.backfill.planning.history import plan_by_history, scanned_materializations
    from partition_assets.backfill.planning.spec import BackfillSpec, flag_of
    from partition_assets.dagster_instance.provenance_index import rebuild_index, update_index

    defs = definitions(assets, days)
    step = fields.get("step")
    with dg.DagsterInstance.from_config(home) as instance:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        cpu = _cpu_seconds()
        started = time.perf_counter()
        if step == "build":
            count = rebuild_index(instance, progress=lambda line: None)
        elif step == "update":
            count = update_index(instance, progress=lambda line: None)
        elif step == "scan":
            scanned = scanned_materializations(instance, dict.fromkeys(asset_keys(defs)), None)
            count = sum(len(by_partition) for by_partition in scanned.values())
        else:
            spec = BackfillSpec(module=__file__, selection="*", **fields)
            count = plan_by_history(defs, spec, instance, flag_of).node_count()
        seconds = time.perf_counter() - started
        cpu = _cpu_seconds() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "cpu": cpu, "count": count, "before_mb": before, "peak_mb": peak}


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--assets", type=int, default=2000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--new-events", type=int, default=1000, help="materializations written before the update")
    parser.add_argument("--out", default=str(REPO / "bench/results/history_selection.md"))
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # child: JSON of the fields, with --home
    parser.add_argument("--home", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.home, args.assets, args.days, json.loads(args.measure))))
        return

    from partition_assets_tests.support.git_repo import git
    from partition_assets_tests.support.instances import instance_env

    old, new = git(REPO, "rev-parse", "HEAD~1"), git(REPO, "rev-parse", "HEAD")
    home = Path(tempfile.mkdtemp(prefix="history_bench_"))
    try:
        instance_env(home)
        with dg.DagsterInstance.from_config(str(home)) as instance:
            started = time.perf_counter()
            events = fill(instance, definitions(args.assets, args.days), old, new)
            fill_seconds = time.perf_counter() - started
        rows = [f"- filled {events:,} materialization events in {fill_seconds:.0f} s (batches of {BATCH})"]

        def run(name: str, fields: dict, counted: str) -> None:
            load = os.getloadavg()[0]
            child = [sys.executable, __file__, "--assets", str(args.assets), "--days", str(args.days)]
            done = subprocess.run(
                [*child, "--home", str(home), "--measure", json.dumps(fields)],
                capture_output=True,
                text=True,
                check=False,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            result = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append(
                f"- {name}: {result['count']:,} {counted} in {result['seconds']:.2f} s ({result['cpu']:.2f} s CPU), "
                f"peak resident memory {result['peak_mb']:,.0f} MB ({result['before_mb']:,.0f} MB before); "
                f"load average {load:.1f}"
            )

        run("full scan of the event log (what planning read before the index)", {"step": "scan"}, "partitions")
        run("provenance index, first build", {"step": "build"}, "materializations read")
        for name, fields in (
            ("--stale", {"stale": True}),
            (f"--produced-by {new[:7]}", {"produced_by": new}),
            (f"--produced-by {old[:7]}..{new[:7]}", {"produced_by": f"{old}..{new}"}),
        ):
            run(f"`{name}` with the index", fields, "nodes selected")
        with dg.DagsterInstance.from_config(str(home)) as instance:
            fill_more(instance, definitions(args.assets, args.days), new, args.new_events)
        run(f"index update after {args.new_events:,} new materializations", {"step": "update"}, "materializations read")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    lines = [
        "# Selecting by history: --stale and --produced-by, from the provenance index",
        "",
        f"Command: `python bench/history_selection_bench.py --assets {args.assets} --days {args.days} "
        f"--new-events {args.new_events}` (2 cores; "
        "load average, the 1-minute one when each selection started, beside each figure)",
        "",
        f"- {args.assets:,} daily assets x {args.days} partitions; every 10th asset's last {REMADE_DAYS} days made "
        f"again by the newer commit; every {NEW_VERSION_EVERY}th asset has a new code version",
        *rows,
        "",
        "Left out (see the bench's docstring): Dagster's tag index, runs (the commit is read "
        "from the metadata, not the run tag), loading a code location; the instance is SQLite.",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
