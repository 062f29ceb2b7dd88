"""Backfills never starve production (issue 24): production latency alone and during an
engine backfill, with isolation on and off, on one machine, instance and Spark server.

For each mode, a fresh instance (the repo's dagster.yaml) and lake, and a Spark Connect
server of the mode's own (the FAIR scheduler is a server setting):
- on: the deployment's capacity `partition_assets.backfills: {max_runs: 3,
  max_runs_under_production: 1}`, backfill workers niced (10), the server's FAIR pools;
- off: no capacity and no reserve (`reserve_runs: 0`), workers not niced
  (PARTITION_ASSETS_BACKFILL_NICENESS=0), the server FIFO (spark.scheduler.mode=FIFO).
Production is the example's daily assets `daily_orders` and `daily_revenue` for the newest
day (after the backfill's range, so no lease is shared), each time a plain
`dagster asset materialize` process, timed from start to exit. It runs `--alone` times
with nothing else running, then back to back during a `--days`-day engine backfill of the
whole example (`partition-assets backfill run --select '*' --max-parallel 4`, timed as a
whole command: its makespan). The newest day's inputs are seeded before any timing.

Usage: python bench/isolation_bench.py [--days 31] [--alone 5] [--spark-port 15182]
           [--out bench/results/isolation.md]

Not measured: production launched through the instance's run queue (a daemon and a code
server); the capacity counts such runs the same way (partition_assets_tests/unit/test_backfill_isolation.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import yaml

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]
from partition_assets.spark.connect_server import LocalConnectServer
from partition_assets_tests.support.instances import instance_env

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MODULE = "partition_assets.example"
START = date(2024, 1, 1)
PRODUCTION = "daily_orders,daily_revenue"
# What production reads for the newest day.
SEED = "key:events or key:countries or key:regions"
GOAL_LATENCY, GOAL_MAKESPAN = 1.25, 1.3
MODES = {
    "on": ({"max_runs": 3, "max_runs_under_production": 1}, {}, {}),
    "off": ({"reserve_runs": 0}, {"PARTITION_ASSETS_BACKFILL_NICENESS": "0"}, {"spark.scheduler.mode": "FIFO"}),
}


@dataclass
class ModeResult:
    alone: list[float]
    during: list[float]
    makespan: float
    backfill_ok: bool
    load: tuple[float, float]  # 1-minute load average before and after


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def prepare(workdir: Path, capacity: dict, extra_env: dict[str, str], port: int) -> dict[str, str]:
    """A fresh instance and lake under `workdir` with `capacity`; the environment that names them."""
    env = {**os.environ, **instance_env(workdir / "dagster_home"), **extra_env}
    env.update(
        PARTITION_ASSETS_LAKE=str(workdir / "lake"),
        PARTITION_ASSETS_SPARK_CONNECT_PORT=str(port),
        PARTITION_ASSETS_STATE_DIR=str(workdir / "state"),
    )
    config_path = workdir / "dagster_home" / "dagster.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["partition_assets"]["backfills"] = capacity
    config_path.write_text(yaml.safe_dump(config))
    return env


def run(command: list[str], env: dict[str, str], log) -> float:
    """Runs `command` to its end; its seconds. A failure stops the bench, naming the command."""
    started = time.monotonic()
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stdout[-3000:]}")
    log(f"  {seconds:6.1f} s  {' '.join(command[:3])} ...")
    return seconds


def production_command(day: date) -> list[str]:
    return [str(BIN / "dagster"), "asset", "materialize", "-m", MODULE, "--select", PRODUCTION, "--partition", str(day)]


def measure(mode: str, days: int, alone: int, port: int, log) -> ModeResult:
    capacity, extra_env, spark_conf = MODES[mode]
    workdir = Path(tempfile.mkdtemp(prefix=f"isolation-bench-{mode}-"))
    server = LocalConnectServer(port=port, conf=spark_conf, state_dir=workdir / "state")
    try:
        env = prepare(workdir, capacity, extra_env, port)
        server.ensure_running()
        newest = START + timedelta(days=days)
        log(f"{mode}: seeding {newest}")
        seed = ["--select", SEED, "--start", str(newest), "--end", str(newest), "--publish", "per-node"]
        run([str(BIN / "partition-assets"), "backfill", "run", "-m", MODULE, *seed], env, log)
        load_before = os.getloadavg()[0]
        log(f"{mode}: production alone")
        alone_seconds = [run(production_command(newest), env, log) for _ in range(alone)]
        log(f"{mode}: production during a {days}-day backfill")
        last = START + timedelta(days=days - 1)
        backfill = ["--select", "*", "--start", str(START), "--end", str(last), "--max-parallel", "4"]
        started = time.monotonic()
        # Its output to a file: a pipe nobody reads while it runs fills, and blocks its workers' logging.
        output = workdir / "backfill.log"
        with output.open("w") as sink:
            process = subprocess.Popen(
                [str(BIN / "partition-assets"), "backfill", "run", "-m", MODULE, *backfill],
                env=env,
                cwd=REPO,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
            during = []
            while process.poll() is None:
                during.append(run(production_command(newest), env, log))
        makespan = time.monotonic() - started
        if process.returncode != 0:
            log(f"{mode}: the backfill failed: {output.read_text()[-2000:]}")
        return ModeResult(alone_seconds, during, makespan, process.returncode == 0, (load_before, os.getloadavg()[0]))
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def report(results: dict[str, ModeResult], days: int, argv: list[str]) -> str:
    on, off = results["on"], results["off"]
    lines = [
        "# Isolation: production latency during a backfill",
        "",
        f"`python bench/isolation_bench.py {' '.join(argv)}`, measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on a "
        "2-core machine shared with other work (1-minute load average before and after each mode below).",
        f"Production: `dagster asset materialize --select {PRODUCTION}` for the newest day, a process each time. "
        f"Backfill: `partition-assets backfill run --select '*'` over {days} days, `--max-parallel 4`.",
        "",
        "| isolation | production alone: median / p95 | during the backfill: median / p95 (runs) "
        "| p95 during / alone | backfill makespan | load |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for mode, result in results.items():
        ratio = p95(result.during) / p95(result.alone) if result.during else float("nan")
        lines.append(
            f"| {mode} | {statistics.median(result.alone):.1f} s / {p95(result.alone):.1f} s "
            f"| {statistics.median(result.during):.1f} s / {p95(result.during):.1f} s ({len(result.during)}) "
            f"| {ratio:.2f}x | {result.makespan:.1f} s{'' if result.backfill_ok else ' (FAILED)'} "
            f"| {result.load[0]:.1f} -> {result.load[1]:.1f} |"
        )
    latency = p95(on.during) / p95(on.alone)
    makespan = on.makespan / off.makespan
    lines += [
        "",
        f"Goals: production p95 during a backfill <= {GOAL_LATENCY}x alone (with isolation: {latency:.2f}x, "
        f"{'met' if latency <= GOAL_LATENCY else 'NOT met'}); backfill makespan with isolation <= "
        f"{GOAL_MAKESPAN}x without ({makespan:.2f}x, {'met' if makespan <= GOAL_MAKESPAN else 'NOT met'}).",
        "",
        "Raw seconds:",
        "",
        "```json",
        json.dumps({mode: vars(result) for mode, result in results.items()}, indent=1, default=str),
        "```",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=31)
    parser.add_argument("--alone", type=int, default=5)
    parser.add_argument("--spark-port", type=int, default=15182)
    parser.add_argument("--out", default=str(REPO / "bench/results/isolation.md"))
    args = parser.parse_args()
    results = {mode: measure(mode, args.days, args.alone, args.spark_port, print) for mode in MODES}
    Path(args.out).write_text(report(results, args.days, sys.argv[1:]))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
