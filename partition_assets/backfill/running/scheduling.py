"""The scheduling core of a backfill: which runs to start next, and what a result changes.

A pure state machine, without runs, futures or clock: `Schedule` hands out run units
(`next_units`) and takes back their results (`finish`); `engine.execute` is the loop
that launches the units and waits for them. Its rules:
1. nodes whose upstream nodes all succeeded are *ready*;
2. ready nodes are handed out while slots are free (overall, per asset, and in what the
   deployment's capacity allows the backfill now: backfill/running/capacity.py), those
   heading the longest chains of work first; a node takes along later partitions of
   its asset as one run unit (see `unit_starting_at`): ready ones that would wait for
   a slot anyway, as many as its slack allows (see `Schedule.ready_allowance`);
3. when a node succeeds, its downstream nodes count one fewer pending upstream; those
   reaching zero become ready; a failure blocks every descendant instead;
4. the backfill is done when no node is ready or running.
"""

import heapq
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

import dagster as dg

from partition_assets.backfill.planning.graph import BackfillGraph, Node
from partition_assets.backfill.running.capacity import UNLIMITED, Allowance
from partition_assets.errors import BackfillPlanError, SchedulingError


class NodeStatus(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    BLOCKED = "blocked"  # an upstream node failed


@dataclass(frozen=True)
class NodeResult:
    node: Node
    succeeded: bool
    run_id: str | None
    started: float  # epoch seconds: run bookkeeping, not asset logic
    ended: float
    error: str | None = None


@dataclass
class Throttle:
    """At most `max_parallel` runs at once, and `per_asset[asset]` runs of one asset."""

    max_parallel: int = 4
    per_asset: dict[dg.AssetKey, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A limit below 1 would leave ready nodes waiting forever.
        too_low = {key.to_user_string(): limit for key, limit in self.per_asset.items() if limit < 1}
        if self.max_parallel < 1 or too_low:
            raise BackfillPlanError(
                f"max_parallel {self.max_parallel} and asset limits {too_low or {}}: "
                "every limit must be at least 1; nothing was launched"
            )


@dataclass(frozen=True)
class RunUnit:
    """Contiguous partitions of one asset that run together, as one run (a partition
    range when several); `partitions` are in partition order."""

    asset: dg.AssetKey
    partitions: tuple[str, ...]

    @property
    def nodes(self) -> tuple[Node, ...]:
        return tuple(Node(self.asset, partition) for partition in self.partitions)


Priority = tuple[int, int, int]

# Bounds of a run's overhead measured in partitions' work (`RunTimings.overhead_ratio`).
MAX_OVERHEAD_RATIO = 20.0


class RunTimings:
    """What runs of one asset took, as a line fitted through (partitions, seconds):
    seconds = overhead + partitions x work. Fed with finished units' results."""

    def __init__(self) -> None:
        self._sums = [0.0] * 5  # n, sum k, sum t, sum k*k, sum k*t

    def add(self, partitions: int, seconds: float) -> None:
        for index, value in enumerate((1, partitions, seconds, partitions * partitions, partitions * seconds)):
            self._sums[index] += value

    def overhead_ratio(self) -> float:
        """A run's overhead in partitions of work (overhead / work per partition), 0 until
        runs of two sizes were seen (or when their line has no positive slope)."""
        n, k, t, kk, kt = self._sums
        spread = n * kk - k * k
        if spread <= 0:
            return 0.0
        work = (n * kt - k * t) / spread
        overhead = (t - work * k) / n
        if work <= 0:
            return 0.0
        return min(max(overhead / work, 0.0), MAX_OVERHEAD_RATIO)


class Schedule:
    """The scheduling state of one backfill: statuses, ready nodes, running units.

    Every node of `graph` not in `done` is to run (nodes of `done` outside the graph
    are ignored). The caller launches what `next_units` hands out and reports each
    unit's results to `finish`; nothing else changes the state.
    """

    def __init__(
        self,
        graph: BackfillGraph,
        throttle: Throttle,
        done: Iterable[Node] = (),
        newest_first: bool = False,
        batch_chains: bool = True,
        pools: Mapping[dg.AssetKey, str] | None = None,
    ) -> None:
        self._graph = graph
        self._pools = dict(pools or {})  # each asset's Dagster pool, for those in one
        self._throttle = throttle
        self._batch_chains = batch_chains
        self._status = {node: NodeStatus.PENDING for node in graph.nodes()}
        for node in done:
            if node in self._status:
                self._status[node] = NodeStatus.SUCCEEDED
        self._children = downstream_index(graph)
        self._waiting_on = {
            node: sum(1 for parent in graph.upstream(node) if self._status[parent] != NodeStatus.SUCCEEDED)
            for node, state in self._status.items()
            if state == NodeStatus.PENDING
        }
        self._chain = chain_lengths(graph, self._children)
        self._priority = priorities(graph, self._chain, newest_first)
        self._timings: defaultdict[dg.AssetKey, RunTimings] = defaultdict(RunTimings)
        # Nodes still to run or running: the work left, in nodes.
        self._left = len(self._waiting_on)
        # A heap of ready nodes; a node a unit took along stays in it until popped, so
        # `_ready_count` counts the ready nodes still pending.
        self._ready = [(self._priority[node], node) for node, count in self._waiting_on.items() if count == 0]
        heapq.heapify(self._ready)
        self._ready_count = len(self._ready)
        self._running: set[RunUnit] = set()
        self._running_per_asset: Counter[dg.AssetKey] = Counter()
        self._running_per_pool: Counter[str] = Counter()

    @property
    def is_done(self) -> bool:
        """True once no node is ready or running: nothing more can start."""
        return self._ready_count == 0 and not self._running

    @property
    def running_units(self) -> frozenset[RunUnit]:
        return frozenset(self._running)

    def status(self, node: Node) -> NodeStatus:
        return self._status[node]

    def statuses(self) -> dict[Node, NodeStatus]:
        """Every node's status (a copy)."""
        return dict(self._status)

    def next_units(self, allowance: Allowance = UNLIMITED) -> list[RunUnit]:
        """The units to launch now, highest priority first, marked running.

        As many as the free slots allow (the throttle's, and `allowance`: what the
        deployment's capacity lets the backfill run now), skipping nodes of assets at
        their limit or in a pool at its cap. With free slots left, an empty list means
        every ready node waits on such a limit; with nothing running either, the
        backfill is done.
        """
        units, deferred = [], []
        while self._ready and len(self._running) < self._throttle.max_parallel and allowance.allows(len(self._running)):
            entry = heapq.heappop(self._ready)
            node = entry[1]
            if self._status[node] != NodeStatus.PENDING:  # taken along by an earlier unit
                continue
            self._ready_count -= 1
            limit = self._throttle.per_asset.get(node.asset)
            pool = self._pools.get(node.asset)
            if (limit is not None and self._running_per_asset[node.asset] >= limit) or not allowance.pool_allows(
                pool, self._running_per_pool[pool] if pool is not None else 0
            ):
                deferred.append(entry)
                continue
            if self._batch_chains:
                unit = unit_starting_at(
                    self._graph, node, self._status, self._children, self._waiting_on, self.ready_allowance(node)
                )
            else:
                unit = RunUnit(node.asset, (node.partition,))
            self._start(unit)
            units.append(unit)
        for entry in deferred:
            heapq.heappush(self._ready, entry)
        self._ready_count += len(deferred)
        return units

    def ready_allowance(self, node: Node) -> int:
        """How many more ready partitions the unit of `node` (just taken off the ready
        heap) may take along: none while every ready node gets a slot; else its share
        of the ready backlog (`_backlog_sharers`), as long as they add no more work
        than `node`'s slack.

        Slack is counted in nodes: the longest chain still to run (the makespan's
        lower bound, or the nodes left per slot when slots are the bound) minus
        `node`'s own chain. A node of slack is one run (overhead + one partition's
        work), and a member adds one partition's work: measured runs of the asset
        (`RunTimings`) turn a node of slack into 1 + overhead/work members. A unit
        of a node with downstream nodes spends half the slack: the rest is left to
        them, as they batch in turn (spending all of it at every level delays the
        critical path: on the bench DAG, simulated, 1.31x the bound at 31 days
        against 1.06x).
        """
        free = self._throttle.max_parallel - len(self._running)
        if self._ready_count < free:  # every other ready node has a slot: nothing would wait
            return 0
        backlog = self._ready_count + 1
        share = math.ceil(backlog / self._backlog_sharers(backlog, free))
        horizon = max(
            [self._chain[node], math.ceil(self._left / self._throttle.max_parallel)]
            + [self._chain[unit.nodes[0]] for unit in self._running]
        )
        slack = horizon - self._chain[node]
        members_per_slack_node = 1 + self._timings[node.asset].overhead_ratio()
        spent = slack if self._chain[node] == 1 else slack / 2
        return max(0, min(share - 1, math.floor(spent * members_per_slack_node)))

    def _backlog_sharers(self, backlog: int, free: int) -> int:
        """The slots a ready `backlog` of nodes is spread over: the `free` ones, and those
        of running units smaller than the share each would take (counted in nodes, they
        free up before a unit of that share would end, and take their part then).
        Spreading over the free slots alone, one free slot among short runs took a whole
        backlog into one long run that ended after the critical path (bench DAG, 31 days,
        range-capable: rolling_7d's 19 partitions in one 14 s run, 2 s past the rest)."""
        sharers = free
        for size in sorted(len(unit.nodes) for unit in self._running):
            if size >= math.ceil(backlog / sharers):
                break
            sharers += 1
        return sharers

    def finish(self, unit: RunUnit, results: Sequence[NodeResult]) -> None:
        """Frees the slot of a running `unit` and applies its results, one per node."""
        if unit not in self._running:
            raise SchedulingError(f"{unit} is not running")
        if Counter(result.node for result in results) != Counter(unit.nodes):
            raise SchedulingError(f"the results of {unit} are for {[result.node for result in results]}")
        self._running.remove(unit)
        self._running_per_asset[unit.asset] -= 1
        if unit.asset in self._pools:
            self._running_per_pool[self._pools[unit.asset]] -= 1
        if all(result.succeeded for result in results):
            seconds = max(result.ended for result in results) - min(result.started for result in results)
            self._timings[unit.asset].add(len(unit.nodes), seconds)
        self._left -= len(unit.nodes)
        for result in results:
            if result.succeeded:
                self._succeeded(result.node)
            else:
                self._failed(result.node)

    def _start(self, unit: RunUnit) -> None:
        for member in unit.nodes[1:]:
            if self._waiting_on[member] == 0:  # a ready member: its heap entry is now stale
                self._ready_count -= 1
        for member in unit.nodes:
            self._status[member] = NodeStatus.RUNNING
        self._running.add(unit)
        self._running_per_asset[unit.asset] += 1
        if unit.asset in self._pools:
            self._running_per_pool[self._pools[unit.asset]] += 1

    def _succeeded(self, node: Node) -> None:
        self._status[node] = NodeStatus.SUCCEEDED
        for child in self._children.get(node, ()):
            if self._status[child] != NodeStatus.PENDING:  # in `done`, or running beside it in its unit
                continue
            self._waiting_on[child] -= 1
            if self._waiting_on[child] == 0:
                heapq.heappush(self._ready, (self._priority[child], child))
                self._ready_count += 1

    def _failed(self, node: Node) -> None:
        self._status[node] = NodeStatus.FAILED
        stack = list(self._children.get(node, ()))
        while stack:
            child = stack.pop()
            if self._status[child] == NodeStatus.PENDING:
                self._status[child] = NodeStatus.BLOCKED
                self._left -= 1
                stack.extend(self._children.get(child, ()))


def downstream_index(graph: BackfillGraph) -> dict[Node, list[Node]]:
    """Each node's downstream nodes (a self-dependency names other partitions, never the node)."""
    children: dict[Node, list[Node]] = defaultdict(list)
    for node in graph.nodes():
        for parent in graph.upstream(node):
            if parent != node:
                children[parent].append(node)
    return children


def chain_lengths(graph: BackfillGraph, children: Mapping[Node, list[Node]]) -> dict[Node, int]:
    """Each node's longest chain of downstream nodes, itself included (1 for a leaf)."""
    chain: dict[Node, int] = {}
    for node in reversed(list(graph.nodes())):  # children come after their parents
        chain[node] = 1 + max((chain[c] for c in children.get(node, ())), default=0)
    return chain


def priorities(graph: BackfillGraph, chain: Mapping[Node, int], newest_first: bool) -> dict[Node, Priority]:
    """Each node's launch priority, lowest first: nodes heading the longest `chain`s of
    downstream nodes (the critical path) first, then oldest partitions, then upstream
    assets; with `newest_first`, newest partitions first, then upstream assets."""
    sign = -1 if newest_first else 1
    return {
        Node(key, partition): (0 if newest_first else -chain[Node(key, partition)], sign * index, asset_position)
        for asset_position, (key, asset_slice) in enumerate(graph.slices.items())
        for index, partition in enumerate(asset_slice.partition_keys)
    }


def unit_starting_at(
    graph: BackfillGraph,
    node: Node,
    status: Mapping[Node, NodeStatus],
    children: Mapping[Node, list[Node]],
    waiting_on: Mapping[Node, int],
    ready_allowance: int,
) -> RunUnit:
    """The run of the ready `node`: it and the next partitions of its asset that join it.

    Only assets whose runs may cover a range (`AssetSlice.max_batch` > 1) take any
    along, never across one of the slice's `breaks`. A later partition joins when
    - it is ready too, up to `ready_allowance` ready members beyond `node`; or
    - it depends on the previous member (a self-dependency: it could not run beside
      it), all its other unfinished upstream nodes are members, and nothing outside
      the run waits on the previous member. Such a chain delays nothing.
    """
    asset_slice = graph.slices[node.asset]
    first = asset_slice.index_of[node.partition]
    members = [node]
    ready_members = 0
    for index in range(first + 1, min(first + asset_slice.max_batch, len(asset_slice))):
        previous, candidate = members[-1], Node(node.asset, asset_slice.partition_keys[index])
        if index in asset_slice.breaks or status[candidate] != NodeStatus.PENDING:
            break
        if waiting_on[candidate] == 0:
            if ready_members == ready_allowance:
                break
            ready_members += 1
        elif set(children.get(previous, ())) != {candidate} or not _waits_only_on(
            graph, candidate, previous, members, status
        ):
            break
        members.append(candidate)
    return RunUnit(node.asset, tuple(member.partition for member in members))


def _waits_only_on(
    graph: BackfillGraph, node: Node, previous: Node, members: list[Node], status: Mapping[Node, NodeStatus]
) -> bool:
    unfinished = {p for p in graph.upstream(node) if status[p] != NodeStatus.SUCCEEDED}
    return previous in unfinished and unfinished <= set(members)


def failed_launch_results(unit: RunUnit, error: BaseException, at: float) -> list[NodeResult]:
    """The results of a unit whose launch raised `error` at `at`: every node failed."""
    return [NodeResult(node, False, None, at, at, f"{type(error).__name__}: {error}") for node in unit.nodes]
