"""Real Spark work: the example pipeline backfilled by our engine and by Dagster's own daemon.

Both sides run every asset of `partition_assets.example` that the range covers
(hourly events, 6-hourly, daily, weekly, monthly, static and daily x region assets)
over `--days` days from 2024-01-01, with 4 concurrent runs, on one shared local
Spark Connect server (started once before either side, so neither pays for the JVM),
each side writing a fresh lake:
- engine: `partition-assets backfill run -m partition_assets.example --select '*'
  --start 2024-01-01 --end <last day> --max-parallel 4`, timed as a whole command
  (process start, planning and worker start-up included);
- Dagster daemon: the same (asset, partition) set launched with
  `launchPartitionBackfill` through `dagster dev -m partition_assets.example`; each
  asset keeps the backfill policy it is defined with (single_run for every example
  asset: one run per asset over the range, Dagster's fastest path).

Usage: python bench/example_bench.py [--days 14] [--slots 4] [--timeout 1800]
           [--spark-port 15112] [--skip-engine] [--skip-dagster] [--out bench/results/example.md]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# This checkout's package and bench modules, even when the installed package is another work tree's.
sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).resolve().parents[1])]
import dagster as dg
import dagster_backfill
from engine_command import CommandResult, range_args, run_backfill_command, versus_dagster

from partition_assets.code_location import load_definitions
from partition_assets.spark import SparkResource
from partition_assets_tests.support.instances import instance_env

REPO = Path(__file__).resolve().parents[1]
MODULE = "partition_assets.example"
SELECT = "*"


def measure_engine(days: int, slots: int, env: dict[str, str], keys: dict[str, list[str]], log) -> CommandResult:
    """The whole `backfill run --select '*'` command on a fresh instance and lake."""
    workdir = Path(tempfile.mkdtemp(prefix="example-engine-bench-"))
    try:
        return run_example_command(
            workdir, ["--select", SELECT, *range_args(days), "--max-parallel", str(slots)], env, keys, log
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_example_command(
    workdir: Path, spec_args: list[str], env: dict[str, str], keys: dict[str, list[str]], log
) -> CommandResult:
    """`partition-assets backfill run -m partition_assets.example <spec_args>` on the instance
    `workdir/dagster_home` and the lake `workdir/lake`: fresh ones, or those a copied seed holds."""
    return run_backfill_command(
        ["-m", MODULE],
        spec_args,
        {**env, **instance_env(workdir / "dagster_home"), "PARTITION_ASSETS_LAKE": str(workdir / "lake")},
        keys,
        log,
    )


def measure_daemon(
    defs: dg.Definitions,
    keys: dict[str, list[str]],
    env: dict[str, str],
    *,
    days: int,
    slots: int,
    timeout: float,
    log,
    seed: Path | None = None,
) -> dagster_backfill.DaemonResult:
    """Dagster's daemon backfill of the example's `keys`, each asset keeping its own backfill
    policy, on a fresh instance and a fresh lake, or a copy of the lake `seed` holds (as
    run_example_command leaves it in its workdir). The instance is fresh either way: a backfill
    of explicit keys runs the same whatever the instance's history."""
    workdir = Path(tempfile.mkdtemp(prefix="example-daemon-bench-"))
    lake = workdir / "lake"
    try:
        if seed:
            shutil.copytree(seed / "lake", lake)
        else:
            lake.mkdir()
        return dagster_backfill.run_daemon_backfill(
            ["-m", MODULE],
            {**env, "PARTITION_ASSETS_LAKE": str(lake)},
            defs,
            keys,
            days=days,
            policy="as defined",
            slots=slots,
            timeout=timeout,
            progress=log,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def example_environment(spark_port: int) -> Iterator[dict[str, str]]:
    """The environment both sides run the example in: a temporary state folder, this checkout
    on PYTHONPATH and the Spark Connect port (also set in os.environ: the example's Definitions
    read it when they are built), with the local Spark Connect server on that port started
    once for both sides. On exit the server is stopped and the state folder removed."""
    state = Path(tempfile.mkdtemp(prefix="example-bench-state-"))
    env = {
        "PARTITION_ASSETS_STATE_DIR": str(state),
        "PARTITION_ASSETS_SPARK_CONNECT_PORT": str(spark_port),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    os.environ.update(env)
    server = SparkResource.from_env().local_server()
    try:
        server.ensure_running()
        yield env
    finally:
        server.stop()
        shutil.rmtree(state, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, default=14)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds for Dagster's daemon backfill")
    parser.add_argument("--spark-port", type=int, default=15112)
    parser.add_argument("--skip-engine", action="store_true")
    parser.add_argument("--skip-dagster", action="store_true")
    parser.add_argument("--out", default=str(REPO / "bench/results/example.md"))
    args = parser.parse_args()

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    engine = daemon = None
    with example_environment(args.spark_port) as env:
        defs = load_definitions(MODULE)
        asset_graph = defs.resolve_asset_graph()
        # campaign_report's dynamic partitions have no keys in a fresh instance: no nodes on either side.
        static_selection = [
            key
            for key in asset_graph.get_all_asset_keys()
            if not isinstance(asset_graph.get(key).partitions_def, dg.DynamicPartitionsDefinition)
        ]
        keys = dagster_backfill.planned_keys(defs, args.days, static_selection)
        nodes = sum(map(len, keys.values()))
        uptime_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        log(f"example {args.days}d: {nodes} (asset, partition) nodes; Spark Connect on port {args.spark_port}")
        if not args.skip_engine:
            engine = measure_engine(args.days, args.slots, env, keys, log)
        if not args.skip_dagster:
            daemon = measure_daemon(defs, keys, env, days=args.days, slots=args.slots, timeout=args.timeout, log=log)
    uptime_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()

    rows = []
    if engine:
        rows.append(f"| our engine (`partition-assets backfill run`) | {engine.seconds:.1f} | {engine.details()} |")
    if daemon:
        label = "Dagster daemon, each asset's own backfill policy"
        rows.append(f"| {label} | {daemon.makespan_cell()} | {daemon.details()} |")
    notes = []
    if engine and daemon:
        _, sentence = versus_dagster(engine.seconds, {"each asset's own policy": daemon})
        notes.append(f"**{sentence}** on real Spark work.")
    if engine and engine.stderr_tail:
        notes.append(f"Engine command failed; stderr tail:\n\n```\n{engine.stderr_tail}\n```")
    per_asset = ", ".join(f"{asset} {len(p)}" for asset, p in keys.items() if p)
    lines = [
        "# Example pipeline (real Spark work): our engine against Dagster's daemon backfill",
        "",
        f"Command: `{' '.join(['python bench/example_bench.py', *sys.argv[1:]])}` "
        "(Spark local[2] behind one shared Spark Connect server)",
        "",
        f"Machine: {os.cpu_count()} cores, shared with other work; `uptime` before: `{uptime_before}`; "
        f"after: `{uptime_after}`.",
        "",
        f"{args.days} days from 2024-01-01, `--select '*'`, {args.slots} concurrent runs: {nodes} (asset, partition) "
        f"nodes ({per_asset}).",
        "",
        "| backfill | makespan s | details |",
        "| --- | --- | --- |",
        *rows,
        "",
        *notes,
        "",
        "Engine: whole command (process start, planning, worker start-up included); every node is a Dagster run. "
        "Dagster: launch -> last run's end, through `dagster dev` (webserver + daemon, 30 s backfill ticks, "
        "run queue with the same concurrency).",
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
