"""The sparse (asset, partition) graph of a backfill, and `plan`, which builds it from a spec.

Each (asset, partition) node has edges exactly to the upstream nodes its partition
mapping names. Partitions are stored per asset as key lists (`AssetSlice`) and edges per
(asset, upstream asset) as index arrays (`Dependency`), so ten years of hourly
partitions for twenty assets stay a few arrays, not millions of Python objects.

`plan` checks the spec against the code location (selection.py), takes each asset's keys
(keys.py, windows.py), adds the lineage cascade when asked (lineage.py) and computes the
edges (edges.py). A refused spec is a BackfillPlanError naming the fix; nothing is planned.

Not guaranteed: the graph is the code location's and the instance's dynamic partitions
as they are when it is planned; a later change to either is seen only by a new plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, cast

import dagster as dg

from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.edges import Dependency, edges_between
from partition_assets.backfill.planning.keys import explicit_keys_of, keys_of
from partition_assets.backfill.planning.lineage import cascade, descendants, mappings_among
from partition_assets.backfill.planning.mapping_memo import MappingMemo
from partition_assets.backfill.planning.missing_parents import refuse_missing_parents
from partition_assets.backfill.planning.reasons import NodeReasons
from partition_assets.backfill.planning.selection import check_static_filters, resolve_selection, why_empty
from partition_assets.backfill.planning.spec import BackfillSpec, TimeRange, Wording, flag_of
from partition_assets.backfill.planning.windows import WindowCache, padding_of
from partition_assets.errors import BackfillPlanError

if TYPE_CHECKING:  # Dagster's internal types, for annotations only
    from partition_assets.dagster_internals import BaseAssetGraph, BaseAssetNode, DynamicPartitionsStore


@dataclass
class AssetSlice:
    """The partitions of one asset that a backfill covers, in partition order."""

    key: dg.AssetKey
    partitions_def: dg.PartitionsDefinition | None
    partition_keys: list[str]
    max_batch: int = 1  # contiguous partitions one run may cover (from the backfill policy)
    # Indexes i whose partition may not share a run with partition i - 1: a partition between
    # them that is not planned (explicit keys; an excluded day is none), or different pinned inputs.
    breaks: frozenset[int] = frozenset()

    @cached_property
    def index_of(self) -> dict[str, int]:
        """Each partition key's index (built when first asked: candidates that are only filtered never need it)."""
        return {key: index for index, key in enumerate(self.partition_keys)}

    def __len__(self) -> int:
        return len(self.partition_keys)


@dataclass
class BackfillGraph:
    """A backfill's nodes, as one slice of partitions per asset, and their edges, per downstream asset."""

    slices: dict[dg.AssetKey, AssetSlice]
    dependencies: dict[dg.AssetKey, list[Dependency]]  # by downstream asset, in topological order
    # Why each node is in it, when the instance's history picked them (history.py); else empty.
    reasons: NodeReasons = field(default_factory=dict)

    @property
    def assets(self) -> list[dg.AssetKey]:
        return list(self.slices)

    def node_count(self) -> int:
        return sum(len(s) for s in self.slices.values())

    def edge_count(self) -> int:
        return sum(d.edge_count() for deps in self.dependencies.values() for d in deps)

    def nodes(self) -> Iterator[Node]:
        """Every node: asset by asset in topological order, each asset's in partition order."""
        for asset_slice in self.slices.values():
            for key in asset_slice.partition_keys:
                yield Node(asset_slice.key, key)

    def upstream(self, node: Node) -> list[Node]:
        """The nodes `node` depends on: of each upstream asset in the backfill, the partitions its mapping names."""
        index = self.slices[node.asset].index_of[node.partition]
        found: list[Node] = []
        for dependency in self.dependencies[node.asset]:
            keys = self.slices[dependency.upstream].partition_keys
            found.extend(Node(dependency.upstream, keys[j]) for j in dependency.upstream_indexes(index))
        return found


def plan(
    asset_graph: BaseAssetGraph,
    spec: BackfillSpec,
    dynamic_partitions_store: DynamicPartitionsStore | None = None,
    wording: Wording = flag_of,
    parents_must_exist: bool = True,
    edges: bool = True,
) -> BackfillGraph:
    """The backfill graph of `spec` against a code location's asset graph.

    Its messages name the spec's fields as `wording` does: the surface the spec came
    from (the command line's flags unless told).

    Args:
        dynamic_partitions_store: Where the keys of dynamic partitions are read (the instance).
        parents_must_exist: Refuse partitions whose parent partitions do not exist (see
            `build_graph`); False for candidates that are not run as they are (history.py).
        edges: Compute the edges; False for candidates that are only filtered (history.py): their
            graph then has none (a whole history's edges are most of its memory).

    Raises:
        BackfillPlanError: The selection is invalid or matches no asset; a static filter names no
            static dimension of the selection, or keys it lacks; a time-partitioned asset is
            selected with neither a range nor keys; a key of `spec.keys` is no partition of any
            selected asset; an asset limit names an asset outside the backfill; or the spec plans
            no node at all (the range lies outside the partitions, a dynamic definition has no
            keys). The message names the fix. A MissingParentPartitionError when a partition reads a
            parent partition that does not exist.
    """
    selected = resolve_selection(asset_graph, spec.selection)
    check_static_filters(asset_graph, selected, spec.static, wording)
    keys = spec.keys
    if spec.all_partitions:  # each asset takes its own keys of these: all of them
        definitions = {asset_graph.get(key).partitions_def for key in selected} - {None}  # each listed once
        keys = sorted(
            {
                k
                for partitions_def in definitions
                if partitions_def is not None
                for k in partitions_def.get_partition_keys(dynamic_partitions_store=dynamic_partitions_store)
            }
        )
    graph = build_graph(
        asset_graph,
        selected,
        spec.time_range(),
        spec.static,
        dynamic_partitions_store,
        lookback=spec.lookback,
        exact=spec.exact,
        downstream=spec.downstream,
        explicit_keys=keys,
        wording=wording,
        parents_must_exist=parents_must_exist,
        edges=edges,
    )
    in_backfill = [key.to_user_string() for key in graph.slices]
    unknown = sorted(set(spec.asset_limits) - set(in_backfill))
    if unknown:
        raise BackfillPlanError(f"asset limits name assets outside the backfill: {unknown}; it holds {in_backfill}")
    if graph.node_count() == 0:
        reasons = [
            why_empty(key.to_user_string(), asset_graph.get(key).partitions_def, spec, wording) for key in graph.slices
        ]
        raise BackfillPlanError(f"{spec.describe()} plans no partition: " + "; ".join(reasons))
    return graph


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
    wording: Wording = flag_of,
    picked_keys: Mapping[dg.AssetKey, list[str]] | None = None,
    parents_must_exist: bool = True,
    edges: bool = True,
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
    spans a gap between two of them. With `picked_keys`, each selected asset takes exactly
    its own list (in partition order), as the instance's history picked them (history.py).
    With `parents_must_exist`, a partition that reads a parent partition that does not exist
    is refused, as Dagster's backfill refuses it (missing_parents.py). Without `edges`, the graph
    has its nodes and no edges (see `plan`).

    Errors name the spec's fields as `wording` does (see `plan`).

    Args:
        dynamic_partitions_store: Where the keys of dynamic partitions are read (the instance).

    Raises:
        BackfillPlanError: `exact` with a `lookback`; a time-partitioned asset with neither a
            `time_range` nor `explicit_keys`; a key in `static_keys` that its dimension lacks; a key
            of `explicit_keys` that is no partition of any selected asset.
        MissingParentPartitionError: A partition reads a parent partition that does not exist
            (missing_parents.py).
    """
    if exact and lookback:
        raise BackfillPlanError("exact and lookback contradict: exact adds no partition outside the range")
    selected = set(selection)
    if downstream:
        selected |= descendants(asset_graph, selected)
    order = [key for key in asset_graph.toposorted_asset_keys if key in selected]
    mappings_by_edge = mappings_among(asset_graph, order)
    windows = WindowCache(padding_of(mappings_by_edge.values()), lookback, exact)
    memo = MappingMemo(dynamic_partitions_store)
    if picked_keys is not None:
        keys_by_asset = {key: list(picked_keys.get(key, [])) for key in order if key in set(selection)}
    elif explicit_keys:
        keys_by_asset = explicit_keys_of(
            asset_graph, order, set(selection), explicit_keys, dynamic_partitions_store, wording
        )
    else:
        keys_by_asset = {
            key: keys_of(
                key,
                asset_graph.get(key).partitions_def,
                time_range,
                static_keys or {},
                dynamic_partitions_store,
                windows,
                wording,
            )
            for key in order
            if key in set(selection)
        }
    if downstream:
        keys_by_asset = cascade(asset_graph, order, keys_by_asset, mappings_by_edge, memo)
    if parents_must_exist:
        refuse_missing_parents(asset_graph, keys_by_asset, memo)
    slices = {key: _slice(key, asset_graph.get(key), keys_by_asset[key], windows) for key in order}
    dependencies: dict[dg.AssetKey, list[Dependency]] = {key: [] for key in order}
    for (key, parent), mapping in mappings_by_edge.items() if edges else ():
        dependencies[key].append(edges_between(slices[key], slices[parent], mapping, windows, memo))
    return BackfillGraph(slices, dependencies)


def max_batch_of(asset_node: BaseAssetNode, partition_count: int) -> int:
    """How many contiguous partitions one run of the asset may cover.

    Only time partitions, and only when the asset's backfill policy allows ranges:
    its code then reads `context.partition_keys` (or the time window), not one key.
    """
    policy = asset_node.backfill_policy
    if policy is None or not isinstance(asset_node.partitions_def, dg.TimeWindowPartitionsDefinition):
        return 1
    return policy.max_partitions_per_run or max(partition_count, 1)


def _slice(key: dg.AssetKey, asset_node: BaseAssetNode, keys: list[str], windows: WindowCache) -> AssetSlice:
    max_batch = max_batch_of(asset_node, len(keys))
    breaks: frozenset[int] = frozenset()
    if max_batch > 1 and len(keys) > 1:  # runs of time partitions: never across a gap
        breaks = windows.gaps(cast(dg.TimeWindowPartitionsDefinition, asset_node.partitions_def), keys)
    return AssetSlice(key, asset_node.partitions_def, keys, max_batch, breaks)
