"""A large backfill coordinated without its runs: what the coordinator itself costs per node.

`schedule_without_runs` plans `days` days of the example's hourly `events` and daily
`daily_orders` (24 x days + days nodes) and runs them through the real coordinator
(`BackfillRun`: the engine loop, the backfill record, leases, the Dagster backfill
mirror on the DAGSTER_HOME instance, a progress line per node) with `ImmediateRunner`,
whose runs succeed the moment they are launched. `schedule_in_fresh_process` does it in
a new process (`python -m partition_assets_tests.support.scale`) on a new DAGSTER_HOME, lake
and state folder: the example reads its lake once, when imported, and a process's peak
RSS is its own (cumulative over the backfills it runs in turn). Shared by
partition_assets_tests/integration/test_scheduling_scale.py and bench/scale_bench.py.

Not guaranteed: `schedule_without_runs` needs the process's environment to name a fresh
DAGSTER_HOME (with a dagster.yaml), lake and state folder before the example is first
imported; nothing runs Spark, and a staged backfill has nothing to publish. Wall times
include whatever else the machine runs; CPU times do not.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from datetime import date, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

import dagster as dg

from partition_assets.backfill.dagster_ui.view import WEBSERVER
from partition_assets.backfill.model import NodeResult, PublishMode, RunUnit
from partition_assets.backfill.planning.instance_state import graph_of
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.running.coordinator import BackfillRun
from partition_assets.backfill.running.progress import Progress
from partition_assets.backfill.running.runners import NodeRunner
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets_tests.support import REPO
from partition_assets_tests.support.instances import instance_env

EXAMPLE = "partition_assets.example"
SELECTION = "key:events or key:daily_orders"
FIRST_DAY = date(2024, 1, 1)
_PROFILE_LINES = 25


class ImmediateRunner:
    """A `NodeRunner` whose runs succeed as they are launched (a done future); it notes
    when it first launched, to tell the node loop from the coordinator's set-up."""

    def __init__(self) -> None:
        self.units = 0
        self.first_launch: Clocks | None = None

    def launch(self, unit: RunUnit, unit_tags: Mapping[str, str] = MappingProxyType({})) -> Future:
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
    `BackfillRun.run` call; the node loop runs from the first launch to the last node
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
    rss_before_mb: float  # the process's peak RSS before planning: its imports
    peak_rss_mb: float
    statuses: dict[str, int] = field(default_factory=dict)
    profile: str = ""  # the top of a cProfile of the call, when asked for

    @property
    def cpu_ms_per_node(self) -> float:
        """The whole coordinator call's CPU (set-up, node loop, gate and publish) per node:
        what it costs, however busy the machine is."""
        return 1000 * self.coordinate_cpu_seconds / self.nodes


def example_spec(days: int, batch: bool = True, publish: str = PublishMode.staged) -> BackfillSpec:
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


def schedule_without_runs(days: int, batch: bool = True, publish: str = PublishMode.staged) -> SchedulingCost:
    """Plans and coordinates `example_spec(days, batch)` with `ImmediateRunner`, printing
    each node's progress line to os.devnull as the CLI prints it to its output."""
    spec = example_spec(days, batch, publish)
    rss_before_mb = _peak_rss_mb()
    with dg.DagsterInstance.get() as instance:
        planning = time.perf_counter()
        graph = graph_of(spec, instance)
        plan_seconds = time.perf_counter() - planning
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

        with dg.DagsterInstance.get() as instance:
            record = BackfillRecord(spec, store=BackfillStore(instance))
            progress = Progress(record.id, graph, set())
            started = Clocks.now()
            status = BackfillRun(
                instance, record, graph, set(), runner_of=runner_of, on_result=on_result, dagster_view=WEBSERVER
            ).run()
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
        rss_before_mb=rss_before_mb,
        peak_rss_mb=_peak_rss_mb(),
        statuses={state.value: count for state, count in Counter(status.values()).items()},
    )


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def fresh_environment(root: Path) -> dict[str, str]:
    """The environment of a process on a new DAGSTER_HOME (the repo's dagster.yaml), lake
    and state folder under `root`, importing this checkout's packages."""
    return {
        **instance_env(root / "dagster_home"),
        "PARTITION_ASSETS_LAKE": str(root / "lake"),
        "PARTITION_ASSETS_STATE_DIR": str(root / "state"),
        # This checkout's packages, whichever work tree's package is installed.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }


def schedule_in_fresh_process(
    days: Sequence[int], batch: bool = True, publish: str = PublishMode.staged, profile: bool = False
) -> list[SchedulingCost]:
    """`schedule_without_runs` of each of `days` in turn, in one new process on a new
    DAGSTER_HOME, lake and state folder (deleted after); with `profile`, each cost holds
    the top of a cProfile of its call."""
    command = [sys.executable, "-m", __name__, "--days", *map(str, days), "--publish", publish]
    command += [] if batch else ["--no-batch"]
    command += ["--profile"] if profile else []
    return [SchedulingCost(**cost) for cost in json_of_fresh_process(command)]


def json_of_fresh_process(command: list[str]) -> Any:
    """The JSON value `command` prints as its last line, run from REPO in a new process on a
    new DAGSTER_HOME, lake and state folder (deleted after); RuntimeError when it fails."""
    root = Path(tempfile.mkdtemp(prefix="scale-"))
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env={**os.environ, **fresh_environment(root)}, cwd=REPO
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Prints the costs of `schedule_without_runs` as one JSON line (schedule_in_fresh_process reads it)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, nargs="+", required=True)
    parser.add_argument("--no-batch", action="store_true")
    parser.add_argument("--publish", default=PublishMode.staged)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    costs = []
    for days in args.days:
        profiler = cProfile.Profile() if args.profile else None
        if profiler:
            profiler.enable()
        cost = schedule_without_runs(days, not args.no_batch, args.publish)
        if profiler:
            profiler.disable()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(_PROFILE_LINES)
            cost.profile = text.getvalue()
        costs.append(asdict(cost))
    print(json.dumps(costs))


if __name__ == "__main__":
    main()
