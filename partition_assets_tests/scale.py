"""A large backfill coordinated without its runs: what the coordinator itself costs per node.

`schedule_without_runs` plans `days` days of the example's hourly `events` and daily
`daily_orders` (24 x days + days nodes) and runs them through the real coordinator
(`run_backfill`: the engine loop, the backfill record, leases, the Dagster backfill
mirror on the DAGSTER_HOME instance, a progress line per node) with `ImmediateRunner`,
whose runs succeed the moment they are launched. Shared by
partition_assets_tests/test_scale.py and bench/scale_bench.py.

Not guaranteed: the process's environment must name a fresh DAGSTER_HOME (with a
dagster.yaml), lake and state folder; nothing runs Spark, and a staged backfill has
nothing to publish. Times are wall seconds on whatever else the machine runs.
"""

from __future__ import annotations

import os
import resource
import time
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import date, timedelta

import dagster as dg

from partition_assets.backfill.coordinator import NodeRunner, graph_of, run_backfill
from partition_assets.backfill.progress import Progress
from partition_assets.backfill.scheduling import NodeResult, RunUnit
from partition_assets.backfill.spec import STAGED, BackfillSpec
from partition_assets.backfill.state import BackfillRecord

EXAMPLE = "partition_assets.example"
SELECTION = "key:events or key:daily_orders"
FIRST_DAY = date(2024, 1, 1)


class ImmediateRunner:
    """A `NodeRunner` whose runs succeed as they are launched (a done future); it times the
    first launch, to tell the node loop from the coordinator's set-up."""

    def __init__(self) -> None:
        self.units = 0
        self.first_launch: float | None = None  # perf_counter seconds

    def launch(self, unit: RunUnit) -> Future:
        if self.first_launch is None:
            self.first_launch = time.perf_counter()
        self.units += 1
        now = time.time()
        future: Future = Future()
        future.set_result([NodeResult(node, True, f"immediate-{self.units}", now, now) for node in unit.nodes])
        return future

    def close(self) -> None:
        """Nothing is ever in flight."""

    def terminate(self) -> None:
        """Nothing is ever in flight."""


@dataclass
class SchedulingCost:
    """One backfill coordinated without runs. `coordinate_seconds` is the whole
    `run_backfill` call; `node_loop_seconds` runs from the first launch to the last
    node result (the per-node part); `cpu_seconds` is the process's CPU time (every
    thread: the mirror's too) over the call."""

    days: int
    batch: bool
    nodes: int
    units: int
    plan_seconds: float
    coordinate_seconds: float
    node_loop_seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    statuses: dict[str, int] = field(default_factory=dict)

    @property
    def ms_per_node(self) -> float:
        return 1000 * self.coordinate_seconds / self.nodes


def example_spec(days: int, batch: bool = True, publish: str = STAGED) -> BackfillSpec:
    """`days` days of `events` + `daily_orders` from FIRST_DAY, as `backfill run` would plan them."""
    last_day = FIRST_DAY + timedelta(days=days - 1)
    return BackfillSpec(
        module=EXAMPLE,
        selection=SELECTION,
        start=FIRST_DAY.isoformat(),
        end=last_day.isoformat(),
        batch=batch,
        publish=publish,
    )


def schedule_without_runs(days: int, batch: bool = True, publish: str = STAGED) -> SchedulingCost:
    """Plans and coordinates `example_spec(days, batch)` with `ImmediateRunner`, printing
    each node's progress line to os.devnull as the CLI prints it to its output."""
    spec = example_spec(days, batch, publish)
    with dg.DagsterInstance.get() as instance:
        started = time.perf_counter()
        graph = graph_of(spec, instance)
        plan_seconds = time.perf_counter() - started
    record = BackfillRecord(spec)
    progress = Progress(record.id, graph, set())
    runner = ImmediateRunner()
    last_result = [0.0]

    def runner_of(*_: object) -> NodeRunner:
        return runner

    with open(os.devnull, "w") as sink:

        def on_result(result: NodeResult) -> None:
            print(progress.line(result), file=sink, flush=True)
            last_result[0] = time.perf_counter()

        cpu_started, started = time.process_time(), time.perf_counter()
        status = run_backfill(record, graph, set(), on_result=on_result, runner_of=runner_of)
        coordinate_seconds = time.perf_counter() - started
        cpu_seconds = time.process_time() - cpu_started
    return SchedulingCost(
        days=days,
        batch=batch,
        nodes=graph.node_count(),
        units=runner.units,
        plan_seconds=plan_seconds,
        coordinate_seconds=coordinate_seconds,
        node_loop_seconds=last_result[0] - (runner.first_launch or last_result[0]),
        cpu_seconds=cpu_seconds,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        statuses={state.value: count for state, count in Counter(status.values()).items()},
    )
