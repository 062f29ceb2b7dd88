"""Which partition keys of each selected asset a backfill covers.

A time-partitioned asset takes the keys of the range (windows.py); a static one all
its keys, or those the spec's static filter names; a multi-partitioned one every
combination of its dimensions' keys; a dynamic one every key it has now; an
unpartitioned one the single key UNPARTITIONED. With explicit keys, each selected
asset takes exactly those that are its own. Keys come in partition order.

Errors are BackfillPlanErrors naming the spec's fields as the caller's surface does
(`Wording`), raised before anything is planned.

Not guaranteed: a dynamic definition's keys are those `dynamic_partitions_store` holds
when the plan is made.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import dagster as dg

from partition_assets.backfill.planning.spec import TimeRange, Wording
from partition_assets.backfill.planning.windows import WindowCache
from partition_assets.errors import BackfillPlanError

if TYPE_CHECKING:  # Dagster's internal types, for annotations only
    from partition_assets.dagster_internals import (
        BaseAssetGraph,
        DynamicPartitionsStore,
        PartitionDimensionDefinition,
    )

# The partition key of an unpartitioned asset's one node.
UNPARTITIONED = ""


def keys_of(
    key: dg.AssetKey,
    partitions_def: dg.PartitionsDefinition | None,
    time_range: TimeRange | None,
    static_keys: Mapping[str, Sequence[str]],
    dynamic_partitions_store: DynamicPartitionsStore | None,
    windows: WindowCache,
    wording: Wording,
) -> list[str]:
    """The keys of asset `key` the range and the static filter cover."""
    if partitions_def is None:
        return [UNPARTITIONED]
    if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        if time_range is None:
            raise BackfillPlanError(
                f"asset {key.to_user_string()} is time-partitioned: give a start and an end "
                f"({wording('start')}, {wording('end')}: inclusive ISO dates or times)"
            )
        return windows.time_keys(partitions_def, time_range)
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        per_dimension = [
            _dimension_keys(key, d, time_range, static_keys, dynamic_partitions_store, windows, wording)
            for d in partitions_def.partitions_defs
        ]
        names = [d.name for d in partitions_def.partitions_defs]
        return [
            dg.MultiPartitionKey(dict(zip(names, combo, strict=True))) for combo in itertools.product(*per_dimension)
        ]
    if isinstance(partitions_def, dg.StaticPartitionsDefinition):
        name = key.to_user_string()
        return _static_keys(name, partitions_def, static_keys.get(name), wording)
    return list(partitions_def.get_partition_keys(dynamic_partitions_store=dynamic_partitions_store))


def _dimension_keys(
    key: dg.AssetKey,
    dimension: PartitionDimensionDefinition,
    time_range: TimeRange | None,
    static_keys: Mapping[str, Sequence[str]],
    dynamic_partitions_store: DynamicPartitionsStore | None,
    windows: WindowCache,
    wording: Wording,
) -> list[str]:
    if isinstance(dimension.partitions_def, dg.StaticPartitionsDefinition):
        return _static_keys(dimension.name, dimension.partitions_def, static_keys.get(dimension.name), wording)
    return keys_of(key, dimension.partitions_def, time_range, {}, dynamic_partitions_store, windows, wording)


def _static_keys(
    dimension: str, partitions_def: dg.StaticPartitionsDefinition, chosen: Sequence[str] | None, wording: Wording
) -> list[str]:
    every = list(partitions_def.get_partition_keys())
    if chosen is None:
        return every
    unknown = sorted(set(chosen) - set(every))
    if unknown:
        raise BackfillPlanError(f"{wording('static')} {dimension}: keys {unknown} do not exist; choose among {every}")
    return [k for k in every if k in set(chosen)]


def explicit_keys_of(
    asset_graph: BaseAssetGraph,
    order: list[dg.AssetKey],
    selected: set[dg.AssetKey],
    keys: Sequence[str],
    store: DynamicPartitionsStore | None,
    wording: Wording,
) -> dict[dg.AssetKey, list[str]]:
    """Each selected asset's share of `keys` (those that are its partition keys), in partition order."""
    found: dict[dg.AssetKey, list[str]] = {}
    partition_order = PartitionOrder(store)
    asked = set(keys)
    # Assets sharing a definition share its keys: listed once (2,000 daily assets, one definition).
    every: dict[dg.PartitionsDefinition, frozenset[str]] = {}
    for key in order:
        if key not in selected:
            continue
        partitions_def = asset_graph.get(key).partitions_def
        if partitions_def is None:
            found[key] = [UNPARTITIONED]
            continue
        if partitions_def not in every:
            every[partitions_def] = frozenset(partitions_def.get_partition_keys(dynamic_partitions_store=store))
        found[key] = partition_order.sorted(partitions_def, asked & every[partitions_def])
    unused = [k for k in keys if not any(k in asset_keys for asset_keys in found.values())]
    if unused:
        examples = {
            key.to_user_string(): _first_key(asset_graph.get(key).partitions_def, store)
            for key in found
            if asset_graph.get(key).partitions_def is not None
        }
        # The command line splits --keys on commas; its --key takes a key whole.
        whole = " (--key KEY names a key holding ',' whole)" if wording("keys").startswith("--") else ""
        raise BackfillPlanError(
            f"{wording('keys')} {unused[:5]} {'is' if len(unused) == 1 else 'are'} no partition of any selected "
            f"asset; keys look like {examples}. Fix the keys or the selection{whole}; nothing was launched"
        )
    return found


def _first_key(partitions_def: dg.PartitionsDefinition | None, store: DynamicPartitionsStore | None) -> str | None:
    if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        return partitions_def.get_first_partition_key()
    keys = partitions_def.get_partition_keys(dynamic_partitions_store=store) if partitions_def else []
    return keys[0] if keys else None


class PartitionOrder:
    """Sorts keys in their definition's order (sorted for an unpartitioned asset), leaving out
    keys the definition does not hold. Time partitions are sorted by their start rather than
    by listing the definition (a year of hours is 8,760 keys, listed by cron arithmetic);
    each time key is parsed, and each other definition listed, once per `PartitionOrder`:
    a plan keeps one, as its assets share definitions and keys."""

    def __init__(self, store: DynamicPartitionsStore | None) -> None:
        self._store = store
        # Per definition (hashing one costs microseconds: once per call), each key's window start.
        self._starts: dict[dg.TimeWindowPartitionsDefinition, dict[str, datetime | None]] = {}
        self._positions: dict[dg.PartitionsDefinition, dict[str, int]] = {}

    def sorted(self, partitions_def: dg.PartitionsDefinition | None, keys: Iterable[str]) -> list[str]:
        if partitions_def is None:
            return sorted(keys)
        if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
            known = self._starts.setdefault(partitions_def, {})
            starts = {key: start for key in keys if (start := self._start(partitions_def, known, key)) is not None}
            return sorted(starts, key=starts.__getitem__)
        if partitions_def not in self._positions:
            listed = partitions_def.get_partition_keys(dynamic_partitions_store=self._store)
            self._positions[partitions_def] = {key: index for index, key in enumerate(listed)}
        positions = self._positions[partitions_def]
        return sorted((key for key in keys if key in positions), key=positions.__getitem__)

    @staticmethod
    def _start(
        partitions_def: dg.TimeWindowPartitionsDefinition, known: dict[str, datetime | None], key: str
    ) -> datetime | None:
        """The start of `key`'s window (remembered in `known`); None when it lies outside the
        definition's partitions."""
        if key not in known:
            first, last = partitions_def.get_first_partition_window(), partitions_def.get_last_partition_window()
            start = partitions_def.time_window_for_partition_key(key).start
            inside = first is not None and last is not None and first.start <= start <= last.start
            known[key] = start if inside else None
        return known[key]
