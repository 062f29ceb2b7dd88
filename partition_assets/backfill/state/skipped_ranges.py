"""The partitions a `--catch-up` backfill left alone as current (a record's `skipped`), stored as
runs of consecutive partitions per asset, so that a record's size grows with the gaps the
backfill fills, not with the asset's history: two years of hourly partitions with a handful of
gaps store in a few hundred bytes, where listing them took 350 kB.

The stored form (record format 4), per asset: `{"starts": ..., "stops": ...}`, the runs
`[start, stop)` of indexes into that asset's partitions in the record's stored plan (its keys
in the partitions definition's order, for every kind of definition: stored_plan.py), packed
as the stored plan packs its edges (`packed_indexes`). The runs index the plan stored in the
same record body, so a partitions definition that lists keys differently later (a dynamic
partition added) does not move them; extending a backfill stores both again together.
An asset whose value is a list holds the keys themselves: a record of format 3 or earlier
lists them so, and keeps them so when this release saves it again.

Readers take the runs as they are (`SkippedNodes`): membership, counts per asset and in all
from the runs' lengths, no object per partition; only a caller that iterates gets the nodes.

Not guaranteed: listed keys (format 3) that the backfill's graph no longer holds are left out,
as earlier releases left them out.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping, Set
from typing import Any, TypeVar

import dagster as dg
import numpy as np

from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.state.stored_plan import packed_indexes, unpacked_indexes
from partition_assets.errors import StoredPlanError

# A record's `skipped` as stored: asset -> its runs, or (format 3 and earlier) its keys listed.
StoredSkipped = dict[str, dict[str, str] | list[str]]
_T = TypeVar("_T")


def stored_skipped(graph: BackfillGraph, nodes: Iterable[Node]) -> StoredSkipped:
    """`nodes` (of `graph`) as a record stores them: asset -> its runs of consecutive indexes
    into the asset's partitions in `graph` (see the module docstring); assets without any are absent."""
    indexes: dict[dg.AssetKey, list[int]] = {}
    for node in nodes:
        indexes.setdefault(node.asset, []).append(graph.slices[node.asset].index_of[node.partition])
    stored: StoredSkipped = {}
    for asset in graph.slices:  # the graph's order, so equal sets store equal
        if asset in indexes:
            starts, stops = index_runs(indexes[asset])
            stored[asset.to_user_string()] = {"starts": packed_indexes(starts), "stops": packed_indexes(stops)}
    return stored


def index_runs(indexes: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
    """The runs `[start, stop)` of consecutive values that `indexes` (in any order, repeats
    allowed) hold, as two arrays of starts and stops in increasing order."""
    ordered = np.unique(np.fromiter(indexes, dtype=np.int64))
    if not len(ordered):
        return ordered, ordered
    cuts = np.flatnonzero(np.diff(ordered) != 1) + 1  # where a value is not its predecessor's next
    return ordered[np.concatenate([[0], cuts])], ordered[np.concatenate([cuts - 1, [len(ordered) - 1]])] + 1


class SkippedNodes(Set[Node]):
    """The nodes of a graph a record's `skipped` names, as runs of indexes per asset: `in`,
    `len` and `count` read the runs; iterating yields each node (for callers that need them)."""

    def __init__(self, graph: BackfillGraph, runs: Mapping[dg.AssetKey, tuple[np.ndarray, np.ndarray]]) -> None:
        self._graph = graph
        # Python lists: `bisect` on them beats a numpy call per lookup
        self._runs = {
            asset: (starts.tolist(), stops.tolist()) for asset, (starts, stops) in runs.items() if len(starts)
        }
        self._length = sum(int((stops - starts).sum()) for starts, stops in runs.values())

    @classmethod
    def of(cls, stored: Mapping[str, Any], graph: BackfillGraph, backfill_id: str) -> SkippedNodes:
        """The nodes of `graph` that `stored` (the `skipped` of backfill `backfill_id`'s record,
        in any format) names.

        Raises:
            StoredPlanError: A run reaches past its asset's partitions in `graph` (the record's
                runs and plan disagree); nothing was written.
        """
        runs = {}
        for asset, value in stored.items():
            key = dg.AssetKey.from_user_string(asset)
            asset_slice = graph.slices.get(key)
            if asset_slice is None:
                continue
            if isinstance(value, list):  # keys listed (format 3 or earlier)
                runs[key] = index_runs(asset_slice.index_of[p] for p in value if p in asset_slice.index_of)
            else:
                runs[key] = (unpacked_indexes(value["starts"]), unpacked_indexes(value["stops"]))
                if len(runs[key][1]) and runs[key][1][-1] > len(asset_slice):
                    raise StoredPlanError(
                        f"backfill {backfill_id}'s record holds --catch-up partitions of {asset} up to index "
                        f"{runs[key][1][-1] - 1}, past the {len(asset_slice)} of its stored plan: it is not as "
                        f"partition_assets wrote it. Discard it (`partition-assets backfill discard {backfill_id}`). "
                        "Nothing was written."
                    )
        return cls(graph, runs)

    @classmethod
    def _from_iterable(cls, iterable: Iterable[_T]) -> set[_T]:
        """What a set operation (`|`, `&`, `-`) returns: a plain set of the nodes."""
        return set(iterable)

    def __contains__(self, node: object) -> bool:
        if not isinstance(node, Node) or node.asset not in self._runs:
            return False
        index = self._graph.slices[node.asset].index_of.get(node.partition)
        if index is None:
            return False
        starts, stops = self._runs[node.asset]
        run = bisect.bisect_right(starts, index) - 1
        return run >= 0 and index < stops[run]

    def __iter__(self) -> Iterator[Node]:
        for asset, (starts, stops) in self._runs.items():
            keys = self._graph.slices[asset].partition_keys
            for start, stop in zip(starts, stops, strict=True):
                yield from (Node(asset, key) for key in keys[start:stop])

    def __len__(self) -> int:
        return self._length

    def count(self, asset: dg.AssetKey) -> int:
        """How many of `asset`'s partitions it holds."""
        starts, stops = self._runs.get(asset, ([], []))
        return sum(stop - start for start, stop in zip(starts, stops, strict=True))
