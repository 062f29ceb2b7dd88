"""What staging and one atomic publish per table cost against publishing per node.

The engine bench's DAG with real Delta tables (bench/publish_dag.py), 31 days, 4 slots,
rewriting history that already exists: each measurement starts from a copy of the
same seeded lake, in a fresh Dagster instance, and times the whole
`partition-assets backfill run` command (start-up, nodes, gate, publish).
Both backfill policies: Dagster's default (one partition per run) and single_run.
Modes alternate so that load drifts hit both alike.

Usage: python bench/publish_bench.py [--days 31] [--slots 4] [--repeats 2]
           [--out bench/results/publish.md]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
MODES = ("per-node", "staged")
POLICIES = {"none": "default policy (one partition per run)", "single_run": "BackfillPolicy.single_run()"}
GOAL = 1.05  # staged makespan at most 5 % above per-node


def backfill(home: Path, lake: Path, policy: str, mode: str, days: int, slots: int) -> float:
    """Seconds of one `backfill run` command."""
    end = (date(2024, 1, 1) + timedelta(days=days - 1)).isoformat()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "PUBLISH_BENCH_LAKE": str(lake),
        "ENGINE_DAG_BACKFILL_POLICY": policy,
        "PYTHONPATH": os.pathsep.join([str(BENCH), str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    command = [
        sys.executable, "-m", "partition_assets", "backfill", "run", "-f", str(BENCH / "publish_dag.py"),
        "--select", "*", "--start", "2024-01-01", "--end", end, "--max-parallel", str(slots), "--publish", mode,
    ]  # fmt: skip
    started = time.monotonic()
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"{mode}/{policy} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return seconds


def fresh_home(root: Path, name: str) -> Path:
    home = root / name
    home.mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    return home


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=31)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=str(BENCH / "results" / "publish.md"))
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="publish-bench-"))
    rows = []
    for policy in POLICIES:
        seed = root / f"seed-{policy}"
        seconds = backfill(fresh_home(root, f"home-seed-{policy}"), seed, policy, "per-node", args.days, args.slots)
        print(f"{policy}: seeded the lake in {seconds:.1f} s", flush=True)
        times: dict[str, list[float]] = {mode: [] for mode in MODES}
        for repeat in range(args.repeats):
            for mode in MODES if repeat % 2 == 0 else reversed(MODES):
                lake = root / f"lake-{policy}-{mode}-{repeat}"
                shutil.copytree(seed, lake)
                seconds = backfill(
                    fresh_home(root, f"home-{policy}-{mode}-{repeat}"), lake, policy, mode, args.days, args.slots
                )
                times[mode].append(seconds)
                print(f"{policy} {mode} #{repeat + 1}: {seconds:.1f} s", flush=True)
        ratio = statistics.median(times["staged"]) / statistics.median(times["per-node"])
        rows.append((policy, times, ratio))
    files_opened = overlay_files_opened(root / "seed-none" / "raw")
    shutil.rmtree(root, ignore_errors=True)
    write_report(Path(args.out), args, rows, files_opened)


def overlay_files_opened(table_uri: str | Path) -> tuple[int, int, int]:
    """Stages one partition of a published table for a backfill, then reads two partitions
    through the overlay (the staged one and a published one): (files Spark opens, files
    those two partitions hold, files staged plus published in the table)."""
    from deltalake import DeltaTable

    from partition_assets.spark import SparkResource
    from partition_assets.storage import DeltaFormat, PartitionScope, WriteOptions

    spark = SparkResource.from_env().spark_session
    uri = str(table_uri)
    table = DeltaTable(uri)
    days = sorted({p["ds"] for p in table.partitions()})
    delta = DeltaFormat()
    staged_day, published_day = days[0], days[-1]
    scope = PartitionScope(("ds",), frozenset({(staged_day,)}))
    frame = spark.range(10).selectExpr("id", "cast(id as double) as value", f"'{staged_day}' as ds")
    delta.stage(frame, uri, scope, WriteOptions(), "bench-overlay")
    read = PartitionScope(("ds",), frozenset({(staged_day,), (published_day,)}))
    opened = len(delta.read_overlay(spark, uri, read, "bench-overlay").inputFiles())
    staged = len(delta.staged(uri, "bench-overlay").files)
    needed = staged + len(table.file_uris(partition_filters=[("ds", "=", published_day)]))
    delta.discard_staged(uri, "bench-overlay")
    return opened, needed, len(table.file_uris()) + staged


def write_report(out: Path, args: argparse.Namespace, rows: list, files_opened: tuple[int, int, int]) -> None:
    lines = [
        "# Staged backfill + atomic publish vs publishing per node",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} cores, load "
        f"{os.getloadavg()[0]:.1f}. Command: `python bench/publish_bench.py --days {args.days} "
        f"--slots {args.slots} --repeats {args.repeats}`.",
        "",
        f"bench/publish_dag.py: the engine bench DAG (raw -> clean -> 7-day rolling, a running total, "
        f"a monthly fan-in; 0.5-1 s of simulated work per partition) with every asset a Delta table "
        f"read through the IO manager; {args.days} days, {args.slots} slots, rewriting a seeded lake. "
        "Whole `backfill run` command, each run in a fresh instance on a copy of the same lake.",
        "",
        "| policy | per-node (s) | staged (s) | staged / per-node | goal |",
        "| --- | --- | --- | --- | --- |",
    ]
    for policy, times, ratio in rows:
        lines.append(
            f"| {POLICIES[policy]} | {' / '.join(f'{t:.1f}' for t in times['per-node'])} | "
            f"{' / '.join(f'{t:.1f}' for t in times['staged'])} | **{ratio:.3f}** (medians) | "
            f"<= {GOAL} {'met' if ratio <= GOAL else 'NOT met'} |"
        )
    opened, needed, files = files_opened
    lines += [
        "",
        f"Overlay read of 2 of the 31 partitions of `raw` (one staged by a backfill, one published; "
        f"{files} files staged and published in all, {needed} in those two partitions): Spark opens "
        f"**{opened}** files.",
    ]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
