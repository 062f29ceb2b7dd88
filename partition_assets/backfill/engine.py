"""Executes a backfill graph: each node starts the moment its own upstream nodes succeed.

The loop, in the order it reads:
1. nodes whose upstream nodes all succeeded are *ready*;
2. ready nodes are launched while slots are free (overall and per asset), those
   heading the longest chains of work first; a node takes along later partitions
   of its asset that would wait anyway (see `_batch`);
3. when a node finishes, its downstream nodes count one fewer pending upstream;
   those reaching zero become ready; a failure blocks every descendant instead;
4. until no node is ready or running.
"""

import heapq
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from enum import Enum

import dagster as dg

from partition_assets.backfill.graph import BackfillGraph, Node


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
    """At most `max_parallel` nodes at once, and `per_asset[asset]` of one asset."""

    max_parallel: int = 4
    per_asset: dict[dg.AssetKey, int] = field(default_factory=dict)


# Ready nodes that may share one run while more nodes are ready than slots are free.
# Measured on the benchmark DAG (bench/results/engine.md): 3 balances the overhead a
# run saves against the wait it adds for the first member's downstream nodes.
MAX_READY_BATCH = 3


# Runs contiguous partitions of one asset as one run; the future gives a result per node.
Launch = Callable[[Sequence[Node]], Future]


def downstream_index(graph: BackfillGraph) -> dict[Node, list[Node]]:
    children: dict[Node, list[Node]] = defaultdict(list)
    for node in graph.nodes():
        for parent in graph.upstream(node):
            if parent != node:
                children[parent].append(node)
    return children


def execute(
    graph: BackfillGraph,
    launch: Launch,
    throttle: Throttle,
    done: Iterable[Node] = (),
    on_result: Callable[[NodeResult], None] = lambda result: None,
    newest_first: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
    batch_chains: bool = True,
) -> dict[Node, NodeStatus]:
    """Runs every node not in `done`; returns each node's final status.

    Ready nodes launch oldest partition first (newest first with `newest_first`).
    With `batch_chains`, a node of an asset that runs partition ranges
    (`AssetSlice.max_batch`) takes its chain along in the same run.
    When `should_stop()` turns true, nothing more is launched and running nodes
    are left to the caller.
    """
    status = {node: NodeStatus.PENDING for node in graph.nodes()}
    for node in done:
        status[node] = NodeStatus.SUCCEEDED
    children = downstream_index(graph)
    waiting_on = {
        node: sum(1 for parent in graph.upstream(node) if status[parent] != NodeStatus.SUCCEEDED)
        for node, state in status.items()
        if state == NodeStatus.PENDING
    }
    priority = _priority(graph, children, newest_first)
    ready = [(priority[node], node) for node, count in waiting_on.items() if count == 0]
    heapq.heapify(ready)
    running: dict[Future, list[Node]] = {}
    running_per_asset: dict[dg.AssetKey, int] = defaultdict(int)

    while (ready or running) and not should_stop():
        deferred = []
        while ready and len(running) < throttle.max_parallel:
            entry = heapq.heappop(ready)
            node = entry[1]
            if status[node] != NodeStatus.PENDING:  # taken along by an earlier batch
                continue
            limit = throttle.per_asset.get(node.asset)
            if limit is not None and running_per_asset[node.asset] >= limit:
                deferred.append(entry)
                continue
            # Ready nodes beyond the free slots would wait anyway: some may share runs.
            backlog = len(ready) >= throttle.max_parallel - len(running)  # this launch takes one slot
            batch = _batch(graph, node, status, children, waiting_on, backlog) if batch_chains else [node]
            for member in batch:
                status[member] = NodeStatus.RUNNING
            running_per_asset[node.asset] += 1
            running[launch(batch)] = batch
        for entry in deferred:
            heapq.heappush(ready, entry)
        if not running:
            break
        finished, _ = wait(running, timeout=1.0, return_when=FIRST_COMPLETED)
        for future in finished:
            batch = running.pop(future)
            running_per_asset[batch[0].asset] -= 1
            for result in _results_of(future, batch):
                on_result(result)
                node = result.node
                if result.succeeded:
                    status[node] = NodeStatus.SUCCEEDED
                    for child in children.get(node, ()):
                        waiting_on[child] -= 1
                        if waiting_on[child] == 0 and status[child] == NodeStatus.PENDING:
                            heapq.heappush(ready, (priority[child], child))
                else:
                    status[node] = NodeStatus.FAILED
                    _block_descendants(node, children, status)
    return status


def _batch(
    graph: BackfillGraph,
    node: Node,
    status: dict[Node, NodeStatus],
    children: dict[Node, list[Node]],
    waiting_on: dict[Node, int],
    backlog: bool,
) -> list[Node]:
    """`node` and the next partitions of its asset that share its run (a partition range).

    Only for assets whose runs may cover a range (`AssetSlice.max_batch`). A later
    partition joins when
    - it is ready too, while there is a backlog (it would wait for a slot anyway),
      up to MAX_READY_BATCH ready members; or
    - it depends on the previous member (a self-dependency: it could not run beside
      it), all its other unfinished upstream nodes are members, and nothing outside
      the run waits on the previous member. Such a chain delays nothing.
    """
    asset_slice = graph.slices[node.asset]
    first = asset_slice.index_of[node.partition]
    batch = [node]
    ready_members = 1
    for key in asset_slice.partition_keys[first + 1 : first + asset_slice.max_batch]:
        previous, candidate = batch[-1], Node(node.asset, key)
        if status[candidate] != NodeStatus.PENDING:
            break
        if waiting_on.get(candidate) == 0:
            if not backlog or ready_members == MAX_READY_BATCH:
                break
            ready_members += 1
        elif set(children.get(previous, ())) != {candidate} or not _waits_only_on(
            graph, candidate, previous, batch, status
        ):
            break
        batch.append(candidate)
    return batch


def _waits_only_on(graph: BackfillGraph, node: Node, previous: Node, batch: list[Node], status) -> bool:
    unfinished = {p for p in graph.upstream(node) if status[p] != NodeStatus.SUCCEEDED}
    return previous in unfinished and unfinished <= set(batch)


def _priority(
    graph: BackfillGraph, children: dict[Node, list[Node]], newest_first: bool
) -> dict[Node, tuple[int, int, int]]:
    """Nodes heading the longest chains of downstream nodes (the critical path) first,
    then oldest partitions, then upstream assets; with `newest_first`, newest partitions first."""
    chain: dict[Node, int] = {}
    if not newest_first:
        for node in reversed(list(graph.nodes())):  # children come after their parents
            chain[node] = 1 + max((chain[c] for c in children.get(node, ())), default=0)
    sign = -1 if newest_first else 1
    return {
        Node(key, partition): (-chain.get(Node(key, partition), 0), sign * index, asset_position)
        for asset_position, (key, asset_slice) in enumerate(graph.slices.items())
        for index, partition in enumerate(asset_slice.partition_keys)
    }


def _results_of(future: Future, batch: list[Node]) -> list[NodeResult]:
    try:
        return future.result()
    except Exception as error:  # the launcher itself failed: every node of its run failed
        now = time.time()
        return [NodeResult(node, False, None, now, now, f"{type(error).__name__}: {error}") for node in batch]


def _block_descendants(node: Node, children: dict[Node, list[Node]], status: dict[Node, NodeStatus]) -> None:
    stack = list(children.get(node, ()))
    while stack:
        child = stack.pop()
        if status[child] == NodeStatus.PENDING:
            status[child] = NodeStatus.BLOCKED
            stack.extend(children.get(child, ()))
