"""Per-node overhead of the engine's runs: a run's wall time minus its asset's own work.

Every node of a backfill is a real Dagster run in the instance (run record, event log,
captured stdout/stderr). This measures what that costs per node on warm workers
(`DagsterNodeRunner`, as a backfill runs them), on a fresh embedded SQLite instance:
- `repo`: the repo's dagster.yaml (`make dev`): consolidated event log and compute logs
  captured without helper processes (partition_assets/dagster_instance/storage.py);
- `stock`: Dagster's own defaults (an empty dagster.yaml): a database per run and
  `tail -F` + watcher processes per captured stream.
Nodes are single partitions of the bench DAG's `raw` asset with its default policy (one
partition per run) and 0.5-1 s of simulated work; `--workers` run them side by side, as a
backfill's slots do. Reported: median overhead per node and the worker CPU per node.

Usage: python bench/node_overhead.py [--nodes 60] [--workers 1 4] [--out bench/results/node_overhead.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

# This checkout's package and bench modules, even when the installed package is another work tree's.
sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).resolve().parents[1])]

REPO = Path(__file__).resolve().parents[1]
DAG_FILE = str(REPO / "bench" / "engine_dag.py")
GOAL_SECONDS = 0.15


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of process `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(config: str, nodes: int, workers: int) -> dict:
    """Runs `nodes` single-partition runs of `raw` (Dagster's default policy) on `workers` warm
    workers, on a fresh instance with `config` ('repo' or 'stock'); overheads per node and CPU
    per node. The caller's environment is as it was afterwards."""
    import dagster as dg
    import engine_dag

    from partition_assets.backfill.model import RunUnit
    from partition_assets.backfill.running.local_workers import DagsterNodeRunner
    from partition_assets_tests.support.instances import instance_env, open_instance

    home = Path(tempfile.mkdtemp(prefix=f"node-overhead-{config}-"))
    env = {**instance_env(home), "ENGINE_DAG_BACKFILL_POLICY": "none"}  # one partition per run
    if config == "stock":
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    keys = engine_dag.DAYS.get_partition_keys()[: nodes + workers]
    raw = dg.AssetKey("raw")
    with (
        open_instance(env) as instance,
        DagsterNodeRunner(DAG_FILE, workers, {"bench": "node_overhead"}, instance) as runner,
    ):
        # Warm: every worker has loaded the code and run once.
        for future in [runner.launch(RunUnit(raw, (key,))) for key in keys[:workers]]:
            future.result()
        pids = [worker.pid for worker in runner._context.workers if worker.pid is not None]
        cpu_before = sum(_cpu_seconds(pid) for pid in pids)
        began = time.perf_counter()
        futures = [runner.launch(RunUnit(raw, (key,))) for key in keys[workers:]]
        results = [result for future in futures for result in future.result()]
        wall = time.perf_counter() - began
        cpu = sum(_cpu_seconds(pid) for pid in pids) - cpu_before
    overheads = [r.ended - r.started - engine_dag.work_seconds("raw", r.node.partition) for r in results]
    assert all(r.succeeded for r in results), [r.error for r in results if not r.succeeded]
    return {
        "median": statistics.median(overheads),
        "p90": statistics.quantiles(overheads, n=10)[-1],
        "cpu_per_node": cpu / len(results),
        "wall": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=60)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--out", default=str(REPO / "bench/results/node_overhead.md"))
    args = parser.parse_args()
    uptime_before = os.popen("uptime").read().strip()
    rows, measured = [], {}
    for workers in args.workers:
        for config in ("stock", "repo"):
            result = measured[(config, workers)] = measure(config, args.nodes, workers)
            print(f"{config} x{workers}: {result}", file=sys.stderr, flush=True)
            rows.append(
                f"| {config} | {workers} | {result['median']:.3f} | {result['p90']:.3f} | "
                f"{result['cpu_per_node']:.3f} | {result['wall']:.1f} |"
            )
    uptime_after = os.popen("uptime").read().strip()
    command = " ".join(["python bench/node_overhead.py", *sys.argv[1:]])
    notes = []
    for workers in args.workers:
        stock, repo = measured[("stock", workers)], measured[("repo", workers)]
        verdict = "met" if repo["median"] <= GOAL_SECONDS else "not met"
        notes.append(
            f"- {workers} worker(s): median overhead {repo['median']:.3f} s per node with the repo's "
            f"instance vs {stock['median']:.3f} s with Dagster's defaults "
            f"({stock['median'] / repo['median']:.2f}x less); CPU per node {repo['cpu_per_node']:.3f} vs "
            f"{stock['cpu_per_node']:.3f} s. Goal <= {GOAL_SECONDS} s median: {verdict}."
        )
    lines = [
        "# Per-node overhead: a run's wall time minus its asset's work",
        "",
        f"Command: `{command}`",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on 2 cores; `uptime` before: `{uptime_before}`; "
        f"after: `{uptime_after}`.",
        "",
        "Each node: one single-partition run of the bench DAG's `raw` (default policy), 0.5-1 s of simulated "
        f"work, {args.nodes} nodes per row on warm workers (`DagsterNodeRunner`), a fresh SQLite instance each.",
        "`repo` = the repo's dagster.yaml (consolidated event log, compute logs captured without helper "
        "processes); `stock` = Dagster's defaults (empty dagster.yaml).",
        "",
        "| instance | workers | median overhead s | p90 s | worker CPU per node s | wall s |",
        "| --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        *notes,
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
