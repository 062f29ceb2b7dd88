"""The sparse (asset, partition) graph of a backfill.

Each (asset, partition) node has edges exactly to the upstream nodes its
partition mapping names. Partitions are stored per asset as key lists and edges
per (asset, upstream asset) as index arrays, so ten years of hourly partitions
for twenty assets stay a few arrays, not millions of Python objects. Time-window
mappings between time partitions are computed with interval arithmetic over
window boundaries (the same rules as Dagster's TimeWindowPartitionMapping); every
other mapping goes through Dagster's own mapping, key by key.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import dagster as dg
import numpy as np

from partition_assets.backfill.planning.spec import SELECTION_EXAMPLES, BackfillSpec, TimeRange
from partition_assets.dagster_betas import asset_selection
from partition_assets.errors import BackfillPlanError

if TYPE_CHECKING:  # Dagster's internal types, for annotations only
    from partition_assets.dagster_internals import (
        BaseAssetGraph,
        BaseAssetNode,
        DynamicPartitionsStore,
        PartitionDimensionDefinition,
    )

UNPARTITIONED = ""


@dataclass(frozen=True, order=True)
class Node:
    """One (asset, partition) of a backfill; partition is "" for an unpartitioned asset."""

    asset: dg.AssetKey
    partition: str


@dataclass
class AssetSlice:
    """The partitions of one asset that a backfill covers, in partition order."""

    key: dg.AssetKey
    partitions_def: dg.PartitionsDefinition | None
    partition_keys: list[str]
    max_batch: int = 1  # contiguous partitions one run may cover (from the backfill policy)
    # Indexes i whose partition may not share a run with partition i - 1: a gap between
    # their windows (explicit keys), or different pinned inputs.
    breaks: frozenset[int] = frozenset()
    index_of: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.index_of = {key: index for index, key in enumerate(self.partition_keys)}

    def __len__(self) -> int:
        return len(self.partition_keys)


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


@dataclass
class BackfillGraph:
    slices: dict[dg.AssetKey, AssetSlice]
    dependencies: dict[dg.AssetKey, list[Dependency]]  # by downstream asset, in topological order

    @property
    def assets(self) -> list[dg.AssetKey]:
        return list(self.slices)

    def node_count(self) -> int:
        return sum(len(s) for s in self.slices.values())

    def edge_count(self) -> int:
        return sum(d.edge_count() for deps in self.dependencies.values() for d in deps)

    def nodes(self) -> Iterator[Node]:
        for asset_slice in self.slices.values():
            for key in asset_slice.partition_keys:
                yield Node(asset_slice.key, key)

    def upstream(self, node: Node) -> list[Node]:
        index = self.slices[node.asset].index_of[node.partition]
        found: list[Node] = []
        for dependency in self.dependencies[node.asset]:
            keys = self.slices[dependency.upstream].partition_keys
            found.extend(Node(dependency.upstream, keys[j]) for j in dependency.upstream_indexes(index))
        return found


def plan(
    asset_graph: BaseAssetGraph, spec: BackfillSpec, dynamic_partitions_store: DynamicPartitionsStore | None = None
) -> BackfillGraph:
    """The backfill graph of `spec` against a code location's asset graph.

    Raises BackfillPlanError, naming the fix, when the selection is invalid or
    matches no asset, a static filter names no static dimension of the selection,
    an asset limit names an asset outside the backfill, or the spec plans no node
    at all (the range lies outside the partitions, a dynamic definition has no keys).
    """
    selected = resolve_selection(asset_graph, spec.selection)
    _check_static_filters(asset_graph, selected, spec.static)
    graph = build_graph(
        asset_graph,
        selected,
        spec.time_range(),
        spec.static,
        dynamic_partitions_store,
        lookback=spec.lookback,
        exact=spec.exact,
        downstream=spec.downstream,
        explicit_keys=spec.keys,
    )
    in_backfill = [key.to_user_string() for key in graph.slices]
    unknown = sorted(set(spec.asset_limits) - set(in_backfill))
    if unknown:
        raise BackfillPlanError(f"asset limits name assets outside the backfill: {unknown}; it holds {in_backfill}")
    if graph.node_count() == 0:
        reasons = [_why_empty(key.to_user_string(), asset_graph.get(key).partitions_def, spec) for key in graph.slices]
        raise BackfillPlanError(f"{spec.describe()} plans no partition: " + "; ".join(reasons))
    return graph


def resolve_selection(asset_graph: BaseAssetGraph, selection: str) -> set[dg.AssetKey]:
    """The asset keys of a Dagster selection string; an error naming close names when it
    is invalid or matches nothing."""
    try:
        keys = asset_selection(selection).resolve(asset_graph)
    except dg.DagsterError as error:
        raise BackfillPlanError(
            f"selection {selection!r} is not valid ({error}); use Dagster's selection syntax, {SELECTION_EXAMPLES}"
        ) from None
    if keys:
        return set(keys)
    names = sorted(key.to_user_string() for key in asset_graph.get_all_asset_keys())
    groups = sorted({asset_graph.get(key).group_name for key in asset_graph.get_all_asset_keys()} - {None})
    words = set(re.findall(r"[\w/.-]+", selection)) - {"key", "group", "tag", "owner", "kind", "and", "or", "not"}
    close = sorted({match for word in words for match in difflib.get_close_matches(word, names + groups, n=3)})
    hint = f"close names: {close}" if close else f"its assets: {names[:12]}{' …' if len(names) > 12 else ''}"
    raise BackfillPlanError(f"selection {selection!r} matches no asset of the code location; {hint}")


def _static_dimensions(key: dg.AssetKey, partitions_def: dg.PartitionsDefinition | None) -> list[str]:
    if isinstance(partitions_def, dg.StaticPartitionsDefinition):
        return [key.to_user_string()]
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        return [
            d.name
            for d in partitions_def.partitions_defs
            if isinstance(d.partitions_def, dg.StaticPartitionsDefinition)
        ]
    return []


def _check_static_filters(
    asset_graph: BaseAssetGraph, selected: set[dg.AssetKey], static_keys: Mapping[str, Sequence[str]]
) -> None:
    known = sorted({d for key in selected for d in _static_dimensions(key, asset_graph.get(key).partitions_def)})
    unknown = sorted(set(static_keys) - set(known))
    if unknown:
        raise BackfillPlanError(
            f"--static names {unknown}, which is no static dimension of the selection; "
            + (f"its static dimensions: {known}" if known else "the selection has no static partitions")
        )


def _why_empty(asset: str, partitions_def: dg.PartitionsDefinition | None, spec: BackfillSpec) -> str:
    """Why `asset` contributes no partition to the plan of `spec`."""
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):  # a static dimension never is empty
        for dimension in partitions_def.partitions_defs:
            if not isinstance(dimension.partitions_def, dg.StaticPartitionsDefinition):
                return _why_empty(f"{asset} (dimension {dimension.name})", dimension.partitions_def, spec)
    if isinstance(partitions_def, dg.DynamicPartitionsDefinition):
        return (
            f"asset {asset}: dynamic partitions {partitions_def.name!r} have no keys yet; add them with "
            f"instance.add_dynamic_partitions({partitions_def.name!r}, [...]), a sensor's "
            "DynamicPartitionsRequest, or the UI (the asset's Partitions tab)"
        )
    if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        first, last = partitions_def.get_first_partition_key(), partitions_def.get_last_partition_key()
        if first is None or last is None:
            return f"asset {asset} has no partitions yet (they start {partitions_def.start})"
        if spec.exact:
            return (
                f"no partition of asset {asset} lies wholly inside {spec.start}..{spec.end} (--exact); "
                "widen the range or drop --exact"
            )
        return (
            f"asset {asset}: its partitions run from {first} to {last}; the range {spec.start}..{spec.end} "
            "lies outside them"
        )
    return f"asset {asset} has no partition in the plan"


def build_graph(
    asset_graph: BaseAssetGraph,
    selection: Iterable[dg.AssetKey],
    time_range: TimeRange | None = None,
    static_keys: Mapping[str, Sequence[str]] | None = None,
    dynamic_partitions_store: DynamicPartitionsStore | None = None,
    lookback: int = 0,
    exact: bool = False,
    downstream: bool = False,
    explicit_keys: Sequence[str] = (),
) -> BackfillGraph:
    """The backfill graph of the `selection` over `time_range`, or of `explicit_keys`.

    A time-partitioned asset contributes every partition whose window overlaps
    the range, whatever its grain, and `lookback` partitions before them (a
    rolling restatement); with `exact`, only the partitions whose window lies
    wholly inside the range. Static dimensions contribute all their keys, or
    those named in `static_keys` (by dimension name, or by asset key string for
    a single-dimension static asset). With `downstream`, every (asset, partition)
    that depends on those, directly or not, joins: the lineage cascade.

    With `explicit_keys`, each selected asset takes exactly those keys that are its own
    partition keys (BackfillPlanError names keys no selected asset has); a run never
    spans a gap between two of them.
    """
    if exact and lookback:
        raise BackfillPlanError("exact and lookback contradict: exact adds no partition outside the range")
    selected = set(selection)
    if downstream:
        selected |= _descendants(asset_graph, selected)
    order = [key for key in asset_graph.toposorted_asset_keys if key in selected]
    mappings_by_edge = _mappings_among(asset_graph, order)
    # One padding for every definition, so that each definition's windows are computed once.
    padding = max(
        [
            abs(o)
            for m in mappings_by_edge.values()
            if isinstance(m, dg.TimeWindowPartitionMapping)
            for o in (m.start_offset, m.end_offset)
        ],
        default=0,
    )
    windows = _WindowCache(padding, lookback, exact)
    if explicit_keys:
        keys_by_asset = _explicit_keys(asset_graph, order, set(selection), explicit_keys, dynamic_partitions_store)
    else:
        keys_by_asset = {
            key: _keys_of(
                key,
                asset_graph.get(key).partitions_def,
                time_range,
                static_keys or {},
                dynamic_partitions_store,
                windows,
            )
            for key in order
            if key in set(selection)
        }
    if downstream:
        keys_by_asset = _cascade(asset_graph, order, keys_by_asset, mappings_by_edge, dynamic_partitions_store)
    slices = {key: _slice(key, asset_graph.get(key), keys_by_asset[key], windows) for key in order}
    dependencies: dict[dg.AssetKey, list[Dependency]] = {key: [] for key in order}
    for (key, parent), mapping in mappings_by_edge.items():
        dependencies[key].append(_dependency(slices[key], slices[parent], mapping, windows, dynamic_partitions_store))
    return BackfillGraph(slices, dependencies)


def impact(
    asset_graph: BaseAssetGraph, graph: BackfillGraph, dynamic_partitions_store: DynamicPartitionsStore | None = None
) -> dict[dg.AssetKey, int]:
    """Assets outside the backfill that read partitions it rewrites, directly or through
    other assets, with how many of their partitions do so; in topological order.

    The same lineage cascade as `--downstream` (a self-dependent asset reading its
    previous partition is reached from the first rewritten one to its last partition),
    started from every partition of the backfill. An unpartitioned asset counts 1.
    """
    selected = set(graph.slices)
    outside = _descendants(asset_graph, selected) - selected
    if not outside:
        return {}
    order = [key for key in asset_graph.toposorted_asset_keys if key in selected | outside]
    reached = _cascade(
        asset_graph,
        order,
        {key: asset_slice.partition_keys for key, asset_slice in graph.slices.items()},
        _mappings_among(asset_graph, order),
        dynamic_partitions_store,
    )
    return {key: len(reached[key]) for key in order if key in outside and reached[key]}


def _mappings_among(
    asset_graph: BaseAssetGraph, order: list[dg.AssetKey]
) -> dict[tuple[dg.AssetKey, dg.AssetKey], dg.PartitionMapping]:
    """The partition mapping of every edge (child, parent) between assets of `order`."""
    among = set(order)
    return {
        (key, parent): asset_graph.get_partition_mapping(key, parent)
        for key in order
        for parent in sorted(asset_graph.get(key).parent_keys)
        if parent in among
    }


def _descendants(asset_graph: BaseAssetGraph, keys: set[dg.AssetKey]) -> set[dg.AssetKey]:
    found: set[dg.AssetKey] = set()
    stack = list(keys)
    while stack:
        for child in asset_graph.get(stack.pop()).child_keys:
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _cascade(
    asset_graph: BaseAssetGraph,
    order: list[dg.AssetKey],
    keys_by_asset: dict[dg.AssetKey, list[str]],
    mappings_by_edge: dict[tuple[dg.AssetKey, dg.AssetKey], dg.PartitionMapping],
    store: DynamicPartitionsStore | None,
) -> dict[dg.AssetKey, list[str]]:
    """Each asset's partitions plus every partition that its upstream partitions reach."""
    reached: dict[dg.AssetKey, list[str]] = {}
    for key in order:  # topological: an asset's parents are final before it
        partitions_def = asset_graph.get(key).partitions_def
        keys = set(keys_by_asset.get(key, ()))
        for (child, parent), mapping in mappings_by_edge.items():
            if child == key and parent != key and reached[parent]:
                keys |= _downstream_keys(
                    mapping, asset_graph.get(parent).partitions_def, reached[parent], partitions_def, store
                )
        if keys and (key, key) in mappings_by_edge:
            keys |= _self_reached(mappings_by_edge[(key, key)], partitions_def, keys, store)
        reached[key] = _in_partition_order(partitions_def, keys, store)
    return reached


def _downstream_keys(
    mapping: dg.PartitionMapping,
    upstream_def: dg.PartitionsDefinition | None,
    upstream_keys: list[str],
    downstream_def: dg.PartitionsDefinition | None,
    store: DynamicPartitionsStore | None,
) -> set[str]:
    if downstream_def is None:
        return {UNPARTITIONED}
    if upstream_def is None:  # an unpartitioned input feeds every partition
        return set(downstream_def.get_partition_keys(dynamic_partitions_store=store))
    subset = mapping.get_downstream_partitions_for_partitions(
        upstream_def.subset_with_partition_keys(upstream_keys),
        upstream_def,
        downstream_def,
        dynamic_partitions_store=store,
    )
    return set(subset.get_partition_keys())


def _self_reached(
    mapping: dg.PartitionMapping,
    partitions_def: dg.PartitionsDefinition,
    keys: set[str],
    store: DynamicPartitionsStore | None,
) -> set[str]:
    """Partitions of a self-dependent asset that depend on `keys` through itself, transitively."""
    if isinstance(mapping, dg.TimeWindowPartitionMapping) and mapping.end_offset < 0:
        # Each partition reads earlier ones: a change reaches every later partition.
        every = list(partitions_def.get_partition_keys(dynamic_partitions_store=store))
        position = {k: i for i, k in enumerate(every)}
        return set(every[min(position[k] for k in keys) :])
    reached, frontier = set(keys), set(keys)
    while frontier:
        frontier = _downstream_keys(mapping, partitions_def, sorted(frontier), partitions_def, store) - reached
        reached |= frontier
    return reached


def _in_partition_order(
    partitions_def: dg.PartitionsDefinition | None, keys: set[str], store: DynamicPartitionsStore | None
) -> list[str]:
    if partitions_def is None:
        return sorted(keys)
    return [k for k in partitions_def.get_partition_keys(dynamic_partitions_store=store) if k in keys]


def _slice(key: dg.AssetKey, asset_node: BaseAssetNode, keys: list[str], windows: _WindowCache) -> AssetSlice:
    max_batch = max_batch_of(asset_node, len(keys))
    breaks: frozenset[int] = frozenset()
    if max_batch > 1 and len(keys) > 1:  # runs of time partitions: never across a gap
        starts, ends = windows.bounds(cast(dg.TimeWindowPartitionsDefinition, asset_node.partitions_def), keys)
        breaks = frozenset(int(i) for i in np.flatnonzero(starts[1:] != ends[:-1]) + 1)
    return AssetSlice(key, asset_node.partitions_def, keys, max_batch, breaks)


def _explicit_keys(
    asset_graph: BaseAssetGraph,
    order: list[dg.AssetKey],
    selected: set[dg.AssetKey],
    keys: Sequence[str],
    store: DynamicPartitionsStore | None,
) -> dict[dg.AssetKey, list[str]]:
    """Each selected asset's share of `keys` (those that are its partition keys), in partition order."""
    found: dict[dg.AssetKey, list[str]] = {}
    for key in order:
        if key not in selected:
            continue
        partitions_def = asset_graph.get(key).partitions_def
        if partitions_def is None:
            found[key] = [UNPARTITIONED]
            continue
        if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
            own = {k for k in keys if partitions_def.has_partition_key(k)}
        else:
            own = set(keys) & set(partitions_def.get_partition_keys(dynamic_partitions_store=store))
        found[key] = _in_partition_order(partitions_def, own, store)
    unused = [k for k in keys if not any(k in asset_keys for asset_keys in found.values())]
    if unused:
        examples = {
            key.to_user_string(): _first_key(asset_graph.get(key).partitions_def, store)
            for key in found
            if asset_graph.get(key).partitions_def is not None
        }
        raise BackfillPlanError(
            f"--keys {unused[:5]} {'is' if len(unused) == 1 else 'are'} no partition of any selected asset; "
            f"keys look like {examples}. Fix the keys or the selection; nothing was launched"
        )
    return found


def _first_key(partitions_def: dg.PartitionsDefinition | None, store: DynamicPartitionsStore | None) -> str | None:
    if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        return partitions_def.get_first_partition_key()
    keys = partitions_def.get_partition_keys(dynamic_partitions_store=store) if partitions_def else []
    return keys[0] if keys else None


def max_batch_of(asset_node: BaseAssetNode, partition_count: int) -> int:
    """How many contiguous partitions one run of the asset may cover.

    Only time partitions, and only when the asset's backfill policy allows ranges:
    its code then reads `context.partition_keys` (or the time window), not one key.
    """
    policy = asset_node.backfill_policy
    if policy is None or not isinstance(asset_node.partitions_def, dg.TimeWindowPartitionsDefinition):
        return 1
    return policy.max_partitions_per_run or max(partition_count, 1)


def _keys_of(
    key: dg.AssetKey,
    partitions_def: dg.PartitionsDefinition | None,
    time_range: TimeRange | None,
    static_keys: Mapping[str, Sequence[str]],
    dynamic_partitions_store: DynamicPartitionsStore | None,
    windows: _WindowCache,
) -> list[str]:
    if partitions_def is None:
        return [UNPARTITIONED]
    if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        if time_range is None:
            raise BackfillPlanError(
                f"asset {key.to_user_string()} is time-partitioned: give a start and an end "
                "(--start, --end: inclusive ISO dates or times)"
            )
        return windows.time_keys(partitions_def, time_range)
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        per_dimension = [
            _dimension_keys(key, d, time_range, static_keys, dynamic_partitions_store, windows)
            for d in partitions_def.partitions_defs
        ]
        names = [d.name for d in partitions_def.partitions_defs]
        return [dg.MultiPartitionKey(dict(zip(names, combo, strict=True))) for combo in _product(per_dimension)]
    if isinstance(partitions_def, dg.StaticPartitionsDefinition):
        return _static_keys(key.to_user_string(), partitions_def, static_keys.get(key.to_user_string()))
    return list(partitions_def.get_partition_keys(dynamic_partitions_store=dynamic_partitions_store))


def _dimension_keys(
    key: dg.AssetKey,
    dimension: PartitionDimensionDefinition,
    time_range: TimeRange | None,
    static_keys: Mapping[str, Sequence[str]],
    dynamic_partitions_store: DynamicPartitionsStore | None,
    windows: _WindowCache,
) -> list[str]:
    if isinstance(dimension.partitions_def, dg.StaticPartitionsDefinition):
        return _static_keys(dimension.name, dimension.partitions_def, static_keys.get(dimension.name))
    return _keys_of(key, dimension.partitions_def, time_range, {}, dynamic_partitions_store, windows)


def _static_keys(
    dimension: str, partitions_def: dg.StaticPartitionsDefinition, chosen: Sequence[str] | None
) -> list[str]:
    every = list(partitions_def.get_partition_keys())
    if chosen is None:
        return every
    unknown = sorted(set(chosen) - set(every))
    if unknown:
        raise BackfillPlanError(f"--static {dimension}: keys {unknown} do not exist; choose among {every}")
    return [k for k in every if k in set(chosen)]


def _product(lists: list[list[str]]) -> Iterator[tuple[str, ...]]:
    if not lists:
        yield ()
        return
    for head in lists[0]:
        for tail in _product(lists[1:]):
            yield (head, *tail)


def _time_keys(
    partitions_def: dg.TimeWindowPartitionsDefinition, time_range: TimeRange, exact: bool = False
) -> list[str]:
    first = partitions_def.get_first_partition_window()
    last = partitions_def.get_last_partition_window()
    if first is None or last is None:
        return []
    start = max(time_range.start, first.start, key=lambda d: d.timestamp())
    end = min(time_range.end, last.end, key=lambda d: d.timestamp())
    if start.timestamp() >= end.timestamp():
        return []
    # Window iteration starts at the first window starting at or after `start`: step back
    # to the window that holds it, so that every overlapping partition is selected.
    holding = partitions_def.get_partition_key_for_timestamp(start.timestamp())
    start = partitions_def.start_time_for_partition_key(holding)
    keys = list(partitions_def.get_partition_keys_in_time_window(dg.TimeWindow(start, end)))
    if exact:  # windows are contiguous: only the first and the last can stick out of the range
        keys = (
            [k for k in keys[:1] if _inside(partitions_def, k, time_range)]
            + keys[1:-1]
            + [k for k in keys[1:][-1:] if _inside(partitions_def, k, time_range)]
        )
    return keys


def _inside(partitions_def: dg.TimeWindowPartitionsDefinition, key: str, time_range: TimeRange) -> bool:
    window = partitions_def.time_window_for_partition_key(key)
    return window.start.timestamp() >= time_range.start.timestamp() and (
        window.end.timestamp() <= time_range.end.timestamp()
    )


def _with_lookback(partitions_def: dg.TimeWindowPartitionsDefinition, keys: list[str], lookback: int) -> list[str]:
    earlier: list[str] = []
    if not keys or lookback <= 0:
        return keys
    first_start = partitions_def.start_time_for_partition_key(keys[0])
    for _ in range(lookback):
        previous = partitions_def.get_prev_partition_window(first_start)
        if previous is None:
            break  # the definition's first partition
        earlier.insert(0, partitions_def.get_partition_key_for_timestamp(previous.start.timestamp()))
        first_start = previous.start
    return earlier + keys


class _WindowCache:
    """Partition keys and window boundaries (epoch seconds), computed once per definition."""

    def __init__(self, padding: int, lookback: int = 0, exact: bool = False) -> None:
        self.padding = padding
        self.lookback = lookback
        self.exact = exact
        self._keys: dict = {}
        self._bounds: dict = {}
        self._padded: dict = {}

    def time_keys(self, partitions_def: dg.TimeWindowPartitionsDefinition, time_range: TimeRange) -> list[str]:
        cache_key = (partitions_def, time_range)
        if cache_key not in self._keys:
            self._keys[cache_key] = _with_lookback(
                partitions_def, _time_keys(partitions_def, time_range, self.exact), self.lookback
            )
        return self._keys[cache_key]

    def bounds(
        self, partitions_def: dg.TimeWindowPartitionsDefinition, keys: list[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        cache_key = (partitions_def, tuple(keys))
        if cache_key not in self._bounds:
            windows = partitions_def.time_windows_for_partition_keys(frozenset(keys), validate=False)
            self._bounds[cache_key] = (
                np.array([w.start.timestamp() for w in windows], dtype=np.float64),
                np.array([w.end.timestamp() for w in windows], dtype=np.float64),
            )
        return self._bounds[cache_key]

    def padded(
        self, partitions_def: dg.TimeWindowPartitionsDefinition, keys: list[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Bounds of every window from `padding` windows before keys[0] to `padding` after
        keys[-1], and where each of `keys` sits among them (explicit keys may skip windows)."""
        cache_key = (partitions_def, tuple(keys))
        if cache_key not in self._padded:
            padded, first_index = _padded_keys(partitions_def, keys, self.padding, self.padding)
            if padded[first_index : first_index + len(keys)] == keys:  # contiguous: the usual case
                positions = np.arange(len(keys)) + first_index
            else:
                index_of = {key: index for index, key in enumerate(padded)}
                positions = np.array([index_of[key] for key in keys], dtype=np.int64)
            self._padded[cache_key] = (*self.bounds(partitions_def, padded), positions)
        return self._padded[cache_key]


def _dependency(
    downstream: AssetSlice,
    upstream: AssetSlice,
    mapping: dg.PartitionMapping,
    windows: _WindowCache,
    dynamic_partitions_store: DynamicPartitionsStore | None,
) -> Dependency:
    if (
        isinstance(mapping, dg.TimeWindowPartitionMapping)
        and isinstance(downstream.partitions_def, dg.TimeWindowPartitionsDefinition)
        and isinstance(upstream.partitions_def, dg.TimeWindowPartitionsDefinition)
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
                    for k in _mapped_keys(mapping, downstream, upstream, key, dynamic_partitions_store)
                    if k in upstream.index_of
                ),
                dtype=np.int64,
            )
        )
    return Dependency(downstream.key, upstream.key, explicit=explicit)


def _mapped_keys(
    mapping: dg.PartitionMapping,
    downstream: AssetSlice,
    upstream: AssetSlice,
    key: str,
    store: DynamicPartitionsStore | None,
) -> list[str]:
    if upstream.partitions_def is None:
        return [UNPARTITIONED]
    subset = None
    if downstream.partitions_def is not None:
        subset = downstream.partitions_def.empty_subset().with_partition_keys([key])
    result = mapping.get_upstream_mapped_partitions_result_for_partitions(
        subset, downstream.partitions_def, upstream.partitions_def, dynamic_partitions_store=store
    )
    return list(result.partitions_subset.get_partition_keys())


def _time_window_dependency(
    downstream: AssetSlice,
    upstream: AssetSlice,
    mapping: dg.TimeWindowPartitionMapping,
    windows: _WindowCache,
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
    d_starts, d_ends, positions = windows.padded(downstream_def, downstream.partition_keys)
    shifted_start = d_starts[positions + mapping.start_offset]
    shifted_end = d_ends[positions + mapping.end_offset]
    u_starts, u_ends = windows.bounds(upstream_def, upstream.partition_keys)
    full = _full_window(upstream_def)
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


def _full_window(partitions_def: dg.TimeWindowPartitionsDefinition) -> tuple[float, float] | None:
    first = partitions_def.get_first_partition_window()
    last = partitions_def.get_last_partition_window()
    if first is None or last is None:
        return None
    return first.start.timestamp(), last.end.timestamp()


def _padded_keys(
    partitions_def: dg.TimeWindowPartitionsDefinition, keys: list[str], before: int, after: int
) -> tuple[list[str], int]:
    """`keys` with `before` and `after` more windows of the same schedule (even past the
    definition's start or end), and the index of keys[0] in the result."""
    if before == 0 and after == 0:
        return keys, 0
    first = partitions_def.time_window_for_partition_key(keys[0])
    last = partitions_def.time_window_for_partition_key(keys[-1])
    longest = max(first.end - first.start, last.end - last.start) * 2
    # Window iteration follows the cron schedule alone, past the definition's bounds.
    window = dg.TimeWindow(first.start - longest * before, last.end + longest * after)
    padded = list(partitions_def.get_partition_keys_in_time_window(window))
    first_index = padded.index(keys[0])
    if first_index < before or len(padded) - first_index - len(keys) < after:
        raise BackfillPlanError(f"could not pad the windows of {keys[0]}..{keys[-1]}")
    return padded, first_index
