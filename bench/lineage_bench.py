"""A cascade over a large lineage (bench/lineage_defs.py): what loading, planning, the impact
list, the freeze, coordinating and the UI mirror cost with 500 to 2,000 assets.

For each size, in a fresh process on a fresh DAGSTER_HOME, lake and state folder
(partition_assets_tests/support/scale.py's `fresh_environment`), a 30-day backfill of ROOTS = 20 roots
(every W / 20th of layer 0, hourly ones included) is timed step by step:
- load: importing the code location and resolving its asset graph;
- impact: planning the roots alone and listing the assets outside it that read them (what
  `backfill plan` warns about without --downstream);
- plan: planning the roots with --downstream (every asset they reach);
- freeze: freezing every asset of the plan in the instance, and lifting it;
- coordinator: the real coordinator (`BackfillRun`, staged; the Dagster backfill mirror on)
  with runs that succeed as they are launched (`ImmediateRunner`): wall and CPU seconds,
  CPU per node, and the process's peak RSS;
- mirror tick: each poll of the mirror's thread (`_poll_once`: the stored status read, the
  progress reported since the last poll serialized and written), timed as it happens, in
  the thread's CPU time (its cost) and in wall time (which also holds its waits for the
  GIL while the coordinator's loop, never idle with instant runs, holds it): the largest
  and the median.
The code location is executed once (load): planning reads it again from the process's cache
(partition_assets/code_location.py), as one backfill command does.

Usage: python bench/lineage_bench.py [--assets 500 1000 2000] [--days 30]
       (prints one JSON line per size; bench/scale_bench.py --lineage reports them)

Not guaranteed: wall times hold whatever else the machine runs; CPU times do not. No node
runs Spark or stores anything (the assets have no output), so the publish records
nothing: this is the coordination's cost, not the runs'.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import sys
import time
from datetime import date, timedelta
from pathlib import Path

# This checkout's package and test helpers, even when the installed package is another work tree's.
sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from partition_assets_tests.support.scale import Clocks, ImmediateRunner, json_of_fresh_process

REPO = Path(__file__).resolve().parents[1]
LINEAGE = str(REPO / "bench/lineage_defs.py")
ROOTS = 20


def measure(assets: int, days: int) -> dict:
    """The steps above for `assets` assets (this process's environment must be fresh)."""
    import dagster as dg

    from partition_assets.backfill.dagster_ui.view import WEBSERVER
    from partition_assets.backfill.planning.instance_state import graph_of
    from partition_assets.backfill.planning.lineage import impact
    from partition_assets.backfill.publishing.freeze import freeze, unfreeze
    from partition_assets.backfill.running.coordinator import BackfillRun
    from partition_assets.backfill.state.record import BackfillRecord
    from partition_assets.backfill.state.store import BackfillStore
    from partition_assets.code_location import load_definitions

    os.environ["PARTITION_ASSETS_BENCH_ASSETS"] = str(assets)
    started = time.perf_counter()
    asset_graph = load_definitions(LINEAGE).resolve_asset_graph()
    load_seconds = time.perf_counter() - started
    spec = cascade_spec(assets, days)
    polls = timed_mirror_polls()
    with dg.DagsterInstance.get() as instance:
        began = time.perf_counter()
        roots_only = graph_of(dataclasses.replace(spec, downstream=False), instance)
        readers = impact(asset_graph, roots_only, instance)
        impact_seconds = time.perf_counter() - began
        began = time.perf_counter()
        graph = graph_of(spec, instance)
        plan_seconds = time.perf_counter() - began
        record = BackfillRecord(spec, store=BackfillStore(instance))
        began = time.perf_counter()
        freeze(instance, graph.assets, record.id)
        unfreeze(instance, record.id)
        freeze_seconds = time.perf_counter() - began
        runner = ImmediateRunner()
        before = Clocks.now()
        status = BackfillRun(instance, record, graph, set(), runner_of=lambda *_: runner, dagster_view=WEBSERVER).run()
        after = Clocks.now()
    nodes = graph.node_count()
    return {
        "assets": assets,
        "planned_assets": len(graph.assets),
        "nodes": nodes,
        "succeeded": sum(1 for state in status.values() if state.value == "succeeded"),
        "runs": runner.units,
        "load_seconds": load_seconds,
        "impact_seconds": impact_seconds,
        "impact_assets": len(readers),
        "plan_seconds": plan_seconds,
        "freeze_seconds": freeze_seconds,
        "coordinator_seconds": after.wall - before.wall,
        "coordinator_cpu_seconds": after.cpu - before.cpu,
        "cpu_ms_per_node": 1000 * (after.cpu - before.cpu) / nodes,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "mirror_ticks": len(polls),
        "mirror_tick_max_ms": 1000 * max((wall for wall, _ in polls), default=0.0),
        "mirror_tick_median_ms": 1000 * statistics.median(wall for wall, _ in polls) if polls else 0.0,
        "mirror_tick_cpu_max_ms": 1000 * max((cpu for _, cpu in polls), default=0.0),
        "mirror_tick_cpu_median_ms": 1000 * statistics.median(cpu for _, cpu in polls) if polls else 0.0,
    }


def cascade_spec(assets: int, days: int):
    """The bench's cascade: `days` days from 2024-01-01 of ROOTS roots (every W / ROOTS-th
    asset of layer 0, hourly ones included) with --downstream, over the `assets`-asset lineage."""
    from partition_assets.backfill.planning.spec import BackfillSpec

    width = assets // 10
    roots = [f"l0_{index}" for index in range(0, width, max(1, width // ROOTS))][:ROOTS]
    first = date(2024, 1, 1)
    return BackfillSpec(
        module=LINEAGE,
        selection=" or ".join(f"key:{root}" for root in roots),
        downstream=True,
        start=first.isoformat(),
        end=(first + timedelta(days=days - 1)).isoformat(),
    )


def timed_mirror_polls() -> list[tuple[float, float]]:
    """A list to which each poll of a Dagster backfill mirror of this process appends its wall
    seconds and its thread's CPU seconds, from now on (the mirror thread's `_poll_once`,
    wrapped). Wall time also holds the waits for the GIL while another thread runs."""
    from partition_assets.backfill.dagster_ui import mirror

    polls: list[tuple[float, float]] = []
    poll = mirror.DagsterBackfillMirror._poll_once

    def timed_poll(self) -> None:
        began, began_cpu = time.perf_counter(), time.thread_time()
        poll(self)
        polls.append((time.perf_counter() - began, time.thread_time() - began_cpu))

    mirror.DagsterBackfillMirror._poll_once = timed_poll  # type: ignore[method-assign]
    return polls


def measure_in_fresh_process(assets: int, days: int) -> dict:
    """`measure` in a new process on a new DAGSTER_HOME, lake and state folder (deleted after)."""
    command = [sys.executable, "-W", "ignore", str(Path(__file__)), "--measure", str(assets), "--days", str(days)]
    return json_of_fresh_process(command)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--assets", type=int, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--measure", type=int, help="measure this size in this process (its environment fresh)")
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.days)))
        return
    for assets in args.assets:
        print(json.dumps(measure_in_fresh_process(assets, args.days)), flush=True)


if __name__ == "__main__":
    main()
