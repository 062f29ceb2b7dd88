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
    """A `NodeRunner` whose runs succeed as they are launched (a done future); it notes
    when it first launched, to tell the node loop from the coordinator's set-up."""

    def __init__(self) -> None:
        self.units = 0
        self.first_launch: Clocks | None = None

    def launch(self, unit: RunUnit) -> Future:
        if self.first_launch is None:
            self.first_launch = Clocks.now()
        self.units += 1
        now = time.time()
        future: Future = Future()
        future.set_result([NodeResult(node, True, f"immediate-{self.units}", now, now) for node in unit.nodes])
        return future

    def close(self) -> None:
        """Nothing is ever in flight."""

    def terminate(self) -> None:
        """Nothing is ever in flight."""


@dataclass(frozen=True)
class Clocks:
    """Wall (perf_counter) and process CPU (every thread) seconds at one moment."""

    wall: float
    cpu: float

    @classmethod
    def now(cls) -> Clocks:
        return cls(time.perf_counter(), time.process_time())


@dataclass
class SchedulingCost:
    """One backfill coordinated without runs. `coordinate_seconds` is the whole
    `run_backfill` call; the node loop runs from the first launch to the last node
    result (the per-node part); CPU seconds are the process's (every thread: the
    mirror's too)."""

    days: int
    batch: bool
    nodes: int
    units: int
    plan_seconds: float
    coordinate_seconds: float
    coordinate_cpu_seconds: float
    node_loop_seconds: float
    node_loop_cpu_seconds: float
    peak_rss_mb: float
    statuses: dict[str, int] = field(default_factory=dict)

    @property
    def cpu_ms_per_node(self) -> float:
        """The whole coordinator call's CPU (set-up, node loop, gate and publish) per node:
        what it costs, however busy the machine is."""
        return 1000 * self.coordinate_cpu_seconds / self.nodes


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
        planning = time.perf_counter()
        graph = graph_of(spec, instance)
        plan_seconds = time.perf_counter() - planning
    record = BackfillRecord(spec)
    progress = Progress(record.id, graph, set())
    runner = ImmediateRunner()
    nodes, results = graph.node_count(), 0
    last_result = Clocks.now()

    def runner_of(*_: object) -> NodeRunner:
        return runner

    with open(os.devnull, "w") as sink:

        def on_result(result: NodeResult) -> None:
            print(progress.line(result), file=sink, flush=True)
            nonlocal results, last_result
            results += 1
            if results == nodes:  # the clocks once: reading CPU time is a system call
                last_result = Clocks.now()

        started = Clocks.now()
        status = run_backfill(record, graph, set(), on_result=on_result, runner_of=runner_of)
        ended = Clocks.now()
    first_launch = runner.first_launch or last_result
    return SchedulingCost(
        days=days,
        batch=batch,
        nodes=nodes,
        units=runner.units,
        plan_seconds=plan_seconds,
        coordinate_seconds=ended.wall - started.wall,
        coordinate_cpu_seconds=ended.cpu - started.cpu,
        node_loop_seconds=last_result.wall - first_launch.wall,
        node_loop_cpu_seconds=last_result.cpu - first_launch.cpu,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        statuses={state.value: count for state, count in Counter(status.values()).items()},
    )
