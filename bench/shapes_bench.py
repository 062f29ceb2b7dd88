"""Backfill shapes on real Spark: the engine's whole command against Dagster's daemon backfill.

Usage: python bench/shapes_bench.py [--shapes wide gaps] [--days 31] [--gap-days 31] [--missing 6]
           [--slots 4] [--timeout 1800] [--spark-port 15112] [--out bench/results/shapes.md]

Both shapes backfill the example's hourly `events` and its daily fan-in `daily_orders`
(partition_assets.example) with `--slots` concurrent runs on one shared local Spark Connect
server, started once before either side (example_bench.example_environment); both sides of a
shape are measured in the same run, one after the other:
- wide and shallow (`wide`): `--days` days from 2024-01-01 on a fresh instance and lake per
  side. Goal (issue 12): the engine at least 1.5x faster than Dagster's single-run backfill.
- sparse gaps (`gaps`): a catch-up of scattered missing days. A seed instance and lake hold
  `--gap-days` days of both assets except `--missing` non-adjacent days, which were never
  materialized (the engine seeds them once with `--keys` of the other days; not timed against
  anything). The engine starts from its own copy of the seed's instance and lake and catches
  up what its instance lacks; Dagster from a copy of the seed's lake and a fresh instance (a
  backfill of explicit keys runs the same whatever the instance's history). Goal: the engine
  faster than Dagster's best policy.

Engine: `partition-assets backfill run -m partition_assets.example --select 'key:events or
key:daily_orders' --max-parallel <slots>` with `--start/--end` (wide) or the whole seeded
range and `--catch-up` (gaps), timed as a whole command from process start to exit
(engine_command.py), with its first node run's start. Dagster: stock `dagster dev` with its
backfill daemon; the backfill is launched with the `launchPartitionBackfill` mutation the UI's
Materialize dialog uses, for exactly the same (asset, partition) pairs (gaps: one range per
missing day and asset); makespan is launch -> last run's end (dagster_backfill.py).

Dagster's policy: each asset's own, BackfillPolicy.single_run() (one run per asset and
contiguous range), its fastest path for these assets. Its default policy (one run per
partition: 24 runs per day of `events`) is not measured here: on the engine bench DAG it does
not finish a 31-day backfill in 1500 s (bench/results/engine.md).

Not guaranteed: the machine is not quiet (the load averages are recorded with each figure);
sizes below the defaults are smoke tests, and the results file says so.
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
import dagster as dg
import dagster_backfill
from dagster_backfill import DaemonResult
from engine_command import CommandResult, day, range_args, versus_dagster
from example_bench import MODULE, example_environment, measure_daemon, run_example_command

from partition_assets.code_location import load_definitions

REPO = Path(__file__).resolve().parents[1]
ASSETS = ["events", "daily_orders"]
SELECTION = " or ".join(f"key:{asset}" for asset in ASSETS)
DAGSTER_POLICY = "each asset's own, BackfillPolicy.single_run()"
FULL = {"days": 31, "gap_days": 31, "missing": 6}  # the sizes; smaller ones are smoke tests
GOALS = {"wide": 1.5, "gaps": 1.0}  # engine speed-up over Dagster's best policy, at least
FIRST_RUN_GOAL = 3.0  # issue 12: command start -> first node running, on the example


def scattered_days(days: int, missing: int) -> list[int]:
    """`missing` day offsets spread evenly over `days` days, none adjacent to another, none the
    first or the last day."""
    return [(i + 1) * days // (missing + 1) for i in range(missing)]


def split_by_day(
    defs: dg.Definitions, keys: dict[str, list[str]], days: set[str]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """`keys` per asset split into those whose window starts on one of `days` and the others."""
    asset_graph = defs.resolve_asset_graph()
    inside: dict[str, list[str]] = {}
    outside: dict[str, list[str]] = {}
    for asset, partitions in keys.items():
        partitions_def = asset_graph.get(dg.AssetKey.from_user_string(asset)).partitions_def
        for key in partitions:
            start = partitions_def.time_window_for_partition_key(key).start.strftime("%Y-%m-%d")
            (inside if start in days else outside).setdefault(asset, []).append(key)
    return inside, outside


def measure_wide(defs, env: dict[str, str], args, log) -> dict:
    keys = dagster_backfill.planned_keys(defs, args.days, [dg.AssetKey(a) for a in ASSETS])
    workdir = Path(tempfile.mkdtemp(prefix="shapes-wide-engine-"))
    try:
        spec = ["--select", SELECTION, *range_args(args.days), "--max-parallel", str(args.slots)]
        engine = run_example_command(workdir, spec, env, keys, log)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    daemon = measure_daemon(defs, keys, env, days=args.days, slots=args.slots, timeout=args.timeout, log=log)
    return {"keys": keys, "engine": engine, "daemon": daemon}


def measure_gaps(defs, env: dict[str, str], args, log) -> dict:
    keys = dagster_backfill.planned_keys(defs, args.gap_days, [dg.AssetKey(a) for a in ASSETS])
    missing_days = [day(offset) for offset in scattered_days(args.gap_days, args.missing)]
    missing, present = split_by_day(defs, keys, set(missing_days))
    seed = Path(tempfile.mkdtemp(prefix="shapes-gaps-seed-"))
    engine_workdir = Path(tempfile.mkdtemp(prefix="shapes-gaps-engine-"))
    try:
        log(f"gaps: seeding {args.gap_days} days without {', '.join(missing_days)}")
        present_keys = ",".join(key for partitions in present.values() for key in partitions)
        seeded = run_example_command(
            seed, ["--select", SELECTION, "--keys", present_keys, "--max-parallel", str(args.slots)], env, present, log
        )
        if not seeded.all_succeeded:
            raise RuntimeError(f"seeding the gaps shape failed: {seeded.details()}\n{seeded.stderr_tail}")
        shutil.copytree(seed, engine_workdir, dirs_exist_ok=True)
        spec = ["--select", SELECTION, *range_args(args.gap_days), "--catch-up", "--max-parallel", str(args.slots)]
        engine = run_example_command(engine_workdir, spec, env, missing, log)
        daemon = measure_daemon(
            defs, missing, env, days=args.gap_days, slots=args.slots, timeout=args.timeout, log=log, seed=seed
        )
    finally:
        shutil.rmtree(seed, ignore_errors=True)
        shutil.rmtree(engine_workdir, ignore_errors=True)
    return {"keys": missing, "engine": engine, "daemon": daemon, "seeded": seeded, "missing_days": missing_days}


def _counts(keys: dict[str, list[str]]) -> str:
    return ", ".join(f"{asset} {len(partitions)}" for asset, partitions in keys.items())


def shape_report(shape: str, result: dict, args) -> list[str]:
    engine: CommandResult = result["engine"]
    daemon: DaemonResult = result["daemon"]
    ratio, sentence = versus_dagster(engine.seconds, {DAGSTER_POLICY: daemon})
    met = "met" if engine.all_succeeded and daemon.all_succeeded and ratio >= GOALS[shape] else "not met"
    complete = "" if engine.all_succeeded and daemon.all_succeeded else ", not every side succeeded"
    if shape == "wide":
        title = f"## Wide and shallow: hourly `events` -> `daily_orders`, {args.days} days"
        intro = [f"Fresh instance and lake on each side; {_counts(result['keys'])} (asset, partition) nodes."]
        engine_label = f"engine: `backfill run --select '{SELECTION}' {' '.join(range_args(args.days))}`"
        goal = f"engine at least {GOALS[shape]}x faster than Dagster's single-run backfill: {ratio:.2f}x, {met}"
        first = engine.first_run_after
        first_met = "met" if first is not None and first <= FIRST_RUN_GOAL else "not met"
        goals = [goal + complete, f"command start -> first node run {first or 0:.1f} s (goal <= 3 s: {first_met})"]
    else:
        seeded: CommandResult = result["seeded"]
        title = f"## Sparse gaps: catch-up of {args.missing} scattered missing days of {args.gap_days}"
        intro = [
            f"Missing (never materialized): {', '.join(result['missing_days'])}; {_counts(result['keys'])} "
            "(asset, partition) nodes to catch up.",
            f"Seed: the other days, materialized by the engine with `--keys` in {seeded.seconds:.1f} s "
            f"({seeded.runs} runs). The engine starts from a copy of the seed's instance and lake, "
            "Dagster from a copy of its lake and a fresh instance.",
            f"The engine's own count: `{engine.summary}`.",
        ]
        engine_label = f"engine: `backfill run --select '{SELECTION}' {' '.join(range_args(args.gap_days))} --catch-up`"
        goals = [f"engine faster than Dagster's best policy: {ratio:.2f}x, {met}{complete}"]
    return [
        title,
        "",
        *intro,
        "",
        "| backfill | makespan s | details |",
        "| --- | --- | --- |",
        f"| {engine_label} | {engine.seconds:.1f} | {engine.details()} |",
        f"| Dagster daemon, {DAGSTER_POLICY} | {daemon.makespan_cell()} | {daemon.details()} |",
        "",
        f"**{sentence}.**",
        "",
        f"Goals: {'; '.join(goals)}.",
        "",
        *([f"Engine command failed; stderr tail:\n\n```\n{engine.stderr_tail}\n```", ""] if engine.stderr_tail else []),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", choices=["wide", "gaps"], default=["wide", "gaps"])
    parser.add_argument("--days", type=int, default=FULL["days"], help="days of the wide shape")
    parser.add_argument("--gap-days", type=int, default=FULL["gap_days"], help="days the gaps shape's seed spans")
    parser.add_argument("--missing", type=int, default=FULL["missing"], help="scattered days missing from the seed")
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds for each Dagster daemon backfill")
    parser.add_argument("--spark-port", type=int, default=15112)
    parser.add_argument("--out", default=str(REPO / "bench/results/shapes.md"))
    args = parser.parse_args()
    if args.missing < 1 or args.gap_days < 2 * args.missing + 1:
        parser.error(f"--missing {args.missing} non-adjacent days need --gap-days of at least {2 * args.missing + 1}")

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    measure = {"wide": measure_wide, "gaps": measure_gaps}
    uptime_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    with example_environment(args.spark_port) as env:
        defs = load_definitions(MODULE)
        results = {shape: measure[shape](defs, env, args, log) for shape in args.shapes}
    uptime_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()

    sizes = {name: getattr(args, name) for name in FULL}
    smaller = [f"--{name.replace('_', '-')} {size}" for name, size in sizes.items() if size < FULL[name]]
    lines = [
        "# Backfill shapes on real Spark: the engine's whole command against Dagster's daemon backfill",
        "",
        f"Command: `{' '.join(['python bench/shapes_bench.py', *sys.argv[1:]])}` (`make bench` runs it with the "
        f"defaults: `--days {FULL['days']} --gap-days {FULL['gap_days']} --missing {FULL['missing']} --slots 4`)",
        "",
        *(
            [
                f"**Smoke test at a reduced size ({', '.join(smaller)}): these figures only show the bench works; "
                "they are not the issue's measurement.**",
                "",
            ]
            if smaller
            else []
        ),
        f"Machine: {os.cpu_count()} cores, shared with other work; `uptime` before: `{uptime_before}`; "
        f"after: `{uptime_after}`. Load averages per measurement are in the details (1/5/15 min).",
        "",
        f"Both sides: {args.slots} concurrent runs, Spark local[2] behind one shared Spark Connect server. Engine: "
        "whole command, process start -> exit (planning, worker start-up and publishing included), every node a "
        "Dagster run. Dagster: stock `dagster dev` (webserver + backfill daemon with its 30 s ticks, run queue with "
        "the same concurrency), launch -> last run's end; each asset's own policy, BackfillPolicy.single_run() "
        "(its default policy, one run per partition, is far slower: bench/results/engine.md).",
        "",
    ]
    for shape, result in results.items():
        lines += shape_report(shape, result, args)
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
