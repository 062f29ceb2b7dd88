"""Scale: a 365-day backfill of the example's hourly `events` + daily `daily_orders`
(24 x 365 + 365 = 9,125 nodes), the coordinator's cost apart from the runs and, with
--real, a real run (issue 12, point 5: coordinator <= 1 GB, scheduling <= 1 ms a node).

a) Without runs (partition_assets_tests/support/scale.py): plans the graph (timed apart), then runs
   the real coordinator (`BackfillRun`: the engine loop, the backfill record, leases, the
   Dagster backfill mirror on a fresh DAGSTER_HOME's instance, a progress line per node as
   the CLI prints it, the gate and a publish of nothing) with runs that succeed as they are
   launched. Default batching and --no-batch (one run per node, the most units), each in a
   fresh process: milliseconds per node, CPU seconds, peak RSS of that process.
b) --real: `partition-assets backfill run -m partition_assets.example --select 'key:events
   or key:daily_orders' --start 2024-01-01 --end <last day>` (4 concurrent runs) on a fresh
   lake and DAGSTER_HOME, against a local Spark Connect server this bench starts on
   --spark-port: wall time, and the peak RSS (VmHWM, polled from /proc) of the coordinator
   process and summed over its descendants (the run workers). Takes many minutes: run it
   on a quiet machine only.

c) The publish at 1,000 / 3,000 / 9,125 nodes (--publish-days 40 120 365), with the whole
   backfill in the same call: bench/publish_at_scale.py.
d) A cascade over a generated lineage of 500 / 1,000 / 2,000 assets (--lineage): load,
   impact list, plan, freeze, coordinator CPU per node, peak memory, mirror tick:
   bench/lineage_bench.py (its shape: bench/lineage_defs.py). The closing note extrapolates
   each figure linearly to 12,000 assets and names the first goal it would miss.
   --lineage-real 200: the same cascade run for real on a 200-asset lineage (the CLI, real
   Dagster runs on warm local workers; its assets store nothing, so no Spark).
e) The backfill page of a 100,000-node backfill of that lineage (--ui-assets 2000 --ui-days
   46) through a real webserver's GraphQL while the mirror writes progress:
   bench/ui_scale_bench.py.

Usage: python bench/scale_bench.py [--days 365] [--profile] [--real] [--spark-port 15301]
           [--max-load 2] [--publish-days 40 120 365] [--lineage 500 1000 2000]
           [--lineage-days 30] [--lineage-real 200] [--ui-assets 2000] [--ui-days 46] [--out bench/results/scale.md]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

# This checkout's package and test helpers, even when the installed package is another work tree's.
sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

import lineage_bench
import publish_at_scale
import ui_scale_bench

from partition_assets_tests.support.scale import (
    EXAMPLE,
    FIRST_DAY,
    SELECTION,
    fresh_environment,
    schedule_in_fresh_process,
)

REPO = Path(__file__).resolve().parents[1]
GOAL_MS_PER_NODE = 1.0
GOAL_COORDINATOR_MB = 1024
GOAL_PUBLISH_SECONDS = 5.0  # at 9,125 nodes: 0.5 ms a node
GOAL_PLAN_SECONDS = 30.0  # plan + impact list of the lineage's cascade
GOAL_LINEAGE_MB = 2048
GOAL_MIRROR_TICK_MS = 100.0
GOAL_PAGE_SECONDS = 3.0  # the backfill page of a 100,000-node backfill, through GraphQL
GOAL_STALE_SECONDS = 2.0  # its progress current within
PLATFORM_ASSETS = 12_000  # reference 002's platform, for the extrapolation
POLL_SECONDS = 0.5


def measure_without_runs(days: int, batch: bool, profile: bool, log) -> dict:
    """Part a) in a fresh process with a fresh instance, lake and state folder."""
    [cost] = schedule_in_fresh_process([days], batch, profile=profile)
    log(
        f"  {'batch' if batch else 'no-batch'}{' (profiled)' if profile else ''}: {cost.nodes} nodes in "
        f"{cost.units} units, {cost.cpu_ms_per_node:.3f} CPU ms/node, peak RSS {cost.peak_rss_mb:.0f} MB"
    )
    return {**asdict(cost), "cpu_ms_per_node": cost.cpu_ms_per_node}


def _peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident memory (VmHWM), None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def _descendants(pid: int) -> set[int]:
    """Every live descendant of `pid`, from each process's parent in /proc/<pid>/stat."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the command
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _run_watched(command: list[str], env: dict[str, str], root: Path) -> dict:
    """Runs `command` from REPO (its output under `root`): wall seconds, exit code, stdout
    lines, stderr's tail, and the peak RSS (VmHWM, polled) of the process and, summed over
    those alive together, of its descendants."""
    coordinator_mb, descendants_mb, seen = 0.0, 0.0, set()
    load_before = os.getloadavg()
    began = time.perf_counter()
    with open(root / "stdout", "w") as out, open(root / "stderr", "w") as err:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=err)
        while process.poll() is None:
            coordinator_mb = max(coordinator_mb, _peak_rss_mb(process.pid) or 0.0)
            alive = _descendants(process.pid)
            seen |= alive
            # Those alive together: the run workers, and short-lived helpers beside them.
            descendants_mb = max(descendants_mb, sum(_peak_rss_mb(child) or 0.0 for child in alive))
            time.sleep(POLL_SECONDS)
    lines = (root / "stdout").read_text().splitlines()
    return {
        "seconds": time.perf_counter() - began,
        "returncode": process.returncode,
        "summary": next((line for line in reversed(lines) if line.startswith("backfill ")), ""),
        "phases": [line for line in lines if line.startswith(("gate:", "published:"))],
        "coordinator_peak_mb": coordinator_mb,
        "descendants_peak_mb": descendants_mb,
        "descendants": len(seen),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "stderr_tail": (root / "stderr").read_text().splitlines()[-15:] if process.returncode else [],
    }


def measure_real_run(days: int, spark_port: int, log, inspect: Callable[[Path], dict] | None = None) -> dict:
    """Part b): the CLI backfill on real Spark, with the coordinator's and its workers' peak RSS;
    `inspect(root)` (the run's DAGSTER_HOME, lake and state under `root`), when given, measures
    more from what the run left before it is deleted: its answer is the result's "inspected"."""
    from partition_assets.spark import SparkResource

    root = Path(tempfile.mkdtemp(prefix="scale-bench-real-"))
    env = {
        **os.environ,
        **fresh_environment(root),
        "PARTITION_ASSETS_SPARK_CONNECT_PORT": str(spark_port),
    }
    last_day = (FIRST_DAY + timedelta(days=days - 1)).isoformat()
    command = [
        *(sys.executable, "-m", "partition_assets", "backfill", "run", "-m", EXAMPLE),
        *("--select", SELECTION, "--start", FIRST_DAY.isoformat(), "--end", last_day, "--max-parallel", "4"),
    ]
    os.environ.update({k: env[k] for k in ("PARTITION_ASSETS_STATE_DIR", "PARTITION_ASSETS_SPARK_CONNECT_PORT")})
    server = SparkResource.from_env().local_server()
    try:
        server.ensure_running()  # before the clock: the JVM's start is not the backfill's
        log(f"  real {days}d: {' '.join(command[1:])}")
        result = _run_watched(command, env, root)
        if inspect is not None and result["returncode"] == 0:
            result["inspected"] = inspect(root)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    log(
        f"  real {days}d: {result['seconds']:.0f} s, exit {result['returncode']}, "
        f"coordinator {result['coordinator_peak_mb']:.0f} MB"
    )
    return result


def measure_lineage_real_run(assets: int, days: int, log) -> dict:
    """Part d), for real: `partition-assets backfill run` of the lineage bench's cascade on an
    `assets`-asset lineage (no Spark: its assets store nothing), on a fresh lake and instance."""
    spec = lineage_bench.cascade_spec(assets, days)
    root = Path(tempfile.mkdtemp(prefix="scale-bench-lineage-"))
    env = {**os.environ, **fresh_environment(root), "PARTITION_ASSETS_BENCH_ASSETS": str(assets)}
    command = [
        *(sys.executable, "-m", "partition_assets", "backfill", "run", "-f", lineage_bench.LINEAGE),
        *("--select", spec.selection, "--downstream", "--start", spec.start, "--end", spec.end),
        *("--max-parallel", "4"),
    ]
    try:
        log(f"  lineage real {assets} assets, {days}d")
        result = _run_watched(command, env, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    log(f"  lineage real: {result['seconds']:.0f} s, exit {result['returncode']}, {result['summary']}")
    return {**result, "assets": assets, "days": days}


def _load(loads) -> str:
    return "/".join(f"{x:.1f}" for x in loads)


def _per_node(seconds: float, nodes: int) -> str:
    return f"{1000 * seconds / nodes:.3f}"


def report(
    days: int,
    measured: list[dict],
    profiled: dict | None,
    real: dict | None,
    real_note: str,
    uptime: str,
    command: str,
    published: list[dict],
    lineage: list[dict],
    lineage_real: dict | None,
    ui: dict | None,
) -> str:
    rows = [
        f"| {'default batching' if m['batch'] else '`--no-batch` (one run per node)'} | {m['nodes']:,} | "
        f"{m['units']:,} | {m['plan_seconds']:.2f} | {m['coordinate_seconds']:.2f} | {m['coordinate_cpu_seconds']:.2f} "
        f"| {_per_node(m['coordinate_seconds'], m['nodes'])} | **{m['cpu_ms_per_node']:.3f}** | "
        f"{m['node_loop_seconds']:.2f} | {m['node_loop_cpu_seconds']:.2f} | "
        f"{_per_node(m['node_loop_cpu_seconds'], m['nodes'])} | {m['rss_before_mb']:.0f} | "
        f"**{m['peak_rss_mb']:.0f}** |"
        for m in measured
    ]
    worst_ms = max(m["cpu_ms_per_node"] for m in measured)
    worst_mb = max(m["peak_rss_mb"] for m in measured)
    lines = [
        f"# Scale: {days} days of hourly `events` + daily `daily_orders`",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {os.cpu_count()} cores, shared with other work; `uptime` before: `{uptime}`.",
        "",
        "## Coordinating without runs",
        "",
        "The real coordinator (`BackfillRun`: engine loop, backfill record, leases, Dagster backfill mirror on a "
        "fresh instance, a progress line per node, gate and an empty publish) with runs that succeed as they are "
        "launched; each row in a fresh process. *Coordinator* is the whole call; the *node loop* runs from the "
        "first launch to the last result. CPU is the process's (every thread: the mirror's writes too), what "
        "the coordinator costs however busy the machine; wall time also holds the waits for a busy CPU.",
        "",
        "| batching | nodes | runs | plan s | coordinator wall s | CPU s | wall ms/node | CPU ms/node | "
        "node loop wall s | CPU s | loop CPU ms/node | RSS before planning MB | peak RSS MB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        f"Goals: scheduling <= {GOAL_MS_PER_NODE:.0f} ms a node: worst {worst_ms:.3f} CPU ms "
        f"({'met' if worst_ms <= GOAL_MS_PER_NODE else 'NOT met'}); coordinator <= {GOAL_COORDINATOR_MB} MB: "
        f"peak {worst_mb:.0f} MB ({'met' if worst_mb <= GOAL_COORDINATOR_MB else 'NOT met'}).",
        "",
        "## A real run",
        "",
    ]
    if real is None:
        lines.append(real_note)
    else:
        ok = "" if real["returncode"] == 0 else f" (exit {real['returncode']}: {' / '.join(real['stderr_tail'])})"
        lines += [
            f"`partition-assets backfill run` of the same {days} days, 4 concurrent runs, real Spark (local "
            f"Spark Connect server started before the clock), fresh lake and DAGSTER_HOME{ok}:",
            "",
            f"- wall time: {real['seconds']:.0f} s; {real['summary']}; {'; '.join(real['phases'])}",
            f"- coordinator peak RSS: **{real['coordinator_peak_mb']:.0f} MB** "
            f"({'met' if real['coordinator_peak_mb'] <= GOAL_COORDINATOR_MB else 'NOT met'}: <= "
            f"{GOAL_COORDINATOR_MB} MB); its descendant processes (the run workers, and short-lived helpers; "
            f"{real['descendants']} seen): at most {real['descendants_peak_mb']:.0f} MB summed over those alive "
            f"together (each one's VmHWM, polled every {POLL_SECONDS} s)",
            f"- load {_load(real['load_before'])} -> {_load(real['load_after'])}",
        ]
    lines += [
        "",
        "The real run's gate and publish at 1,000, 3,000 and 9,125 nodes, with the publish's split (table "
        "commits, Dagster's records, ledger): [publish_real.md](publish_real.md) (`bench/publish_real.py`).",
    ]
    lines += publish_section(published) + lineage_section(lineage) + lineage_real_section(lineage_real) + ui_section(ui)
    if profiled:
        lines += [
            "",
            "## Profile (default batching, in a run of its own; top functions by own time)",
            "",
            "```",
            profiled["profile"].strip(),
            "```",
        ]
    return "\n".join(lines) + "\n"


def _met(value: float, goal: float) -> str:
    return "met" if value <= goal else "NOT met"


def _not_run(title: str, flag: str) -> list[str]:
    return ["", f"## {title}", "", f"Not run (`{flag}` empty)."]


def publish_section(published: list[dict]) -> list[str]:
    """Part c): the publish at each size, with the whole backfill in the same call."""
    if not published:
        return _not_run("Publish at scale", "--publish-days")
    rows = [
        f"| {p['days']} | {p['nodes']:,} | {p['runs']:,} | {p['materialized_partitions']:,} | {p['plan_seconds']:.2f} "
        f"| {p['backfill_seconds']:.2f} | **{p['publish_seconds']:.2f}** | {p['publish_cpu_seconds']:.2f} | "
        f"{_per_node(p['publish_seconds'], p['nodes'])} | {p['publish_statements']:,} |"
        for p in published
    ]
    largest = published[-1]
    return [
        "",
        "## Publish at scale (bench/publish_at_scale.py)",
        "",
        "The example's `events` + `daily_orders`, staged, in a fresh process each: plan, then the real coordinator "
        "(engine loop, record, leases, mirror, gate, publish) with runs that succeed as they are launched and are "
        "stored in the instance as the engine's runs are, so that the publish reads every node's state and run "
        "and records a materialization per node in its publish run. *Backfill* is the whole coordinator call, the "
        "publish inside it; *statements* are the SQL statements the publish sent to the instance. No table holds "
        "staged files (no Spark): Delta commits and file moves are not in these figures.",
        "",
        "| days | nodes | runs | partitions materialized | plan s | backfill s | publish s | publish CPU s | "
        "publish ms/node | publish statements |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        f"Goal: publish of {largest['nodes']:,} nodes <= {GOAL_PUBLISH_SECONDS:.0f} s: "
        f"{largest['publish_seconds']:.2f} s ({_met(largest['publish_seconds'], GOAL_PUBLISH_SECONDS)}); "
        "before this change the publish wrote one event per node "
        "(~2 ms a node: 19.6 s at 9,125 nodes on a quiet machine, issue 27).",
    ]


def _slope(rows: list[dict], key: str) -> float:
    """How `key` grows per asset between the two largest sizes measured."""
    low, high = rows[-2], rows[-1]
    return (high[key] - low[key]) / (high["assets"] - low["assets"])


def _at(rows: list[dict], key: str, assets: int) -> float:
    """`key` extrapolated linearly to `assets` from the two largest sizes measured."""
    return rows[-1][key] + _slope(rows, key) * (assets - rows[-1]["assets"])


def _plan_and_impact(row: dict) -> float:
    return row["plan_seconds"] + row["impact_seconds"]


def lineage_section(lineage: list[dict]) -> list[str]:
    """Part d): the lineage's cascade at each size, its goals and the extrapolation."""
    if not lineage:
        return _not_run("A large lineage", "--lineage")
    rows = [
        f"| {m['assets']:,} | {m['planned_assets']:,} | {m['nodes']:,} | {m['runs']:,} | {m['load_seconds']:.2f} | "
        f"{m['impact_seconds']:.2f} ({m['impact_assets']:,} assets) | {m['plan_seconds']:.2f} | "
        f"{m['freeze_seconds']:.2f} | {m['coordinator_seconds']:.2f} | {m['coordinator_cpu_seconds']:.2f} | "
        f"**{m['cpu_ms_per_node']:.3f}** | **{m['peak_rss_mb']:.0f}** | {m['mirror_ticks']} | "
        f"{m['mirror_tick_cpu_median_ms']:.0f} / **{m['mirror_tick_cpu_max_ms']:.0f}** | "
        f"{m['mirror_tick_median_ms']:.0f} / {m['mirror_tick_max_ms']:.0f} |"
        for m in lineage
    ]
    largest = lineage[-1]
    for m in lineage:
        m["plan_and_impact_seconds"] = _plan_and_impact(m)
    goals = [  # (what, key, goal, unit)
        ("plan + impact", "plan_and_impact_seconds", GOAL_PLAN_SECONDS, "s"),
        ("scheduling CPU per node", "cpu_ms_per_node", GOAL_MS_PER_NODE, "ms"),
        ("coordinator peak RSS", "peak_rss_mb", GOAL_LINEAGE_MB, "MB"),
        ("mirror tick (largest, its CPU)", "mirror_tick_cpu_max_ms", GOAL_MIRROR_TICK_MS, "ms"),
    ]
    quoted = [
        f"- {what} <= {goal:g} {unit}: {largest[key]:.2f} {unit} at {largest['assets']:,} assets "
        f"({_met(largest[key], goal)}); at {PLATFORM_ASSETS:,} assets, extrapolated: "
        f"{_at(lineage, key, PLATFORM_ASSETS):.1f} {unit} ({_met(_at(lineage, key, PLATFORM_ASSETS), goal)})"
        for what, key, goal, unit in goals
    ]
    already = [what for what, key, goal, _ in goals if largest[key] > goal]
    missed = [
        (what, key, goal) for what, key, goal, _ in goals if largest[key] <= goal < _at(lineage, key, PLATFORM_ASSETS)
    ]
    first = min(missed, key=lambda m: _assets_reaching(lineage, m[1], m[2]), default=None)
    at_platform = [(what, _at(lineage, key, PLATFORM_ASSETS) / goal) for what, key, goal, _ in goals]
    closest = max(at_platform, key=lambda share: share[1])
    verdict = (f"Missed already at {largest['assets']:,} assets: **{', '.join(already)}**. " if already else "") + (
        f"The first limit that {PLATFORM_ASSETS:,} assets would break besides, on these figures: **{first[0]}**, "
        f"which reaches its goal at about {_assets_reaching(lineage, first[1], first[2]):,.0f} assets."
        if first
        else f"No other goal would break at {PLATFORM_ASSETS:,} assets on a linear extrapolation of these figures; "
        f"the closest to its goal there: **{closest[0]}** ({closest[1]:.0%} of it)."
    )
    return [
        "",
        "## A large lineage (bench/lineage_bench.py, shape in bench/lineage_defs.py)",
        "",
        "A 30-day backfill of 20 roots with `--downstream` over a generated lineage (10 layers, 3 parents "
        "an asset, hourly roots, static x daily and static assets), in a fresh process per size: load (import "
        "and asset graph), impact list (the roots planned alone, then the assets outside that read them), plan "
        "(the cascade), freeze and unfreeze of every planned asset, and the real coordinator with runs that "
        "succeed as they are launched (CPU is the process's, the mirror's thread included). *Mirror tick*: "
        "each poll of the mirror's thread (the stored status read; the progress reported since the last poll "
        "serialized, per asset, and written), median / largest, in the thread's CPU time (what a tick costs) "
        "and in wall time, which also holds the tick's waits for the GIL: with runs that succeed at once the "
        "coordinator's loop never waits, and takes the GIL back every few milliseconds. The code location is "
        "executed once (load); impact and plan read it from the process's cache, as one backfill command does.",
        "",
        "| assets | planned assets | nodes | runs | load s | impact s | plan s | freeze s | coordinator wall s | "
        "CPU s | CPU ms/node | peak RSS MB | mirror ticks | mirror tick CPU ms | mirror tick wall ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        "Goals, at the largest size and extrapolated linearly (from the two largest sizes) to the "
        f"{PLATFORM_ASSETS:,} assets of reference 002's platform:",
        "",
        *quoted,
        "",
        verdict,
    ]


def lineage_real_section(real: dict | None) -> list[str]:
    """Part d), for real: the cascade run on a slice of the lineage."""
    if real is None:
        return ["", "## The lineage's cascade, run for real", "", "Not run (`--lineage-real 0`)."]
    ok = "" if real["returncode"] == 0 else f" (exit {real['returncode']}: {' / '.join(real['stderr_tail'])})"
    return [
        "",
        f"## The lineage's cascade, run for real on {real['assets']:,} assets",
        "",
        f"`partition-assets backfill run -f bench/lineage_defs.py --downstream` of the same {real['days']}-day "
        f"cascade on the {real['assets']:,}-asset lineage, `--max-parallel 4`, real Dagster runs on the "
        f"engine's warm local workers (no Spark: the assets store nothing), fresh lake and DAGSTER_HOME{ok}:",
        "",
        f"- wall time: {real['seconds']:.0f} s; {real['summary']}; {'; '.join(real['phases'])}",
        f"- coordinator peak RSS: **{real['coordinator_peak_mb']:.0f} MB**; its descendants (the run "
        f"workers; {real['descendants']} seen): at most {real['descendants_peak_mb']:.0f} MB summed over those "
        "alive together",
        f"- load {_load(real['load_before'])} -> {_load(real['load_after'])}",
    ]


def ui_section(ui: dict | None) -> list[str]:
    """Part e): the backfill page of a 100,000-node backfill while its mirror writes progress."""
    if ui is None:
        return ["", "## The backfill page at 100,000 nodes", "", "Not run (`--ui-days 0`)."]
    slowest = max(ui["first_load_seconds"], ui["load_max_seconds"])
    return [
        "",
        "## The backfill page at 100,000 nodes (bench/ui_scale_bench.py)",
        "",
        f"The lineage at {ui['assets']:,} assets, a {ui['nodes']:,}-node cascade ({ui['planned_assets']:,} assets), "
        "mirrored into a fresh `dagster dev`'s instance by the real `DagsterBackfillMirror`, fed by a fake "
        f"progress source reporting {ui['rate']:.0f} node successes a second ({ui['reported']:,} reported while "
        "measured); meanwhile the page's own GraphQL query (`BackfillDetailsQuery`, with its fragments, as "
        f"Dagster's UI sends it) every {ui_scale_bench.POLL} s ({ui['queries']} queries). *Staleness*: how long "
        "before a query the source had reported the first success its answer does not count.",
        "",
        "| nodes | mirror created s | first page load s | page load median / largest s | "
        "staleness median / largest s | mirror ticks | tick median / largest ms |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        f"| {ui['nodes']:,} | {ui['create_seconds']:.2f} | **{ui['first_load_seconds']:.2f}** | "
        f"{ui['load_median_seconds']:.2f} / **{ui['load_max_seconds']:.2f}** | "
        f"{ui['stale_median_seconds']:.2f} / **{ui['stale_max_seconds']:.2f}** | {ui['ticks']} | "
        f"{ui['tick_median_ms']:.0f} / {ui['tick_max_ms']:.0f} |",
        "",
        f"Goals: the page loads in <= {GOAL_PAGE_SECONDS:.0f} s: largest {slowest:.2f} s "
        f"({_met(slowest, GOAL_PAGE_SECONDS)}); progress current "
        f"within {GOAL_STALE_SECONDS:.0f} s: largest staleness {ui['stale_max_seconds']:.2f} s "
        f"({_met(ui['stale_max_seconds'], GOAL_STALE_SECONDS)}). The page itself re-sends the query every 10 s "
        "while a backfill runs (Dagster's interval): what it shows is at most that much older.",
        "",
        f"At {PLATFORM_ASSETS:,} assets: Dagster reads the whole backfill record and counts every asset's "
        "partitions for each page query, so its cost grows with the assets, whatever the nodes; linearly from "
        f"this size ({1000 * slowest / ui['planned_assets']:.2f} ms an asset), the page would take "
        f"{slowest / ui['planned_assets'] * PLATFORM_ASSETS:.0f} s "
        f"({_met(slowest / ui['planned_assets'] * PLATFORM_ASSETS, GOAL_PAGE_SECONDS)}); it reaches its goal at "
        f"about {GOAL_PAGE_SECONDS / slowest * ui['planned_assets']:,.0f} assets (planned, at this many nodes an "
        "asset), before any goal of the lineage above.",
    ]


def _assets_reaching(rows: list[dict], key: str, goal: float) -> float:
    """The asset count at which `key`, extrapolated linearly from the two largest sizes, reaches `goal`."""
    high, slope = rows[-1], _slope(rows, key)
    if slope <= 0:
        return float("inf") if high[key] <= goal else high["assets"]
    return high["assets"] + (goal - high[key]) / slope


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--profile", action="store_true", help="add a profiled run of part a): its top lines")
    parser.add_argument("--real", action="store_true", help="also run the backfill for real (many minutes)")
    parser.add_argument("--spark-port", type=int, default=15301)
    parser.add_argument(
        "--max-load",
        type=float,
        default=2.0,
        help="skip --real when the 1-minute load average at the start is this or more",
    )
    parser.add_argument("--publish-days", type=int, nargs="*", default=[40, 120, 365])
    parser.add_argument("--lineage", type=int, nargs="*", default=[500, 1000, 2000], help="lineage sizes (assets)")
    parser.add_argument("--lineage-days", type=int, default=30)
    parser.add_argument("--lineage-real", type=int, default=200, help="assets of the real lineage run; 0: skip")
    parser.add_argument("--ui-assets", type=int, default=2000, help="lineage size of the UI bench")
    parser.add_argument("--ui-days", type=int, default=46, help="its days (46 x 2,000 assets: 102k nodes); 0: skip")
    parser.add_argument("--out", default=str(REPO / "bench/results/scale.md"))
    args = parser.parse_args()

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    load = os.getloadavg()[0]  # before part a), which loads the machine itself
    log(f"scale {args.days}d without runs ({datetime.now(UTC):%H:%M} UTC; {uptime})")
    measured = [measure_without_runs(args.days, batch, False, log) for batch in (True, False)]
    profiled = measure_without_runs(args.days, True, True, log) if args.profile else None
    real, note = None, "Not run (`--real` not given)."
    if args.real and load >= args.max_load:
        note = f"Not run: the machine was busy (1-minute load {load:.1f} >= --max-load {args.max_load:.1f})."
    elif args.real:
        real = measure_real_run(args.days, args.spark_port, log)
    published = []
    for days in args.publish_days:
        published.append(publish_at_scale.measure_in_fresh_process(days))
        log(f"  publish {days}d: {published[-1]['nodes']} nodes, publish {published[-1]['publish_seconds']:.2f} s")
    lineage = []
    for assets in args.lineage:
        lineage.append(lineage_bench.measure_in_fresh_process(assets, args.lineage_days))
        log(f"  lineage {assets}: {lineage[-1]['nodes']} nodes, {lineage[-1]['cpu_ms_per_node']:.3f} CPU ms/node")
    lineage_real = measure_lineage_real_run(args.lineage_real, args.lineage_days, log) if args.lineage_real else None
    ui = ui_scale_bench.measure_in_fresh_process(args.ui_assets, args.ui_days) if args.ui_days else None
    if ui:
        log(f"  ui {ui['nodes']} nodes: page {ui['load_max_seconds']:.2f} s, stale {ui['stale_max_seconds']:.2f} s")
    uptime_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    command = " ".join(["python bench/scale_bench.py", *sys.argv[1:]])
    uptimes = f"{uptime}`; after: `{uptime_after}"
    text = report(args.days, measured, profiled, real, note, uptimes, command, published, lineage, lineage_real, ui)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
