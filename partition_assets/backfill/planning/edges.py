"""The edges between two assets' partitions in a backfill, as index arrays.

A time-window mapping between time partitions is computed with interval arithmetic
over window boundaries (the same rules as Dagster's TimeWindowPartitionMapping): one
(start, stop) pair of upstream indexes per downstream partition it has not seen before in the plan. An identity mapping
between equal definitions is a lookup. Every other mapping goes through Dagster's own
mapping, key by key, into explicit index lists (each distinct question asked once per plan:
mapping_memo.py).

Definitions with exclusions (windows that are not contiguous) take the same arithmetic when
both sides share one schedule, and Dagster's own mapping otherwise.

Not guaranteed: an edge to a partition outside the backfill is dropped (the graph holds
only the backfill's nodes); a custom PartitionMapping costs one Dagster call per
downstream partition it has not seen before in the plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import dagster as dg
import numpy as np

from partition_assets.backfill.planning.windows import WindowCache, full_window

if TYPE_CHECKING:
    from partition_assets.backfill.planning.graph import AssetSlice
    from partition_assets.backfill.planning.mapping_memo import MappingMemo


@dataclass
class Dependency:
    """Edges from each partition of `downstream` to partitions of `upstream`.

    Contiguous: upstream indexes `starts[i] <= j < stops[i]` for downstream index i
    (time-window mappings). Otherwise `explicit[i]` lists them.
    """

    downstream: dg.AssetKey
    upstream: dg.AssetKey
    starts: np.ndarray | None = None
    stops: np.ndarray | None = None
    explicit: list[np.ndarray] | None = None

    def upstream_indexes(self, downstream_index: int) -> np.ndarray:
        if self.explicit is not None:
            return self.explicit[downstream_index]
        assert self.starts is not None and self.stops is not None  # contiguous when not explicit
        return np.arange(self.starts[downstream_index], self.stops[downstream_index])

    def edge_count(self) -> int:
        if self.explicit is not None:
            return sum(len(indexes) for indexes in self.explicit)
        assert self.starts is not None and self.stops is not None  # contiguous when not explicit
        return int(np.maximum(self.stops - self.starts, 0).sum())


def edges_between(
    downstream: AssetSlice,
    upstream: AssetSlice,
    mapping: dg.PartitionMapping,
    windows: WindowCache,
    memo: MappingMemo,
) -> Dependency:
    """The edges `mapping` draws from `downstream`'s partitions to `upstream`'s."""
    if (
        isinstance(mapping, dg.TimeWindowPartitionMapping)
        and isinstance(downstream.partitions_def, dg.TimeWindowPartitionsDefinition)
        and isinstance(upstream.partitions_def, dg.TimeWindowPartitionsDefinition)
        and _aligned_or_contiguous(downstream.partitions_def, upstream.partitions_def)
    ):
        return _time_window_dependency(downstream, upstream, mapping, windows)
    if isinstance(mapping, dg.IdentityPartitionMapping) and downstream.partitions_def == upstream.partitions_def:
        found = np.array([upstream.index_of.get(k, -1) for k in downstream.partition_keys], dtype=np.int64)
        starts = np.where(found >= 0, found, 0)
        return Dependency(downstream.key, upstream.key, starts=starts, stops=np.where(found >= 0, found + 1, 0))
    explicit = []
    for key in downstream.partition_keys:
        explicit.append(
            np.array(
                sorted(
                    upstream.index_of[k]
                    for k in memo.upstream_keys(mapping, downstream.partitions_def, key, upstream.partitions_def)
                    if k in upstream.index_of
                ),
                dtype=np.int64,
            )
        )
    return Dependency(downstream.key, upstream.key, explicit=explicit)


def _time_window_dependency(
    downstream: AssetSlice,
    upstream: AssetSlice,
    mapping: dg.TimeWindowPartitionMapping,
    windows: WindowCache,
) -> Dependency:
    count = len(downstream)
    if count == 0 or len(upstream) == 0:
        empty = np.zeros(count, dtype=np.int64)
        return Dependency(downstream.key, upstream.key, starts=empty, stops=empty.copy())
    # Both are time-partitioned (the caller checked).
    downstream_def = cast(dg.TimeWindowPartitionsDefinition, downstream.partitions_def)
    upstream_def = cast(dg.TimeWindowPartitionsDefinition, upstream.partitions_def)
    # Dagster shifts the downstream window by whole downstream periods, then takes the
    # upstream partitions holding its start (start-closed) and its end (end-closed).
    # It steps a start back to earlier windows' starts or on to later windows' ends, and an
    # end likewise (mapping/time_window.py, `_offsetted_datetime`): the same windows when
    # they are contiguous; with exclusions, the shifted window also spans the excluded days
    # between them.
    d_starts, d_ends, positions = windows.padded(downstream_def, downstream.partition_keys)
    start_offset, end_offset = mapping.start_offset, mapping.end_offset
    shifted_start = d_ends[positions + start_offset - 1] if start_offset > 0 else d_starts[positions + start_offset]
    shifted_end = d_starts[positions + end_offset + 1] if end_offset < 0 else d_ends[positions + end_offset]
    u_starts, u_ends = windows.bounds(upstream_def, upstream.partition_keys)
    full = full_window(upstream_def)
    if full is not None:  # offsets never push past the upstream's own partitions
        if mapping.start_offset < 0:
            shifted_start = np.maximum(shifted_start, full[0])
        if mapping.end_offset > 0:
            shifted_end = np.minimum(shifted_end, full[1])
    # The upstream partitions overlapping [shifted_start, shifted_end): those ending after
    # its start and starting before its end (the slice's keys may skip windows).
    starts = np.searchsorted(u_ends, shifted_start, side="right")
    stops = np.searchsorted(u_starts, shifted_end, side="left")
    starts = np.clip(starts, 0, len(upstream))
    stops = np.clip(stops, 0, len(upstream))
    outside = (shifted_end <= u_starts[0]) | (shifted_start >= u_ends[-1]) | (shifted_start >= shifted_end)
    stops = np.where(outside, starts, stops)
    return Dependency(downstream.key, upstream.key, starts=starts, stops=stops)


def _aligned_or_contiguous(
    downstream_def: dg.TimeWindowPartitionsDefinition, upstream_def: dg.TimeWindowPartitionsDefinition
) -> bool:
    """Whether the window arithmetic gives Dagster's answer: unless the schedules differ and one
    has exclusions. Then Dagster aligns a time that falls on an excluded day to the window
    before it, which overlaps nothing; Dagster's own mapping answers instead."""
    return downstream_def.cron_schedule == upstream_def.cron_schedule or not (
        downstream_def.exclusions or upstream_def.exclusions
    )
