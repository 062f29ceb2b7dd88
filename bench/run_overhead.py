"""Wall time of one `dagster asset materialize` run of a single partition, by Spark mode
and Dagster instance.

- connect: runs attach to the shared local Spark Connect server (the default);
- in_process: each run starts its own classic driver JVM;
- both on the default SQLite instance; connect also on PostgreSQL (a throwaway server,
  partition_assets_tests/support/postgres.py, with the README's Postgres configuration).

Usage: python bench/run_overhead.py [--runs N] [--instance sqlite postgres]
           [--out bench/results/run_overhead.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

# The repository's root, for partition_assets_tests.support (not installed with the package).
sys.path[:0] = [str(Path(__file__).resolve().parents[1])]
from partition_assets.spark import SparkResource
from partition_assets_tests.support.instances import instance_env
from partition_assets_tests.support.postgres import PostgresServer

REPO = Path(__file__).resolve().parents[1]
DAGSTER = str(Path(sys.executable).parent / "dagster")
MODES = {"connect": {}, "in_process": {"PARTITION_ASSETS_SPARK_IN_PROCESS": "1"}}
# (Spark mode, instance): both Spark modes on SQLite; the default mode on Postgres.
CASES = [("connect", "sqlite"), ("in_process", "sqlite"), ("connect", "postgres")]


def time_runs(mode_env: dict[str, str], runs: int, workdir: Path, postgres_url: str | None) -> list[float]:
    instance = instance_env(workdir / "dagster_home", postgres_url)
    env = {**os.environ, **mode_env, **instance, "PARTITION_ASSETS_LAKE": str(workdir / "lake")}
    seconds = []
    for run in range(runs):
        started = time.perf_counter()
        subprocess.run(
            [
                DAGSTER,
                "asset",
                "materialize",
                "-m",
                "partition_assets.example",
                "--select",
                "monthly_targets",
                "--partition",
                f"2024-{run + 1:02d}-01",
            ],
            cwd=REPO,
            env=env,
            check=True,
            capture_output=True,
        )
        seconds.append(time.perf_counter() - started)
    return seconds


def notes(median: dict[tuple[str, str], float]) -> list[str]:
    found = []
    if {("connect", "sqlite"), ("in_process", "sqlite")} <= median.keys():
        connect, in_process = median["connect", "sqlite"], median["in_process", "sqlite"]
        found.append(
            f"Attaching to the shared Spark Connect server saves {in_process - connect:.2f} s per run "
            f"({in_process / connect:.2f}x faster than a JVM per run)."
        )
    if {("connect", "sqlite"), ("connect", "postgres")} <= median.keys():
        sqlite, postgres = median["connect", "sqlite"], median["connect", "postgres"]
        found.append(
            f"The Postgres instance changes a run's wall time by {postgres - sqlite:+.2f} s against SQLite "
            f"({postgres / sqlite:.2f}x)."
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--instance", nargs="+", choices=["sqlite", "postgres"], default=["sqlite", "postgres"])
    parser.add_argument("--out", default=str(REPO / "bench/results/run_overhead.md"))
    args = parser.parse_args()

    SparkResource.from_env().local_server().ensure_running()
    results = {}
    with ExitStack() as stack:
        server = stack.enter_context(PostgresServer()) if "postgres" in args.instance else None
        for mode, instance in (case for case in CASES if case[1] in args.instance):
            url = server.create_database() if server and instance == "postgres" else None
            with tempfile.TemporaryDirectory() as workdir:
                results[mode, instance] = time_runs(MODES[mode], args.runs, Path(workdir), url)
    median = {case: statistics.median(seconds) for case, seconds in results.items()}
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    lines = [
        "# Per-run overhead: one single-partition `dagster asset materialize`",
        "",
        f"Command: `python bench/run_overhead.py --runs {args.runs} --instance {' '.join(args.instance)}` "
        f"(2 cores, local[2]); `uptime` after: `{uptime}`",
        "",
        "| Spark mode | instance | median s | runs (s) |",
        "| --- | --- | --- | --- |",
        *(
            f"| {mode} | {instance} | {median[mode, instance]:.2f} | {', '.join(f'{x:.2f}' for x in seconds)} |"
            for (mode, instance), seconds in results.items()
        ),
        "",
        *notes(median),
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
