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
from pathlib import Path

# This checkout's package and bench modules, even when the installed package is another work tree's.
sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).resolve().parents[1])]
from engine_command import CommandResult, range_args, run_backfill_command

from partition_assets_tests.instances import instance_env

REPO = Path(__file__).resolve().parents[1]
MODULE = "partition_assets.example"
SELECT = "*"


def _load(loads) -> str:
    return "/".join(f"{x:.1f}" for x in loads)


def measure_engine(days: int, slots: int, env: dict[str, str], keys: dict[str, list[str]], log) -> CommandResult:
    """The whole `backfill run --select '*'` command on a fresh instance and lake."""
    workdir = Path(tempfile.mkdtemp(prefix="example-engine-bench-"))
    try:
        return run_backfill_command(
            ["-m", MODULE],
            ["--select", SELECT, *range_args(days), "--max-parallel", str(slots)],
            {**env, **instance_env(workdir / "dagster_home"), "PARTITION_ASSETS_LAKE": str(workdir / "lake")},
            keys,
            log,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


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

    state = Path(tempfile.mkdtemp(prefix="example-bench-state-"))
    env = {
        "PARTITION_ASSETS_STATE_DIR": str(state),
        "PARTITION_ASSETS_SPARK_CONNECT_PORT": str(args.spark_port),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    os.environ.update(env)  # read when the example's Definitions are built, below

    import dagster as dg
    import dagster_backfill

    from partition_assets.backfill.location import load_definitions
    from partition_assets.spark import SparkResource

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    server = SparkResource.from_env().local_server()
    engine = daemon = None
    try:
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
        server.ensure_running()
        if not args.skip_engine:
            engine = measure_engine(args.days, args.slots, env, keys, log)
        if not args.skip_dagster:
            lake = Path(tempfile.mkdtemp(prefix="example-daemon-lake-"))
            try:
                daemon = dagster_backfill.run_daemon_backfill(
                    ["-m", MODULE],
                    {**env, "PARTITION_ASSETS_LAKE": str(lake)},
                    defs,
                    keys,
                    days=args.days,
                    policy="as defined",
                    slots=args.slots,
                    timeout=args.timeout,
                    progress=log,
                )
            finally:
                shutil.rmtree(lake, ignore_errors=True)
    finally:
        server.stop()
        shutil.rmtree(state, ignore_errors=True)
    uptime_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()

    rows = []
    if engine:
        rows.append(f"| our engine (`partition-assets backfill run`) | {engine.seconds:.1f} | {engine.details()} |")
    if daemon:
        runs = ", ".join(f"{n} {s}" for s, n in sorted(daemon.run_statuses.items())) or "none"
        if daemon.finished:
            rows.append(
                f"| Dagster daemon, each asset's own backfill policy | {daemon.makespan:.1f} | "
                f"{daemon.runs} runs ({runs}); backfill {daemon.status} after {daemon.completed_after:.1f} s; "
                f"{daemon.materialized} of {nodes} materialized; load {_load(daemon.load_before)} -> "
                f"{_load(daemon.load_after)} |"
            )
        else:
            rows.append(
                f"| Dagster daemon, each asset's own backfill policy | > {daemon.timeout:.0f} | "
                f"did not finish in {daemon.timeout:.0f} s: {daemon.materialized} of {nodes} partitions "
                f"materialized, {daemon.runs} runs ({runs}); canceled |"
            )
    notes = []
    if engine and daemon and daemon.finished:
        ratio = daemon.makespan / engine.seconds
        faster = f"{ratio:.2f}x faster than" if ratio >= 1 else f"{1 / ratio:.2f}x slower than"
        notes.append(f"**Engine is {faster} Dagster's daemon backfill** on real Spark work.")
    elif engine and daemon:
        notes.append(
            f"**Engine is more than {daemon.timeout / engine.seconds:.1f}x faster**: "
            f"Dagster's backfill did not finish in {daemon.timeout:.0f} s."
        )
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
