"""The Spark scheduler alone (issue 44): a production Spark job's seconds alone and while a
backfill session keeps the same Spark Connect server busy, per isolation option, without
Dagster processes around them (bench/isolation_bench.py measures the whole commands).

For each option, a Spark Connect server (local[2]) of its own and two sessions:
- backfill: joins the backfill pool and, when the option slices, cuts its scans
  (spark/scheduler_pools.py); it runs bench/spark_heavy_location.py's job (`--rows` rows)
  back to back for days before production's while "during" is measured;
- production: joins the production pool and runs the same job for its own day, `--jobs`
  times alone, then `--jobs` times during the backfill's jobs.
Options (as in bench/isolation_bench.py): off (FIFO), pools (issue 24's allocation file),
cores (production's minShare the server's cores), sliced (cores, and the backfill's scans in
8 tasks per core), preempt (cores, and the server kills the backfill's running tasks when a
production stage comes: the default).

Usage: python bench/spark_pools_bench.py [--jobs 5] [--rows 400000000] [--options off,pools,cores,sliced,preempt]
           [--spark-port 15182] [--out bench/results/isolation.md]
It rewrites its section of the results file (between its markers).
Not measured: Dagster's processes, the engine's capacity and niceness (the whole-command
bench has them).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]
from pyspark.sql import SparkSession

from bench.isolation_bench import option_server, replace_section
from bench.spark_heavy_location import DEFAULT_ROWS, heavy_sum
from partition_assets.spark.scheduler_pools import (
    BACKFILL_POOL,
    POOL_CONF,
    PRODUCTION_POOL,
    SLICED_TASKS_PER_CORE,
    backfill_slicing_conf,
)

CORES = 2
# option: (server conf, "{pools_24}" the path of issue 24's allocation file; whether the backfill is
# sliced; whether the server preempts)
OPTIONS = {
    "off": ({"spark.scheduler.mode": "FIFO"}, False, False),
    "pools": ({"spark.scheduler.allocation.file": "{pools_24}"}, False, False),
    "cores": ({}, False, False),
    "sliced": ({}, True, False),
    "preempt": ({}, False, True),
}


def timed(session: SparkSession, rows: int, day: str) -> float:
    started = time.monotonic()
    heavy_sum(session, rows, day)
    return time.monotonic() - started


def measure(option: str, jobs: int, rows: int, port: int) -> tuple[list[float], list[float], float]:
    """Production's job seconds alone and during the backfill's jobs, and the backfill's
    jobs per minute meanwhile."""
    conf, sliced, preempt = OPTIONS[option]
    workdir = Path(tempfile.mkdtemp(prefix=f"spark-pools-bench-{option}-"))
    server = option_server(workdir, conf, preempt, port)
    try:
        url = server.ensure_running()
        production, backfill = SparkSession.builder.remote(url).create(), SparkSession.builder.remote(url).create()
        production.conf.set(POOL_CONF, PRODUCTION_POOL)
        backfill.conf.set(POOL_CONF, BACKFILL_POOL)
        if sliced:
            for key, value in backfill_slicing_conf(CORES, SLICED_TASKS_PER_CORE).items():
                backfill.conf.set(key, value)
        timed(production, rows, "2024-02-01")  # warms the server up
        alone = [timed(production, rows, "2024-02-01") for _ in range(jobs)]
        stop, done = threading.Event(), []

        def backfill_days() -> None:
            while not stop.is_set():
                done.append(timed(backfill, rows, f"2024-01-{len(done) % 28 + 1:02d}"))

        worker = threading.Thread(target=backfill_days)
        started = time.monotonic()
        worker.start()
        time.sleep(1.0)  # the backfill's first job has its tasks running
        during = [timed(production, rows, "2024-02-01") for _ in range(jobs)]
        stop.set()
        worker.join()
        per_minute = 60 * len(done) / (time.monotonic() - started)
        production.stop()
        backfill.stop()
        return alone, during, per_minute
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5)
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    parser.add_argument("--options", default=",".join(OPTIONS))
    parser.add_argument("--spark-port", type=int, default=15182)
    parser.add_argument("--out", default=str(REPO / "bench/results/isolation.md"))
    args = parser.parse_args()
    lines = [
        "## Spark jobs only",
        "",
        f"`python bench/spark_pools_bench.py {' '.join(sys.argv[1:])}`, measured {datetime.now(UTC):%Y-%m-%d %H:%M} "
        "UTC (1-minute load average before and after each option).",
        "",
        "| option | production job alone: median | during a backfill: median | during / alone "
        "| backfill jobs/min | load |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for option in args.options.split(","):
        load = os.getloadavg()[0]
        alone, during, per_minute = measure(option, args.jobs, args.rows, args.spark_port)
        ratio = statistics.median(during) / statistics.median(alone)
        lines.append(
            f"| {option} | {statistics.median(alone):.2f} s | {statistics.median(during):.2f} s | {ratio:.2f}x "
            f"| {per_minute:.1f} | {load:.1f} -> {os.getloadavg()[0]:.1f} |"
        )
        print(lines[-1], flush=True)
    out = Path(args.out)
    existing = out.read_text() if out.exists() else "# Isolation: production latency during a backfill\n"
    out.write_text(replace_section(existing, "spark-jobs", "\n".join(lines)))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
