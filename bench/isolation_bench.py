"""Backfills never starve production (issues 24 and 44): production latency alone and during
an engine backfill, per isolation option, on one machine, instance and Spark server.

For each option, a fresh instance (the repo's dagster.yaml) and lake, and a Spark Connect
server of the option's own (the FAIR scheduler is a server setting). The options:
- off: no capacity and no reserve (`reserve_runs: 0`), workers not niced
  (PARTITION_ASSETS_BACKFILL_NICENESS=0), the server FIFO (spark.scheduler.mode=FIFO);
- pools: the deployment's capacity `partition_assets.backfills: {max_runs: 3,
  max_runs_under_production: 1}`, backfill workers niced (10), FAIR pools of issue 24
  (production weight 4, minShare 1), backfill scans not sliced;
- cores: as pools, production's minShare the server's cores (the default allocation file),
  no preemption;
- sliced: as cores, backfill sessions' scans cut into 8 tasks per core
  (spark/scheduler_pools.py; off by default);
- preempt (the default): as cores, and the server's listener kills a backfill's running
  tasks when a production stage comes, Spark running them again (spark/scheduler_pools.py).
Assets (`--asset`):
- example: production is the example's `daily_orders` and `daily_revenue` for the newest
  day (after the backfill's range, so no lease is shared); the backfill is the whole example
  (`--select '*'`); the newest day's inputs are seeded before any timing;
- spark-heavy: bench/spark_heavy_location.py's `heavy_daily` (several seconds of executor
  CPU a partition), production its newest day, the backfill its `--days` days before.
Production is each time a plain `dagster asset materialize` process, timed from start to
exit: once to warm the new server up (not timed), then `--alone` times with nothing else
running, then back to back during a `--days`-day engine backfill (`partition-assets
backfill run ... --max-parallel 4`, timed as a whole command: its makespan). The backfill's
cost: the same command over the `--days` days before those, with nothing else running (its
makespan alone; first, so that the later days' self-dependent partitions have their
predecessors), against its makespan during production's runs. Production back to
back is more work for the machine the better it is isolated (more of its runs end during
the backfill): so the makespans are compared per option, alone and during, not across.

Usage: python bench/isolation_bench.py [--asset spark-heavy] [--days 31] [--alone 5]
           [--options off,pools,cores,sliced,preempt] [--spark-port 15182] [--out bench/results/isolation.md]
The full run for the issue 44 figure on an idle machine: `make bench-isolation`.

Not measured: production launched through the instance's run queue (a daemon and a code
server); the capacity counts such runs the same way (partition_assets_tests/unit/test_capacity.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
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
from partition_assets.spark.resource import TASKS_PER_CORE_ENV
from partition_assets.spark.scheduler_pools import SLICED_TASKS_PER_CORE
from partition_assets_tests.support.instances import instance_env

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
START = date(2024, 1, 1)
GOAL_LATENCY = 1.25


@dataclass(frozen=True)
class Asset:
    location: list[str]  # the code location's flags, as dagster and partition-assets take them
    production: str  # the selection production materializes for the newest day
    backfill: str  # the selection the backfill runs over --days days
    seed: str | None  # what production reads for the newest day, materialized first


ASSETS = {
    "example": Asset(
        ["-m", "partition_assets.example"],
        "daily_orders,daily_revenue",
        "*",
        "key:events or key:countries or key:regions",
    ),
    "spark-heavy": Asset(["-f", str(REPO / "bench/spark_heavy_location.py")], "heavy_daily", "heavy_daily", None),
}
CAPPED = {"max_runs": 3, "max_runs_under_production": 1}
# Issue 24's allocation file: production weight 4 and minShare 1.
POOLS_OF_ISSUE_24 = """<?xml version="1.0"?>
<allocations>
  <pool name="production"><schedulingMode>FAIR</schedulingMode><weight>4</weight><minShare>1</minShare></pool>
  <pool name="backfill"><schedulingMode>FAIR</schedulingMode><weight>1</weight><minShare>0</minShare></pool>
</allocations>
"""
NOT_SLICED = {TASKS_PER_CORE_ENV: "0"}
# option: (capacity, environment, Spark server conf, preemption; "{pools_24}" is the path of POOLS_OF_ISSUE_24)
OPTIONS = {
    "off": (
        {"reserve_runs": 0},
        {"PARTITION_ASSETS_BACKFILL_NICENESS": "0", **NOT_SLICED},
        {"spark.scheduler.mode": "FIFO"},
        False,
    ),
    "pools": (CAPPED, NOT_SLICED, {"spark.scheduler.allocation.file": "{pools_24}"}, False),
    "cores": (CAPPED, NOT_SLICED, {}, False),
    "sliced": (CAPPED, {TASKS_PER_CORE_ENV: str(SLICED_TASKS_PER_CORE)}, {}, False),
    "preempt": (CAPPED, NOT_SLICED, {}, True),
}


@dataclass
class ModeResult:
    alone: list[float]
    during: list[float]
    makespan: float  # during production's runs
    makespan_alone: float
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
    return run_with_output(command, env, log)[0]


def run_with_output(command: list[str], env: dict[str, str], log) -> tuple[float, str]:
    """Runs `command` to its end; its seconds and output. A failure stops the bench, naming the command."""
    started = time.monotonic()
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {(done.stdout + done.stderr)[-3000:]}")
    log(f"  {seconds:6.1f} s  {' '.join(command[:3])} ...")
    return seconds, done.stdout + done.stderr


def production_command(asset: Asset, day: date) -> list[str]:
    return [str(BIN / "dagster"), "asset", "materialize", *asset.location, "--select", asset.production] + [
        "--partition",
        str(day),
    ]


def option_server(workdir: Path, conf: dict[str, str], preempt: bool, port: int) -> LocalConnectServer:
    """The Spark Connect server of an option's `conf` (its "{pools_24}" the path of issue
    24's allocation file, written under `workdir`) and preemption, not started yet."""
    pools_24 = workdir / "pools-of-issue-24.xml"
    pools_24.write_text(POOLS_OF_ISSUE_24)
    server_conf = {key: value.format(pools_24=pools_24) for key, value in conf.items()}
    return LocalConnectServer(port=port, conf=server_conf, state_dir=workdir / "state", preempt_backfill_tasks=preempt)


def backfill_command(asset: Asset, first: date, days: int) -> list[str]:
    last = first + timedelta(days=days - 1)
    selection = ["--select", asset.backfill, "--start", str(first), "--end", str(last), "--max-parallel", "4"]
    return [str(BIN / "partition-assets"), "backfill", "run", *asset.location, *selection]


def measure(mode: str, asset: Asset, days: int, alone: int, port: int, log) -> ModeResult:
    capacity, extra_env, conf, preempt = OPTIONS[mode]
    workdir = Path(tempfile.mkdtemp(prefix=f"isolation-bench-{mode}-"))
    server = option_server(workdir, conf, preempt, port)
    try:
        env = prepare(workdir, capacity, extra_env, port)
        server.ensure_running()
        # The backfill alone over [START, START + days), then during production over the next
        # `days` days; production materializes the day after them.
        during_start = START + timedelta(days=days)
        newest = during_start + timedelta(days=days)
        if asset.seed:
            log(f"{mode}: seeding {newest}")
            seed = ["--select", asset.seed, "--start", str(newest), "--end", str(newest), "--publish", "per-node"]
            run([str(BIN / "partition-assets"), "backfill", "run", *asset.location, *seed], env, log)
        load_before = os.getloadavg()[0]
        log(f"{mode}: warming the server up (not timed)")
        run(production_command(asset, newest), env, log)
        log(f"{mode}: production alone")
        alone_seconds = [run(production_command(asset, newest), env, log) for _ in range(alone)]
        log(f"{mode}: the backfill alone, over {days} days")
        makespan_alone, output = run_with_output(backfill_command(asset, START, days), env, log)
        # A table that needs approval (the example's spend) keeps the backfill staged, as the one
        # during production's runs: approved and published here (not timed), so that its leases
        # are free and the later days' running totals have their predecessor.
        backfill_id = re.search(r"^backfill ([0-9a-f]{12}):", output, re.MULTILINE)
        if backfill_id and "\npublished:" not in output:
            approve = ["backfill", "approve", backfill_id.group(1), "--by", "isolation-bench", "--force"]
            run([str(BIN / "partition-assets"), *approve], env, log)
        log(f"{mode}: production during a {days}-day backfill")
        started = time.monotonic()
        # Its output to a file: a pipe nobody reads while it runs fills, and blocks its workers' logging.
        output = workdir / "backfill.log"
        with output.open("w") as sink:
            process = subprocess.Popen(
                backfill_command(asset, during_start, days),
                env=env,
                cwd=REPO,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
            during = []
            while process.poll() is None:
                during.append(run(production_command(asset, newest), env, log))
        makespan = time.monotonic() - started
        if process.returncode != 0:
            log(f"{mode}: the backfill failed: {output.read_text()[-2000:]}")
        load = (load_before, os.getloadavg()[0])
        return ModeResult(alone_seconds, during, makespan, makespan_alone, process.returncode == 0, load)
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def ratio(during: list[float], alone: list[float], statistic) -> float:
    return statistic(during) / statistic(alone) if during else float("nan")


def report(asset_name: str, results: dict[str, ModeResult], days: int, argv: list[str]) -> str:
    """The asset's section of the results file: a row per option, the goals against the last
    option measured (the default) and `off`, and the raw seconds."""
    asset = ASSETS[asset_name]
    lines = [
        f"## {asset_name}",
        "",
        f"`python bench/isolation_bench.py {' '.join(argv)}`, measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on a "
        "2-core machine (1-minute load average before and after each option below).",
        f"Production: `dagster asset materialize --select {asset.production}` for the newest day, a process each "
        f"time. Backfill: `partition-assets backfill run --select '{asset.backfill}'` over {days} days, "
        "`--max-parallel 4`.",
        "",
        "| isolation | production alone: median / p95 | during the backfill: median / p95 (runs) "
        "| median during / alone | p95 during / alone | backfill makespan: alone / during production "
        "| load |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for mode, result in results.items():
        lines.append(
            f"| {mode} | {statistics.median(result.alone):.1f} s / {p95(result.alone):.1f} s "
            f"| {statistics.median(result.during):.1f} s / {p95(result.during):.1f} s ({len(result.during)}) "
            f"| {ratio(result.during, result.alone, statistics.median):.2f}x "
            f"| {ratio(result.during, result.alone, p95):.2f}x "
            f"| {result.makespan_alone:.1f} s / {result.makespan:.1f} s{'' if result.backfill_ok else ' (FAILED)'} "
            f"| {result.load[0]:.1f} -> {result.load[1]:.1f} |"
        )
    chosen = list(results)[-1]
    latency = ratio(results[chosen].during, results[chosen].alone, statistics.median)
    lines += ["", f"Goal: production's median during a backfill <= {GOAL_LATENCY}x alone ({chosen}: {latency:.2f}x, "]
    lines[-1] += "met)." if latency <= GOAL_LATENCY else "NOT met)."
    if "off" in results and chosen != "off":
        alone = results[chosen].makespan_alone / results["off"].makespan_alone
        lines[-1] += f" The backfill alone with {chosen} against off: {alone:.2f}x."
    lines += [
        "",
        "Raw seconds:",
        "",
        "```json",
        json.dumps({mode: vars(result) for mode, result in results.items()}, indent=1, default=str),
        "```",
    ]
    return "\n".join(lines)


def replace_section(text: str, asset_name: str, section: str) -> str:
    """`text` (the results file) with the asset's section between its markers replaced by
    `section`, or appended: each asset's figures stay until that asset is measured again."""
    begin, end = f"<!-- isolation_bench {asset_name} -->", f"<!-- /isolation_bench {asset_name} -->"
    block = f"{begin}\n{section}\n{end}"
    if begin in text and end in text:
        return text[: text.index(begin)] + block + text[text.index(end) + len(end) :]
    return f"{text.rstrip()}\n\n{block}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asset", choices=sorted(ASSETS), default="example")
    parser.add_argument("--days", type=int, default=31)
    parser.add_argument("--alone", type=int, default=5)
    parser.add_argument("--options", default=",".join(OPTIONS), help="comma-separated; the last is the one judged")
    parser.add_argument("--spark-port", type=int, default=15182)
    parser.add_argument("--out", default=str(REPO / "bench/results/isolation.md"))
    args = parser.parse_args()
    options = args.options.split(",")
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        parser.error(f"unknown options {unknown}: choose among {', '.join(OPTIONS)}")
    asset = ASSETS[args.asset]
    results = {mode: measure(mode, asset, args.days, args.alone, args.spark_port, print) for mode in options}
    out = Path(args.out)
    existing = out.read_text() if out.exists() else "# Isolation: production latency during a backfill\n"
    out.write_text(replace_section(existing, args.asset, report(args.asset, results, args.days, sys.argv[1:])))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
