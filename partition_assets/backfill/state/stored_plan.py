"""A backfill's plan as its record stores it (`BackfillRecord.stored_plan`), as Dagster's
`AssetBackfillData` stores its target subset: the planner runs when a backfill starts or is
extended, and every later command (status, resume, retry, publish, approve, discard, rollback,
diff, ledger, a coordinator run re-executed) rebuilds its graph from the record, with no plan
and no git: what a command does never depends on the repository's state when it runs.

The stored form (`stored_plan`), per asset in topological order:
- its partition keys: for a time-partitioned asset, runs of consecutive partitions as
  `[first, last, count]` (Dagster lists the keys between again: `get_partition_keys_in_range`);
  for any other (static, dynamic, multi, unpartitioned), the keys themselves (compressed);
- how many partitions one run may cover and where a run may not span (`max_batch`, `breaks`);
- its edges to each upstream asset in the backfill, as the plan computed them: index arrays
  (contiguous `starts`/`stops`, or `explicit` lists), each delta-encoded, zlib-compressed and
  base64-encoded, so no partition mapping is evaluated again.
A 365-day backfill of the example's 17 assets (15,051 nodes, 34,231 edges) stores in 11.5 kB of
JSON (its keys alone, listed, take 283 kB); it is rebuilt in 0.11 CPU-s, where planning it takes 1.0.

A record written before plans were stored holds none: the first command that reads it plans it
once, as earlier releases did for every command, and stores the result by compare-and-set
(`BackfillStore.store_plan`); every command after reads it.

Not guaranteed: the graph's partitions definitions are the code location's as loaded now (a
stored range its definition no longer lists as `count` keys is refused, StoredPlanError); why
the instance's history picked each node (`BackfillGraph.reasons`) is not stored: a rebuilt
graph has none.
"""

from __future__ import annotations

import base64
import itertools
import json
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import dagster as dg
import numpy as np

from partition_assets.backfill.planning.edges import Dependency
from partition_assets.backfill.planning.graph import AssetSlice, BackfillGraph
from partition_assets.backfill.planning.instance_state import graph_of
from partition_assets.backfill.planning.windows import WindowCache, keys_in_window
from partition_assets.code_location import load_definitions
from partition_assets.errors import StoredPlanError
from partition_assets.state_formats import FORMAT_FIELD, STORED_PLAN_FORMAT, checked_format

if TYPE_CHECKING:
    from partition_assets.backfill.state.record import BackfillRecord
    from partition_assets.dagster_internals import BaseAssetGraph


def stored_plan(graph: BackfillGraph) -> dict[str, Any]:
    """`graph` as a record stores it (see the module docstring)."""
    windows = WindowCache(0)
    return {
        FORMAT_FIELD: STORED_PLAN_FORMAT,
        "assets": [
            {
                "asset": key.to_user_string(),
                "keys": _stored_keys(asset_slice, windows),
                "max_batch": asset_slice.max_batch,
                "breaks": sorted(asset_slice.breaks),
                "upstream": [_stored_dependency(dependency) for dependency in graph.dependencies[key]],
            }
            for key, asset_slice in graph.slices.items()
        ],
    }


def graph_from(backfill_id: str, stored: dict[str, Any], asset_graph: BaseAssetGraph) -> BackfillGraph:
    """The graph `stored_plan` stored, with the partitions definitions of `asset_graph` (the
    code location's); no partition mapping is evaluated.

    Raises:
        StateFormatError: The plan is in a newer release's format; nothing was written.
        StoredPlanError: The plan names an asset the code location no longer defines, or a range its
            partitions definition no longer lists as stored; nothing was written.
    """
    checked_format(stored, STORED_PLAN_FORMAT, f"the stored plan of backfill {backfill_id}")
    slices: dict[dg.AssetKey, AssetSlice] = {}
    for entry in stored["assets"]:
        key = dg.AssetKey.from_user_string(entry["asset"])
        if not asset_graph.has(key):
            raise StoredPlanError(
                f"backfill {backfill_id}'s stored plan names asset {entry['asset']}, which its code location no "
                "longer defines: restore the asset to finish it, or discard it (`partition-assets backfill discard "
                f"{backfill_id}`). Nothing was written."
            )
        partitions_def = asset_graph.get(key).partitions_def
        keys = _keys_from(backfill_id, entry["asset"], entry["keys"], partitions_def)
        slices[key] = AssetSlice(key, partitions_def, keys, entry["max_batch"], frozenset(entry["breaks"]))
    dependencies = {
        dg.AssetKey.from_user_string(entry["asset"]): [
            _dependency_from(dg.AssetKey.from_user_string(entry["asset"]), stored_dependency)
            for stored_dependency in entry["upstream"]
        ]
        for entry in stored["assets"]
    }
    return BackfillGraph(slices, dependencies)


def recorded_graph(record: BackfillRecord, instance: dg.DagsterInstance) -> BackfillGraph:
    """The graph of `record`'s backfill, from its stored plan. A record of an earlier release
    (none stored) is planned once, as that release planned it, and its plan stored
    (`BackfillStore.store_plan`: the plan another process stored first wins).

    Raises:
        StoredPlanError: The stored plan cannot be rebuilt against the code location (`graph_from`).
        PartitionAssetsError: A record with no stored plan whose spec the planner refuses now.
    """
    if record.stored_plan is None:
        record.store.store_plan(record, stored_plan(graph_of(record.spec, instance)))
    assert record.stored_plan is not None  # store_plan set it
    asset_graph = load_definitions(record.spec.module).resolve_asset_graph()
    return graph_from(record.id, record.stored_plan, asset_graph)


def _stored_keys(asset_slice: AssetSlice, windows: WindowCache) -> dict[str, Any]:
    """`{"ranges": [[first, last, count], ...]}` for time partitions, else `{"keys": ...}` (the
    JSON list of keys, compressed)."""
    partitions_def = asset_slice.partitions_def
    keys = asset_slice.partition_keys
    if not isinstance(partitions_def, dg.TimeWindowPartitionsDefinition) or not keys:
        return {"keys": _compressed(json.dumps(keys))}
    # A run of keys ends where the next key is not the next partition (windows.gaps: an excluded
    # day holds no partition, so Friday and Monday are neighbours).
    cuts = [0, *sorted(windows.gaps(partitions_def, keys)), len(keys)]
    return {"ranges": [[keys[start], keys[stop - 1], stop - start] for start, stop in itertools.pairwise(cuts)]}


def _keys_from(
    backfill_id: str, asset: str, stored: dict[str, Any], partitions_def: dg.PartitionsDefinition | None
) -> list[str]:
    if "keys" in stored:
        return json.loads(_decompressed(stored["keys"]))
    keys: list[str] = []
    for first, last, count in stored["ranges"]:
        listed = _keys_between(partitions_def, first, last)
        if len(listed) != count:
            raise StoredPlanError(
                f"backfill {backfill_id}'s stored plan holds {count} partitions of {asset} from {first} to {last}; "
                f"its code location's partitions definition now lists {len(listed)}: its partitions changed since "
                f"the backfill started. Restore them to finish it, or discard it (`partition-assets backfill "
                f"discard {backfill_id}`). Nothing was written."
            )
        keys += listed
    return keys


def _keys_between(partitions_def: dg.PartitionsDefinition | None, first: str, last: str) -> list[str]:
    """The keys from `first` to `last` of a time partitions definition (`keys_in_window`: for an
    even schedule, computed rather than listed window by window); none when it is no time
    definition, or no longer holds that range (the caller then names the change)."""
    if not isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        return []
    start, end = partitions_def.start_time_for_partition_key(first), partitions_def.end_time_for_partition_key(last)
    if start.timestamp() < partitions_def.start_timestamp or (
        partitions_def.end_timestamp is not None and end.timestamp() > partitions_def.end_timestamp
    ):
        return []
    return keys_in_window(partitions_def, dg.TimeWindow(start, end))


def _stored_dependency(dependency: Dependency) -> dict[str, Any]:
    stored: dict[str, Any] = {"upstream": dependency.upstream.to_user_string()}
    if dependency.explicit is not None:
        stored["lengths"] = packed_indexes([len(indexes) for indexes in dependency.explicit])
        stored["explicit"] = packed_indexes(np.concatenate([*dependency.explicit, np.zeros(0, dtype=np.int64)]))
    else:
        stored["starts"] = packed_indexes(dependency.starts)
        stored["stops"] = packed_indexes(dependency.stops)
    return stored


def _dependency_from(downstream: dg.AssetKey, stored: dict[str, Any]) -> Dependency:
    upstream = dg.AssetKey.from_user_string(stored["upstream"])
    if "explicit" in stored:
        flat = unpacked_indexes(stored["explicit"])
        bounds = np.cumsum([0, *unpacked_indexes(stored["lengths"])])
        explicit = [flat[start:stop] for start, stop in itertools.pairwise(bounds)]
        return Dependency(downstream, upstream, explicit=explicit)
    return Dependency(
        downstream, upstream, starts=unpacked_indexes(stored["starts"]), stops=unpacked_indexes(stored["stops"])
    )


def packed_indexes(values: Sequence[int] | np.ndarray | None) -> str:
    """Integers, delta-encoded (runs of indexes become runs of ones), zlib-compressed, base64."""
    array = np.asarray(values if values is not None else [], dtype=np.int64)
    deltas = np.diff(array, prepend=0) if len(array) else array
    return _compressed(deltas.astype("<i8").tobytes())


def unpacked_indexes(text: str) -> np.ndarray:
    return np.cumsum(np.frombuffer(_decompressed(text), dtype="<i8")).astype(np.int64)


def _compressed(data: str | bytes) -> str:
    return base64.b64encode(zlib.compress(data.encode() if isinstance(data, str) else data, 9)).decode("ascii")


def _decompressed(text: str) -> bytes:
    return zlib.decompress(base64.b64decode(text))
