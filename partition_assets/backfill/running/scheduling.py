"""The scheduling core of a backfill: which runs to start next, and what a result changes.

A pure state machine, without runs, futures or clock: `Schedule` hands out run units
(`next_units`) and takes back their results (`finish`); `engine.execute` is the loop
that launches the units and waits for them. Its rules:
1. nodes whose upstream nodes all succeeded are *ready*;
2. ready nodes are handed out while slots are free (overall, per asset, and in what the
   deployment's capacity allows the backfill now: backfill/running/capacity.py), those
   heading the longest chains of work first, in seconds: each asset's seconds per node
   are estimated from earlier runs in the instance and from the backfill's own runs as
   they finish (backfill/running/durations.py), and the order follows the estimates as
   they change; a node takes along later partitions of its asset as one run unit (see
   `unit_starting_at`): ready ones that would wait for a slot anyway, as many as its
   slack allows, so that no member's chain ends past the longest chain left (see
   `Schedule.ready_allowance`);
3. when a node succeeds, its downstream nodes count one fewer pending upstream; those
   reaching zero become ready; a failure blocks every descendant instead; a node whose run
   yielded no output (running/skips.py) skips every descendant not blocked;
4. a unit of several partitions that fails is not failed: its partitions are ready again,
   to run as its two halves (`Schedule.finish`), each half that fails split again, down to
   single partitions; only a single partition's failure fails its node. So one bad
   partition fails itself and its descendants, not the siblings it shared a range run with,
   for at most 2n - 1 runs of a range of n: each range runs once, halves never merge again;
5. the backfill is done when no node is ready or running;
6. with `policy_chunks`, an asset's partitions run in the chunks its `BackfillPolicy` makes, as
   Dagster's backfill makes them (planning/policy_runs.py): a chunk launches as one unit once
   every member's upstream nodes outside it succeeded, whatever the timing (rule 2's batching
   and rule 4's halves do not apply to it); a chunk that fails fails every member, as a
   failed Dagster run fails every partition of its range; once an upstream failure blocks
   members of an asset's chunks not launched yet, its pending partitions are chunked again
   without them, as Dagster's backfill chunks only the partitions it can request.

Not guaranteed: the shortest makespan. The order is a list schedule by longest chain
(within the bound's reach on the generated shapes of bench/dag_shapes.py, simulated:
partition_assets_tests/unit/test_scheduling_shapes.py), and estimates are averages per asset.
"""

import heapq
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

import dagster as dg

from partition_assets.backfill.model import Node, NodeResult, NodeStatus, RunUnit
from partition_assets.backfill.planning.graph import AssetSlice, BackfillGraph
from partition_assets.backfill.planning.policy_runs import policy_runs
from partition_assets.backfill.running.capacity import UNLIMITED, Allowance
from partition_assets.backfill.running.durations import Durations
from partition_assets.errors import BackfillPlanError, SchedulingError


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


Priority = tuple[float, int, int]


class Schedule:
    """The scheduling state of one backfill: statuses, ready nodes, running units.

    Every node of `graph` not in `done` is to run (nodes of `done` outside the graph
    are ignored). The caller launches what `next_units` hands out and reports each
    unit's results to `finish`; nothing else changes the state. `durations` are the
    seconds per node of assets measured by earlier runs (durations.recorded_seconds);
    the others are estimated, and every estimate follows this backfill's runs. With
    `policy_chunks` (and `batch_chains`), assets run in their policy's chunks (rule 6).
    """

    def __init__(
        self,
        graph: BackfillGraph,
        throttle: Throttle,
        done: AbstractSet[Node] = frozenset(),
        newest_first: bool = False,
        batch_chains: bool = True,
        pools: Mapping[dg.AssetKey, str] | None = None,
        durations: Mapping[dg.AssetKey, float] | None = None,
        policy_chunks: bool = False,
    ) -> None:
        self._graph = graph
        self._pools = dict(pools or {})  # each asset's Dagster pool, for those in one
        self._throttle = throttle
        self._batch_chains = batch_chains
        self._newest_first = newest_first
        self._status = {node: NodeStatus.PENDING for node in graph.nodes()}
        for node in self._status:  # asks `done`, never iterates it: a catch-up's are runs (node_runs.py)
            if node in done:
                self._status[node] = NodeStatus.SUCCEEDED
        self._children = downstream_index(graph)
        self._waiting_on = {
            node: sum(1 for parent in graph.upstream(node) if self._status[parent] != NodeStatus.SUCCEEDED)
            for node, state in self._status.items()
            if state == NodeStatus.PENDING
        }
        # Rule 6: each pending node of a chunked asset and its chunk; per chunk not finished, its
        # members still waiting; the first members on the ready heap, each standing for its chunk.
        self._chunk_of: dict[Node, RunUnit] = {}
        self._chunk_waiting: dict[RunUnit, int] = {}
        self._queued_heads: set[Node] = set()
        self._chunked = [s for s in graph.slices.values() if s.max_batch > 1] if policy_chunks and batch_chains else []
        for asset_slice in self._chunked:
            self._chunk(asset_slice)
        self.durations = Durations(graph.slices, durations)
        # Reordering costs a pass over the graph: at most about MAX_REORDERS of them per backfill.
        self._reorder_every = max(1, len(self._waiting_on) // MAX_REORDERS)
        self._finished_since_reorder = 0
        self._reorder_due = False
        # What the estimates order: the nodes left to run and those downstream of them (the work
        # their chains hold). A node done from the start and downstream of none of them is never
        # launched nor weighs on one that is: a catch-up over years of history orders its gaps.
        self._ordered = _in_graph_order(graph, _with_descendants(self._waiting_on, self._children))
        self._order_by_estimates()
        # Nodes still to launch, per asset: the work left besides what runs.
        self._unlaunched = Counter(node.asset for node in self._waiting_on)
        # A heap of ready nodes; a node a unit took along stays in it until popped, so
        # `_ready_count` (and `_ready_per_asset`) count the ready nodes still pending.
        self._ready = [
            (self._priority[node], node)
            for node, count in self._waiting_on.items()
            if count == 0 and self._heads_ready_unit(node)
        ]
        heapq.heapify(self._ready)
        self._queued_heads = {node for _, node in self._ready if node in self._chunk_of}
        self._ready_per_asset = Counter(node.asset for _, node in self._ready)
        self._ready_count = len(self._ready)
        # The seconds of those two counts, by the estimates the nodes are ordered by (`_seconds`).
        self._ready_seconds = self._seconds_of(self._ready_per_asset)
        self._unlaunched_seconds = self._seconds_of(self._unlaunched)
        self._running: dict[RunUnit, float | None] = {}  # each running unit's launch time, when told
        self._running_per_asset: Counter[dg.AssetKey] = Counter()
        self._running_per_pool: Counter[str] = Counter()
        # The members of failed units, each to run again only with the members of its half.
        self._halves: dict[Node, RunUnit] = {}

    def _chunk(self, asset_slice: AssetSlice) -> None:
        """Binds each pending node of the asset to its policy chunk, as Dagster's backfill chunks
        the partitions it requests together (policy_runs.py; partitions that run, ran or cannot
        run are left out); a member waits only on upstream nodes outside its chunk (a
        self-dependency inside it runs in the same run)."""
        key = asset_slice.key
        left_out = {p for p in asset_slice.partition_keys if self._status[Node(key, p)] != NodeStatus.PENDING}
        for chunk in policy_runs(asset_slice, left_out):
            members = set(chunk.nodes)
            for member in chunk.nodes:
                self._chunk_of[member] = chunk
                self._waiting_on[member] = sum(
                    1
                    for parent in self._graph.upstream(member)
                    if parent not in members and self._status[parent] != NodeStatus.SUCCEEDED
                )
            self._chunk_waiting[chunk] = sum(1 for member in chunk.nodes if self._waiting_on[member] > 0)

    def _chunk_again(self, assets: set[dg.AssetKey]) -> None:
        """The pending nodes of `assets` chunked again, once some of them can no longer run (an
        upstream node failed): Dagster's backfill chunks the partitions it can request, so the
        others close ranges up around those that are blocked."""
        for asset_slice in self._chunked:
            if asset_slice.key not in assets:
                continue
            nodes = (Node(asset_slice.key, partition) for partition in asset_slice.partition_keys)
            pending = [node for node in nodes if self._status[node] == NodeStatus.PENDING]
            for node in pending:
                self._chunk_waiting.pop(self._chunk_of.pop(node), None)
                if node in self._queued_heads:  # its heap entry is stale: it may head another chunk now
                    self._queued_heads.discard(node)
                    self._ready_changed(node.asset, -1)
            self._chunk(asset_slice)
            for node in pending:
                if self._heads_ready_unit(node):
                    self._push_ready(node)

    def _push_ready(self, node: Node) -> None:
        heapq.heappush(self._ready, (self._priority[node], node))
        self._ready_changed(node.asset, 1)
        if node in self._chunk_of:
            self._queued_heads.add(node)

    def _heads_ready_unit(self, node: Node) -> bool:
        """Whether the ready `node` goes on the ready heap: a node of no chunk does; a chunk's
        first member does once no member waits (it then stands for the whole chunk): the ready
        heap holds no other member of a chunk."""
        chunk = self._chunk_of.get(node)
        return chunk is None or (chunk.nodes[0] == node and self._chunk_waiting[chunk] == 0)

    def _order_by_estimates(self) -> None:
        """Each node's chain of work (seconds, by the current estimates) and launch priority."""
        self._seconds = self.durations.ordered()
        self._chain = chain_seconds(self._graph, self._children, self._seconds, self._ordered)
        self._priority = priorities(self._graph, self._chain, self._newest_first, self._ordered)

    def _seconds_of(self, counts: Counter[dg.AssetKey]) -> float:
        return sum(self._seconds[asset] * count for asset, count in counts.items())

    def _ready_changed(self, asset: dg.AssetKey, count: int) -> None:
        self._ready_per_asset[asset] += count
        self._ready_count += count
        self._ready_seconds += count * self._seconds[asset]

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

    def next_units(self, allowance: Allowance = UNLIMITED, now: float | None = None) -> list[RunUnit]:
        """The units to launch now, highest priority first, marked running.

        As many as the free slots allow (the throttle's, and `allowance`: what the
        deployment's capacity lets the backfill run now), skipping nodes of assets at
        their limit or in a pool at its cap. With free slots left, an empty list means
        every ready node waits on such a limit; with nothing running either, the
        backfill is done. `now` (seconds on any clock that only moves forward, the same
        at every call) tells how long the running units have run, so that their work
        left counts, not their whole; without it, a running unit counts as just launched.
        """
        units, deferred = [], []
        while self._ready and len(self._running) < self._throttle.max_parallel and allowance.allows(len(self._running)):
            entry = heapq.heappop(self._ready)
            node = entry[1]
            if self._status[node] != NodeStatus.PENDING:  # taken along by an earlier unit
                continue
            if node in self._chunk_of and node not in self._queued_heads:  # chunked again since: stale
                continue
            self._ready_changed(node.asset, -1)
            limit = self._throttle.per_asset.get(node.asset)
            pool = self._pools.get(node.asset)
            if (limit is not None and self._running_per_asset[node.asset] >= limit) or not allowance.pool_allows(
                pool, self._running_per_pool[pool] if pool is not None else 0
            ):
                deferred.append(entry)
                continue
            half = self._halves.get(node)
            if node in self._chunk_of:
                unit = self._chunk_of[node]
                self._queued_heads.discard(node)
            elif half is not None:  # the whole half it belongs to, as far as its members can run together
                unit = unit_starting_at(
                    self._graph, node, self._status, self._children, self._waiting_on, len(half.nodes), half
                )
            elif self._batch_chains:
                unit = unit_starting_at(
                    self._graph, node, self._status, self._children, self._waiting_on, self.ready_allowance(node, now)
                )
            else:
                unit = RunUnit(node.asset, (node.partition,))
            self._start(unit, now)
            units.append(unit)
        for entry in deferred:
            heapq.heappush(self._ready, entry)
            self._ready_changed(entry[1].asset, 1)
        return units

    def ready_allowance(self, node: Node, now: float | None = None) -> int:
        """How many more ready partitions the unit of `node` (just taken off the ready
        heap) may take along: none while every ready node gets a slot, nor before a run
        of its asset (earlier, or in this backfill) told how long its nodes take; else its share
        of the ready backlog's work (`_backlog_sharers`), as long as the members' work
        fits in `node`'s slack.

        Slack is in seconds, by the estimates: the longest chain of work left (the
        makespan's lower bound: the longest chain of a ready node, or of a running unit
        from its end on, or the work left spread over the slots) minus `node`'s own
        chain; running units have run since their launch, as `now` tells. A member delays
        `node`'s downstream nodes by its work, and its own by the members after it; a
        unit of a node with downstream nodes spends half the slack: the rest is left to
        them, as they batch in turn (spending all of it at every level delays the
        critical path: on the bench DAG, simulated, 1.31x the bound at 31 days against
        1.06x).
        """
        free = self._throttle.max_parallel - len(self._running)
        if self._ready_count < free:  # every other ready node has a slot: nothing would wait
            return 0
        if not self.durations.known(node.asset):  # its first runs tell how long its nodes take
            return 0
        seconds = self._seconds[node.asset]
        backlog = seconds + self._ready_seconds
        remaining = {unit: self._remaining(unit, now) for unit in self._running}
        share = backlog / self._backlog_sharers(backlog, free, remaining.values())
        horizon = max(
            [self._chain[node], (self._unlaunched_seconds + sum(remaining.values())) / self._throttle.max_parallel]
            + [
                left_of_unit + max(self._chain[member] for member in unit.nodes) - self._seconds[unit.asset]
                for unit, left_of_unit in remaining.items()
            ]
        )
        slack = horizon - self._chain[node]
        spent = slack if node not in self._children else slack / 2
        by_share = math.ceil(share / seconds - _ROUNDING) - 1
        by_slack = math.floor(spent / self.durations.member_seconds(node.asset) + _ROUNDING)
        return max(0, min(by_share, by_slack))

    def _remaining(self, unit: RunUnit, now: float | None) -> float:
        """The estimated seconds a running `unit` has left at `now` (all of them when either is unknown)."""
        launched = self._running[unit]
        whole = len(unit.nodes) * self._seconds[unit.asset]
        return whole if launched is None or now is None else max(0.0, whole - (now - launched))

    def _backlog_sharers(self, backlog: float, free: int, remaining: Iterable[float]) -> int:
        """The slots a ready `backlog` of work (seconds) is spread over: the `free` ones,
        and those of running units shorter than the share each would take (they free up
        before a unit of that share would end, and take their part then). Spreading over
        the free slots alone, one free slot among short runs took a whole backlog into
        one long run that ended after the critical path (bench DAG, 31 days,
        range-capable: rolling_7d's 19 partitions in one 14 s run, 2 s past the rest)."""
        sharers = free
        for unit_seconds in sorted(remaining):
            if unit_seconds >= backlog / sharers:
                break
            sharers += 1
        return sharers

    def finish(self, unit: RunUnit, results: Sequence[NodeResult]) -> list[NodeResult]:
        """Frees the slot of a running `unit` and applies its results, one per node; returns
        those that are final. A unit of several partitions whose every node failed returns
        none: its partitions run again, in halves (rule 4 of the module docstring)."""
        if unit not in self._running:
            raise SchedulingError(f"{unit} is not running")
        if Counter(result.node for result in results) != Counter(unit.nodes):
            raise SchedulingError(f"the results of {unit} are for {[result.node for result in results]}")
        del self._running[unit]
        self._running_per_asset[unit.asset] -= 1
        if unit.asset in self._pools:
            self._running_per_pool[self._pools[unit.asset]] -= 1
        if all(result.succeeded for result in results):
            seconds = max(result.ended for result in results) - min(result.started for result in results)
            self._reorder_due |= self.durations.add(unit.asset, len(unit.nodes), seconds)
        self._finished_since_reorder += len(unit.nodes)
        if self._reorder_due and self._finished_since_reorder >= self._reorder_every:
            self._reorder()
        for member in unit.nodes:
            self._halves.pop(member, None)
        if len(unit.nodes) > 1 and unit.nodes[0] not in self._chunk_of and not any(r.succeeded for r in results):
            self._run_again_in_halves(unit)
            return []
        settled: set[dg.AssetKey] = set()  # assets of nodes that will not run now
        for result in results:
            if result.skipped:
                settled |= self._skipped(result.node)
            elif result.succeeded:
                self._succeeded(result.node)
            else:
                settled |= self._failed(result.node)
        self._chunk_waiting.pop(unit, None)
        if self._chunked and settled:
            self._chunk_again(settled)
        return list(results)

    def _run_again_in_halves(self, unit: RunUnit) -> None:
        """The failed `unit`'s members pending again, each bound to its half: the ready ones
        back on the ready heap, the others (a self-dependency's chain) waiting on the members
        before them as they did."""
        middle = (len(unit.partitions) + 1) // 2
        for half in (RunUnit(unit.asset, unit.partitions[:middle]), RunUnit(unit.asset, unit.partitions[middle:])):
            for member in half.nodes:
                self._halves[member] = half
        for member in unit.nodes:
            self._status[member] = NodeStatus.PENDING
            if self._waiting_on[member] == 0:
                heapq.heappush(self._ready, (self._priority[member], member))
                self._ready_changed(member.asset, 1)
        self._unlaunched[unit.asset] += len(unit.nodes)
        self._unlaunched_seconds += len(unit.nodes) * self._seconds[unit.asset]

    def _reorder(self) -> None:
        """The chains and priorities again, by estimates that moved, and the ready heap in that order."""
        self._order_by_estimates()
        self._ready = [(self._priority[node], node) for _, node in self._ready]
        heapq.heapify(self._ready)
        self._ready_seconds = self._seconds_of(self._ready_per_asset)
        self._unlaunched_seconds = self._seconds_of(self._unlaunched)
        self._finished_since_reorder = 0
        self._reorder_due = False

    def _start(self, unit: RunUnit, now: float | None) -> None:
        for member in unit.nodes[1:] if unit.nodes[0] not in self._chunk_of else ():  # a chunk's head stood for it
            if self._waiting_on[member] == 0:  # a ready member: its heap entry is now stale
                self._ready_changed(member.asset, -1)
        for member in unit.nodes:
            self._status[member] = NodeStatus.RUNNING
        self._running[unit] = now
        self._unlaunched[unit.asset] -= len(unit.nodes)
        self._unlaunched_seconds -= len(unit.nodes) * self._seconds[unit.asset]
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
                chunk = self._chunk_of.get(child)
                if chunk is not None:  # ready once its whole chunk is: its first member stands for it
                    self._chunk_waiting[chunk] -= 1
                    if self._chunk_waiting[chunk]:
                        continue
                    child = chunk.nodes[0]
                self._push_ready(child)

    def _failed(self, node: Node) -> set[dg.AssetKey]:
        """`node` failed: every descendant that did not run is blocked, those skipped meanwhile
        behind another node included (Dagster's steps downstream of a failure do not run).
        Returns the assets of those it settled."""
        self._status[node] = NodeStatus.FAILED
        return self._settle_descendants(node, NodeStatus.BLOCKED, {NodeStatus.PENDING, NodeStatus.SKIPPED})

    def _skipped(self, node: Node) -> set[dg.AssetKey]:
        """`node`'s run yielded no output: its pending descendants are skipped, as Dagster skips
        every step reading an output that was not yielded (running/skips.py). Returns the
        assets of those it settled."""
        self._status[node] = NodeStatus.SKIPPED
        return self._settle_descendants(node, NodeStatus.SKIPPED, {NodeStatus.PENDING})

    def _settle_descendants(self, node: Node, final: NodeStatus, settled: set[NodeStatus]) -> set[dg.AssetKey]:
        """Every descendant of `node` in one of the `settled` statuses becomes `final`; a
        pending one no longer counts as work left. Returns the assets of those it changed."""
        changed: set[dg.AssetKey] = set()
        stack = list(self._children.get(node, ()))
        while stack:
            child = stack.pop()
            if self._status[child] in settled and self._status[child] != final:
                if self._status[child] == NodeStatus.PENDING:
                    self._unlaunched[child.asset] -= 1
                    self._unlaunched_seconds -= self._seconds[child.asset]
                self._status[child] = final
                changed.add(child.asset)
                stack.extend(self._children.get(child, ()))
        return changed


# Estimates are averages: a share or slack within this fraction of one more member's work still takes it.
_ROUNDING = 1e-6
MAX_REORDERS = 50


def downstream_index(graph: BackfillGraph) -> dict[Node, list[Node]]:
    """Each node's downstream nodes (a self-dependency names other partitions, never the node)."""
    children: dict[Node, list[Node]] = defaultdict(list)
    for node in graph.nodes():
        for parent in graph.upstream(node):
            if parent != node:
                children[parent].append(node)
    return children


def chain_seconds(
    graph: BackfillGraph,
    children: Mapping[Node, list[Node]],
    seconds: Mapping[dg.AssetKey, float],
    nodes: Sequence[Node] | None = None,
) -> dict[Node, float]:
    """Each node's longest chain of downstream work, itself included, with each node of an
    asset taking `seconds[asset]`: of every node, or of `nodes` (in graph order, each with
    its downstream nodes)."""
    chain: dict[Node, float] = {}
    for node in reversed(list(graph.nodes()) if nodes is None else nodes):  # children come after their parents
        chain[node] = seconds[node.asset] + max((chain[c] for c in children.get(node, ())), default=0.0)
    return chain


def _with_descendants(nodes: Iterable[Node], children: Mapping[Node, list[Node]]) -> set[Node]:
    """`nodes` and every node downstream of one."""
    found = set(nodes)
    frontier = list(found)
    while frontier:
        frontier = [child for node in frontier for child in children.get(node, ()) if child not in found]
        found.update(frontier)
    return found


def _in_graph_order(graph: BackfillGraph, nodes: set[Node]) -> list[Node]:
    """`nodes` in the order of `graph.nodes()`: asset by asset, each asset's in partition order."""
    if len(nodes) == graph.node_count():
        return list(graph.nodes())
    position = {key: n for n, key in enumerate(graph.slices)}
    return sorted(nodes, key=lambda node: (position[node.asset], graph.slices[node.asset].index_of[node.partition]))


def critical_path(
    graph: BackfillGraph, seconds: Mapping[dg.AssetKey, float], done: AbstractSet[Node] = frozenset()
) -> tuple[list[Node], float]:
    """The longest chain of work through the nodes of `graph` that run (all but `done`: what
    --catch-up leaves alone as current, which no node waits for), each node of an asset taking
    `seconds[asset]`, first node first, and its seconds; ([], 0.0) when none runs.
    Of chains equally long, the one starting with the earliest node in plan order."""
    children = downstream_index(graph)
    nodes = list(graph.nodes())
    if done:
        nodes = [node for node in nodes if node not in done]
        children = {node: [c for c in children.get(node, ()) if c not in done] for node in nodes}
    chain = chain_seconds(graph, children, seconds, nodes)
    if not chain:
        return [], 0.0
    node = max(nodes, key=chain.__getitem__)
    path = [node]
    while children.get(node):
        node = max(children[node], key=chain.__getitem__)
        path.append(node)
    return path, chain[path[0]]


def priorities(
    graph: BackfillGraph, chain: Mapping[Node, float], newest_first: bool, nodes: Iterable[Node] | None = None
) -> dict[Node, Priority]:
    """Each node's launch priority (of every node, or of `nodes`), lowest first: nodes heading
    the longest `chain`s of downstream work (the critical path) first, then oldest partitions,
    then upstream assets; with `newest_first`, newest partitions first, then upstream assets."""
    sign = -1 if newest_first else 1
    position = {key: n for n, key in enumerate(graph.slices)}
    return {
        node: (
            0.0 if newest_first else -chain[node],
            sign * graph.slices[node.asset].index_of[node.partition],
            position[node.asset],
        )
        for node in (graph.nodes() if nodes is None else nodes)
    }


def unit_starting_at(
    graph: BackfillGraph,
    node: Node,
    status: Mapping[Node, NodeStatus],
    children: Mapping[Node, list[Node]],
    waiting_on: Mapping[Node, int],
    ready_allowance: int,
    within: RunUnit | None = None,
) -> RunUnit:
    """The run of the ready `node`: it and the next partitions of its asset that join it.

    Only assets whose runs may cover a range (`AssetSlice.max_batch` > 1) take any
    along, never across one of the slice's `breaks`, nor past the end of `within` (the
    half of a failed unit that `node` belongs to). A later partition joins when
    - it is ready too, up to `ready_allowance` ready members beyond `node`; or
    - it depends on the previous member (a self-dependency: it could not run beside
      it), all its other unfinished upstream nodes are members, and nothing outside
      the run waits on the previous member. Such a chain delays nothing.
    """
    asset_slice = graph.slices[node.asset]
    first = asset_slice.index_of[node.partition]
    members = [node]
    ready_members = 0
    end = len(asset_slice) if within is None else asset_slice.index_of[within.partitions[-1]] + 1
    for index in range(first + 1, min(first + asset_slice.max_batch, end)):
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
