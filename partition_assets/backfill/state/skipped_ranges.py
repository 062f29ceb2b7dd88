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

Readers take the runs as they are (`SkippedNodes`, a planning/node_runs.py `NodeRuns`):
membership, counts per asset and in all from the runs' lengths, no object per partition; only a
caller that iterates gets the nodes.

Not guaranteed: listed keys (format 3) that the backfill's graph no longer holds are left out,
as earlier releases left them out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import dagster as dg

from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.planning.node_runs import NodeRuns, index_runs
from partition_assets.backfill.state.stored_plan import packed_indexes, unpacked_indexes
from partition_assets.errors import StoredPlanError

# A record's `skipped` as stored: asset -> its runs, or (format 3 and earlier) its keys listed.
StoredSkipped = dict[str, dict[str, str] | list[str]]


def stored_skipped(graph: BackfillGraph, nodes: Iterable[Node]) -> StoredSkipped:
    """`nodes` (of `graph`) as a record stores them: asset -> its runs of consecutive indexes
    into the asset's partitions in `graph` (see the module docstring); assets without any are
    absent. Runs already (`NodeRuns` of `graph`, what the planner hands) are stored as they are."""
    if not isinstance(nodes, NodeRuns) or nodes.graph is not graph:
        indexes: dict[dg.AssetKey, list[int]] = {}
        for node in nodes:
            indexes.setdefault(node.asset, []).append(graph.slices[node.asset].index_of[node.partition])
        nodes = NodeRuns(graph, {asset: index_runs(of_asset) for asset, of_asset in indexes.items()})
    stored: StoredSkipped = {}
    for asset in graph.slices:  # the graph's order, so equal sets store equal
        starts, stops = nodes.runs(asset)
        if starts:
            stored[asset.to_user_string()] = {"starts": packed_indexes(starts), "stops": packed_indexes(stops)}
    return stored


class SkippedNodes(NodeRuns):
    """The nodes of a graph a record's `skipped` names, as the runs it stores (`NodeRuns`)."""

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
