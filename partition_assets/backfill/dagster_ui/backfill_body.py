"""A Dagster backfill's stored body (the JSON of its `PartitionBackfill`), serialized asset by
asset, so that writing it again after some assets progressed serializes only those.

Dagster stores a backfill as one JSON text whose size grows with its assets: its target and
its requested, materialized and failed partitions, each an `AssetGraphSubset` holding one
`PartitionsSubset` per asset (a time-window subset also carries its partitions definition).
Serializing all of it takes seconds at thousands of assets (bench/results/scale.md).
`BackfillBody` keeps each asset's subset of each of those four fields as its serialized
JSON fragment, redone only when `replace` changes it (and not even then for a subset object
serialized for another asset: conversion.py hands equal keys out as one object), and
`text` splices the fragments
(and the record's list of assets, serialized once) into the rest of the record, serialized
anew each time (small: no subset and no list of assets in it).

Contract: `deserialize_value(body.text(backfill), PartitionBackfill)` equals `backfill`
with its four subsets as `BackfillBody` holds them (its `asset_backfill_data` form, the
one Dagster writes today); partition_assets_tests/unit/test_backfill_body.py checks it with time-window,
multi-dimension, static and unpartitioned assets.

Not guaranteed: the text equals `serialize_value`'s character for character (the order of
the subsets' items differs); the splicing relies on how Dagster's serdes packs an
`AssetGraphSubset` (a `__mapping_items__` list), pinned in
partition_assets_tests/integration/test_dagster_internals.py.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import dagster as dg

from partition_assets.dagster_internals import AssetGraphSubset, PartitionBackfill, PartitionsSubset, pack_value

# The AssetBackfillData fields holding partitions, each an AssetGraphSubset.
TARGET, REQUESTED, MATERIALIZED, FAILED = (
    "target_subset",
    "requested_subset",
    "materialized_subset",
    "failed_and_downstream_subset",
)
SUBSET_FIELDS = (TARGET, REQUESTED, MATERIALIZED, FAILED)
_ITEMS = "__mapping_items__"  # how Dagster's serdes packs a mapping keyed by AssetKey
_SELECTION = "asset_selection"  # the PartitionBackfill field listing every asset of the target
_REMEMBERED_SUBSETS = 4096  # serialized subsets kept for reuse (conversion.py keeps as many objects)


class BackfillBody:
    """The four subsets of one asset backfill, each asset's kept serialized; `text` is the
    whole body. `serialized_subsets` counts the per-asset subsets serialized so far (what a
    write costs: tests count it)."""

    def __init__(self, backfill: PartitionBackfill) -> None:
        """Starts from `backfill`'s subsets (it must hold `asset_backfill_data`)."""
        data = backfill.asset_backfill_data
        if data is None:
            raise ValueError(f"backfill {backfill.backfill_id} holds no asset backfill data")
        self.serialized_subsets = 0
        # A marker no tag or description of the record holds, where each field's items go.
        self._marker = f"partition-assets:{uuid.uuid4().hex}:"
        self._fragments: dict[str, dict[dg.AssetKey, str]] = {field: {} for field in SUBSET_FIELDS}
        self._unpartitioned: dict[str, frozenset[dg.AssetKey]] = {}
        self._selection: Sequence[dg.AssetKey] | None = None
        self._key_json: dict[dg.AssetKey, str] = {}
        self._subset_json: dict[int, tuple[PartitionsSubset, str]] = {}
        self._selection_json = "null"
        for field in SUBSET_FIELDS:
            subset: AssetGraphSubset = getattr(data, field)
            self.replace(field, subset.partitions_subsets_by_asset_key)
            self._unpartitioned[field] = frozenset(subset.non_partitioned_asset_keys)

    def replace(self, field: str, subsets: Mapping[dg.AssetKey, PartitionsSubset]) -> None:
        """The subsets of `field` of these assets become `subsets` (serialized now)."""
        fragments = self._fragments[field]
        for key, subset in subsets.items():
            fragments[key] = self._serialized(key, subset)

    def replace_unpartitioned(self, field: str, keys: Iterable[dg.AssetKey]) -> None:
        """The unpartitioned assets of `field` become `keys` (a few: serialized with the record)."""
        self._unpartitioned[field] = frozenset(keys)

    def text(self, backfill: PartitionBackfill) -> str:
        """`backfill`'s serialized body, its four subsets those held here."""
        data = backfill.asset_backfill_data
        if data is None:
            raise ValueError(f"backfill {backfill.backfill_id} holds no asset backfill data")
        if backfill.asset_selection != self._selection:  # a list of every asset: serialized once
            self._selection = backfill.asset_selection
            self._selection_json = json.dumps(pack_value(self._selection))
        skeleton = data._replace(
            target_subset=self._unpartitioned_only(TARGET),
            requested_subset=self._unpartitioned_only(REQUESTED),
            materialized_subset=self._unpartitioned_only(MATERIALIZED),
            failed_and_downstream_subset=self._unpartitioned_only(FAILED),
        )
        packed: Any = pack_value(
            backfill._replace(asset_selection=None, asset_backfill_data=skeleton, serialized_asset_backfill_data=None)
        )
        packed[_SELECTION] = self._marker + _SELECTION
        for field in SUBSET_FIELDS:
            packed["asset_backfill_data"][field]["partitions_subsets_by_asset_key"][_ITEMS] = self._marker + field
        pieces = re.split(f'"{re.escape(self._marker)}([a-z_]+)"', json.dumps(packed))
        # pieces: text, name, text, name, ..., text
        for index in range(1, len(pieces), 2):
            name = pieces[index]
            pieces[index] = self._selection_json if name == _SELECTION else self._items(name)
        return "".join(pieces)

    def _items(self, field: str) -> str:
        """The JSON list of `field`'s partitioned assets and their subsets."""
        return "[" + ",".join(self._fragments[field].values()) + "]"

    def _unpartitioned_only(self, field: str) -> AssetGraphSubset:
        unpartitioned = self._unpartitioned[field]
        return AssetGraphSubset.create_empty_subset()._replace(non_partitioned_asset_keys=unpartitioned)

    def _serialized(self, key: dg.AssetKey, subset: PartitionsSubset) -> str:
        """The JSON of `key`'s item in an AssetGraphSubset, as Dagster's serializer packs it;
        a subset object serialized before (one serving several assets) is not again."""
        if key not in self._key_json or self._subset_json.get(id(subset), (None,))[0] is not subset:
            self.serialized_subsets += 1
            packed: Any = pack_value(
                AssetGraphSubset.create_empty_subset()._replace(partitions_subsets_by_asset_key={key: subset})
            )
            ((packed_key, packed_subset),) = packed["partitions_subsets_by_asset_key"][_ITEMS]
            self._key_json[key] = json.dumps(packed_key)
            if len(self._subset_json) >= _REMEMBERED_SUBSETS:
                self._subset_json.clear()
            # Kept with its subset: the id is not reused while the subset is held here.
            self._subset_json[id(subset)] = (subset, json.dumps(packed_subset))
        return f"[{self._key_json[key]}, {self._subset_json[id(subset)][1]}]"
