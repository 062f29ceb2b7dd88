"""The scheduling core driven by simulated runs on a simulated clock: a run of a unit takes
`run_overhead` plus the work of each of its nodes, and ends exactly then. What the core
alone makes of a graph, without processes or Dagster, in milliseconds of real time.

`makespan_bound` is the lower bound any schedule of the graph meets: the longest chain of
work through it, or its total work spread over every slot. Shared by the unit tests of the
core (partition_assets_tests/unit/test_scheduling_shapes.py) and the generated-shapes bench
(bench/generated_shapes_bench.py). `runs_bound` is the same bound over given runs, a range
run one unit (a `BackfillPolicy`'s runs), as bench/engine_bench.py's same-run bound uses it.

Not guaranteed: a real run's overhead varies, and real results arrive in a different order
when two runs end within a poll; the simulation is only as faithful as `run_overhead`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import dagster as dg

from partition_assets.backfill.model import Node, NodeResult, RunUnit
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.running.scheduling import Schedule, Throttle

Work = Callable[[Node], float]


@dataclass(frozen=True)
class Simulation:
    makespan: float  # simulated seconds from the first launch to the last run's end
    units: list[tuple[float, float, RunUnit]]  # (start, end, unit) in launch order


def simulate(
    graph: BackfillGraph,
    throttle: Throttle,
    work: Work,
    run_overhead: float = 0.0,
    done: Iterable[Node] = (),
    durations: Mapping[dg.AssetKey, float] | None = None,
) -> Simulation:
    """Runs every node of `graph` not in `done` through a `Schedule` that knows `durations`
    (seconds per node of some assets, as earlier runs in an instance tell it) with simulated
    runs: each unit launched at `now` ends at now + run_overhead + the `work` of its nodes;
    the earliest end is reported first (ties in launch order)."""
    schedule = Schedule(graph, throttle, done, durations=durations)
    now = 0.0
    in_flight: list[tuple[float, int, float, RunUnit]] = []
    launched: list[tuple[float, float, RunUnit]] = []
    while not schedule.is_done:
        for unit in schedule.next_units(now=now):
            end = now + run_overhead + sum(work(node) for node in unit.nodes)
            heapq.heappush(in_flight, (end, len(launched), now, unit))
            launched.append((now, end, unit))
        end, _, start, unit = heapq.heappop(in_flight)
        now = end
        schedule.finish(unit, [NodeResult(node, True, f"run-{start}", start, end) for node in unit.nodes])
    return Simulation(now, launched)


@dataclass(frozen=True)
class Bound:
    """Lower bounds on the makespan of any schedule of a graph on `slots` slots, in seconds.

    `classic` = max(`critical` path, total work / slots). `tight` also sees, for every
    node n, that n cannot start before all its ancestors ran (their work spread over the
    slots at best, and never before its longest chain of ancestors), nor end its own work
    and its descendants' sooner than their longest chain or their work spread over the
    slots: max over n of max(head(n), ancestors(n) / slots) + max(tail(n), (n +
    descendants(n)) / slots). Both terms bound any schedule, so their sum does; `tight`
    is never below `classic` (a sink with every node its ancestor, say a monthly fan-in
    of everything, adds its whole work after the rest)."""

    classic: float
    critical: float
    tight: float


def makespan_bound(graph: BackfillGraph, slots: int, work: Work) -> Bound:
    """The graph's lower bounds (see `Bound`) with `work(node)` seconds per node, every node a run
    of its own (`runs_bound`); quadratic in the nodes, for graphs of a few thousand nodes at most."""
    return runs_bound(graph, {RunUnit(node.asset, (node.partition,)): work(node) for node in graph.nodes()}, slots)


def runs_bound(graph: BackfillGraph, runs: Mapping[RunUnit, float], slots: int) -> Bound:
    """The lower bounds (see `Bound`) of any schedule of `runs` on `slots` slots, `runs[run]`
    seconds each: a run is one unit on one slot (a range run steps through its partitions in one
    step) that starts once every run holding an upstream node (in `graph`) of any of its nodes
    has ended; a dependency between two nodes of the same run is inside its step and ignored.
    With one run per node it is the node-level bound; a policy's range runs make it the bound of
    every schedule that honours the policy. Quadratic in the runs (ancestor sets as bit sets).

    Not guaranteed: a run of several assets (Dagster's backfill groups a parent with its
    identity-mapped child) is not modelled: a `RunUnit` holds one asset.

    Raises:
        ValueError: `runs` do not hold every node of `graph` exactly once, or a run depends on a
            later run of its own asset (its partitions are not one contiguous range in order).
    """
    positions = {asset: i for i, asset in enumerate(graph.slices)}
    # Upstream assets first (the slices' topological order), then each asset's runs in partition order.
    units = sorted(runs, key=lambda u: (positions[u.asset], graph.slices[u.asset].index_of[u.partitions[0]]))
    holder = {node: i for i, unit in enumerate(units) for node in unit.nodes}
    if len(holder) != sum(len(unit.partitions) for unit in units) or holder.keys() != set(graph.nodes()):
        raise ValueError(
            f"{len(units)} runs hold {len(holder)} distinct nodes of the graph's {graph.node_count()}: "
            "give every node of the graph to exactly one run"
        )
    seconds = [runs[unit] for unit in units]
    parents = [
        sorted({holder[p] for node in unit.nodes for p in graph.upstream(node)} - {i}) for i, unit in enumerate(units)
    ]
    for i, ps in enumerate(parents):
        if ps and ps[-1] > i:
            raise ValueError(
                f"run {units[i]} depends on the later run {units[ps[-1]]} of its asset: "
                "give each run one contiguous range of its asset's partitions"
            )
    head, ancestors = [0.0] * len(units), [0] * len(units)  # longest chain before a run; its ancestors' bits
    for i, ps in enumerate(parents):
        for p in ps:
            head[i] = max(head[i], head[p] + seconds[p])
            ancestors[i] |= ancestors[p] | (1 << p)
    tail, descendants = list(seconds), [0] * len(units)  # longest chain from a run, itself included
    for i in reversed(range(len(units))):
        for p in parents[i]:
            tail[p] = max(tail[p], seconds[p] + tail[i])
            descendants[p] |= descendants[i] | (1 << i)
    total = sum(seconds)
    critical = max(tail, default=0.0)
    classic = max(critical, total / slots)
    tight = max(
        [
            max(head[i], _work_of(ancestors[i], seconds) / slots)
            + max(tail[i], (seconds[i] + _work_of(descendants[i], seconds)) / slots)
            for i in range(len(units))
        ],
        default=0.0,
    )
    return Bound(classic, critical, max(classic, tight))


def _work_of(bits: int, seconds: list[float]) -> float:
    total, position = 0.0, 0
    while bits:
        if bits & 1:
            total += seconds[position]
        bits >>= 1
        position += 1
    return total
