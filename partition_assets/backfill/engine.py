"""Executes a backfill graph: each node starts the moment its own upstream nodes succeed.

The loop, in the order it reads:
1. nodes whose upstream nodes all succeeded are *ready*;
2. ready nodes are launched while slots are free (overall and per asset);
3. when a node finishes, its downstream nodes count one fewer pending upstream;
   those reaching zero become ready; a failure blocks every descendant instead;
4. until no node is ready or running.
"""

import heapq
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
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


Launch = Callable[[Node], Future]


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
) -> dict[Node, NodeStatus]:
    """Runs every node not in `done`; returns each node's final status.

    Ready nodes launch oldest partition first (newest first with `newest_first`).
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
    priority = _priority(graph, newest_first)
    ready = [(priority[node], node) for node, count in waiting_on.items() if count == 0]
    heapq.heapify(ready)
    running: dict[Future, Node] = {}
    running_per_asset: dict[dg.AssetKey, int] = defaultdict(int)

    while (ready or running) and not should_stop():
        deferred = []
        while ready and len(running) < throttle.max_parallel:
            entry = heapq.heappop(ready)
            node = entry[1]
            limit = throttle.per_asset.get(node.asset)
            if limit is not None and running_per_asset[node.asset] >= limit:
                deferred.append(entry)
                continue
            status[node] = NodeStatus.RUNNING
            running_per_asset[node.asset] += 1
            running[launch(node)] = node
        for entry in deferred:
            heapq.heappush(ready, entry)
        if not running:
            break
        finished, _ = wait(running, timeout=1.0, return_when=FIRST_COMPLETED)
        for future in finished:
            node = running.pop(future)
            running_per_asset[node.asset] -= 1
            result = _result_of(future, node)
            on_result(result)
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


def _priority(graph: BackfillGraph, newest_first: bool) -> dict[Node, tuple[int, int]]:
    """(partition position, asset position): earlier partitions first, upstream assets first."""
    sign = -1 if newest_first else 1
    return {
        Node(key, partition): (sign * index, asset_position)
        for asset_position, (key, asset_slice) in enumerate(graph.slices.items())
        for index, partition in enumerate(asset_slice.partition_keys)
    }


def _result_of(future: Future, node: Node) -> NodeResult:
    try:
        return future.result()
    except Exception as error:  # the launcher itself failed: the node failed
        now = time.time()
        return NodeResult(node, False, None, now, now, f"{type(error).__name__}: {error}")


def _block_descendants(node: Node, children: dict[Node, list[Node]], status: dict[Node, NodeStatus]) -> None:
    stack = list(children.get(node, ()))
    while stack:
        child = stack.pop()
        if status[child] == NodeStatus.PENDING:
            status[child] = NodeStatus.BLOCKED
            stack.extend(children.get(child, ()))
