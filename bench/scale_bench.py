"""Scale: a 365-day backfill of the example's hourly `events` + daily `daily_orders`
(24 x 365 + 365 = 9,125 nodes), the coordinator's cost apart from the runs and, with
--real, a real run (issue 12, point 5: coordinator <= 1 GB, scheduling <= 1 ms a node).

a) Without runs (tests/support/scale.py): plans the graph (timed apart), then runs
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

Usage: python bench/scale_bench.py [--days 365] [--profile] [--real] [--spark-port 15301]
           [--max-load 2] [--out bench/results/scale.md]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

# This checkout's package and test helpers, even when the installed package is another work tree's.
sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from tests.support.scale import EXAMPLE, FIRST_DAY, SELECTION, fresh_environment, schedule_in_fresh_process

REPO = Path(__file__).resolve().parents[1]
GOAL_MS_PER_NODE = 1.0
GOAL_COORDINATOR_MB = 1024
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


def measure_real_run(days: int, spark_port: int, log) -> dict:
    """Part b): the CLI backfill on real Spark, with the coordinator's and its workers' peak RSS."""
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
    coordinator_mb, descendants_mb, seen = 0.0, 0.0, set()
    try:
        server.ensure_running()  # before the clock: the JVM's start is not the backfill's
        log(f"  real {days}d: {' '.join(command[1:])}")
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
        seconds = time.perf_counter() - began
        lines = (root / "stdout").read_text().splitlines()
        stderr_tail = (root / "stderr").read_text().splitlines()[-15:]
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    summary = next((line for line in reversed(lines) if line.startswith("backfill ")), "")
    result = {
        "seconds": seconds,
        "returncode": process.returncode,
        "summary": summary,
        "phases": [line for line in lines if line.startswith(("gate:", "published:"))],
        "coordinator_peak_mb": coordinator_mb,
        "descendants_peak_mb": descendants_mb,
        "descendants": len(seen),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "stderr_tail": stderr_tail if process.returncode else [],
    }
    log(f"  real {days}d: {seconds:.0f} s, exit {process.returncode}, coordinator {coordinator_mb:.0f} MB")
    return result


def _load(loads) -> str:
    return "/".join(f"{x:.1f}" for x in loads)


def _per_node(seconds: float, nodes: int) -> str:
    return f"{1000 * seconds / nodes:.3f}"


def report(
    days: int, measured: list[dict], profiled: dict | None, real: dict | None, real_note: str, uptime: str, command: str
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
    command = " ".join(["python bench/scale_bench.py", *sys.argv[1:]])
    text = report(args.days, measured, profiled, real, note, uptime, command)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
