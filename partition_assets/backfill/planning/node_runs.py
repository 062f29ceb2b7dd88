"""Sets of a backfill's nodes held as runs of partitions, not a node each: what a `--catch-up`
leaves alone as current over years of history (`NodeRuns`), and what a run of a backfill leaves
alone (`DoneNodes`: those runs beside the few nodes that succeeded in it). The planner, the
coordinator, its Dagster backfill mirror and `status` read them through `in`, `len` and the
counts per asset; a record stores the runs as they are (backfill/state/skipped_ranges.py).

Not guaranteed: a caller that iterates one gets a node per partition, made as it goes.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Set
from typing import TypeVar

import dagster as dg
import numpy as np

from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.graph import BackfillGraph

_T = TypeVar("_T")


def index_runs(indexes: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
    """The runs `[start, stop)` of consecutive values that `indexes` (in any order, repeats
    allowed) hold, as two arrays of starts and stops in increasing order."""
    ordered = np.unique(np.fromiter(indexes, dtype=np.int64))
    if not len(ordered):
        return ordered, ordered
    cuts = np.flatnonzero(np.diff(ordered) != 1) + 1  # where a value is not its predecessor's next
    return ordered[np.concatenate([[0], cuts])], ordered[np.concatenate([cuts - 1, [len(ordered) - 1]])] + 1


class NodeRuns(Set[Node]):
    """Nodes of a graph as runs `[start, stop)` of indexes into each asset's partitions in it:
    `in`, `len`, `count` and `counts` read the runs; iterating yields each node (for callers
    that need them). Set operations (`|`, `&`, `-`) return plain sets."""

    def __init__(self, graph: BackfillGraph, runs: Mapping[dg.AssetKey, tuple[np.ndarray, np.ndarray]]) -> None:
        self.graph = graph
        # Python lists: `bisect` on them beats a numpy call per lookup
        self._runs = {
            asset: (starts.tolist(), stops.tolist()) for asset, (starts, stops) in runs.items() if len(starts)
        }
        self._length = sum(int((stops - starts).sum()) for starts, stops in runs.values())

    @classmethod
    def of_partitions(cls, graph: BackfillGraph, partitions: Mapping[dg.AssetKey, Iterable[str]]) -> NodeRuns:
        """The nodes of `graph` that `partitions` (asset -> partition keys) names, keys outside
        the graph left out; read key by key, holding a node for none."""
        runs = {}
        for asset, keys in partitions.items():
            index_of = graph.slices[asset].index_of
            runs[asset] = index_runs(index_of[key] for key in keys if key in index_of)
        return cls(graph, runs)

    @classmethod
    def _from_iterable(cls, iterable: Iterable[_T]) -> set[_T]:
        """What a set operation (`|`, `&`, `-`) returns: a plain set of the nodes."""
        return set(iterable)

    def __contains__(self, node: object) -> bool:
        if not isinstance(node, Node) or node.asset not in self._runs:
            return False
        index = self.graph.slices[node.asset].index_of.get(node.partition)
        if index is None:
            return False
        starts, stops = self._runs[node.asset]
        run = bisect.bisect_right(starts, index) - 1
        return run >= 0 and index < stops[run]

    def __iter__(self) -> Iterator[Node]:
        for asset, (starts, stops) in self._runs.items():
            keys = self.graph.slices[asset].partition_keys
            for start, stop in zip(starts, stops, strict=True):
                yield from (Node(asset, key) for key in keys[start:stop])

    def __len__(self) -> int:
        return self._length

    def runs(self, asset: dg.AssetKey) -> tuple[list[int], list[int]]:
        """The starts and stops of `asset`'s runs, in increasing order (empty lists for none)."""
        return self._runs.get(asset, ([], []))

    def count(self, asset: dg.AssetKey) -> int:
        """How many of `asset`'s partitions it holds."""
        starts, stops = self.runs(asset)
        return sum(stop - start for start, stop in zip(starts, stops, strict=True))

    def counts(self) -> Counter[dg.AssetKey]:
        """How many partitions of each asset it holds."""
        return Counter({asset: self.count(asset) for asset in self._runs})


class DoneNodes(Set[Node]):
    """What a backfill's run leaves alone: `succeeded` (the nodes that succeeded in it, a set of
    the few it ran) and `current` (those a --catch-up start left alone, as runs), which do not
    overlap when `current` is what the record stores (a current node is never run). `in`, `len`
    and the counts per asset read both without a node per current partition; iterating yields
    each node (for callers that need them).

    Not guaranteed: `len` counts a node in both parts twice (only a caller that hands a
    succeeded node in `current` too makes one).
    """

    def __init__(self, succeeded: Collection[Node], current: NodeRuns) -> None:
        self.succeeded = succeeded
        self.current = current

    @classmethod
    def _from_iterable(cls, iterable: Iterable[_T]) -> set[_T]:
        """What a set operation (`|`, `&`, `-`) returns: a plain set of the nodes."""
        return set(iterable)

    def __contains__(self, node: object) -> bool:
        return node in self.succeeded or node in self.current

    def __iter__(self) -> Iterator[Node]:
        yield from self.succeeded
        yield from self.current

    def __len__(self) -> int:
        return len(self.succeeded) + len(self.current)

    def counts(self) -> Counter[dg.AssetKey]:
        """How many nodes of each asset it holds."""
        return Counter(node.asset for node in self.succeeded) + self.current.counts()


def asset_counts(nodes: Iterable[Node]) -> Counter[dg.AssetKey]:
    """How many of `nodes` each asset has: read from the runs of a `NodeRuns` or `DoneNodes`
    (no node made per partition), counted one by one for any other collection."""
    if isinstance(nodes, NodeRuns | DoneNodes):
        return nodes.counts()
    return Counter(node.asset for node in nodes)
