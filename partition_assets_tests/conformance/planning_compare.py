"""Side by side, in this process: what the engine plans for a backfill, and what Dagster's own
asset backfill targets, waits for, runs or refuses.

A backfill's plan here is a `Backfilled`: its (asset, partition) targets, and the pairs (target,
target it waits for), the dependency order both sides keep.

- `engine_side` plans a spec with the engine's planner (backfill/planning/graph.py `plan`).
- `dagster_side` takes a target subset built as Dagster builds it (`dagster_target`: partition
  names given to the root assets of a selection, as the webserver's dialog and `dagster asset
  backfill` pass them; `dagster_ranges`: a key range per asset, as the webserver's
  partitions-by-asset selector does; `AssetGraphSubset.all` for every partition) and Dagster's
  own order: a target waits for each parent partition that `get_parents_partitions` names and
  that is a target too (what Dagster's own backfill tests assert of every materialization).
- `dagster_backfill` runs Dagster's asset backfill itself, iteration by iteration of its
  daemon, on an instance that runs each run in-process when it is submitted: the targets it
  materialized in the order it did, or the error it failed with.

Not guaranteed: how Dagster groups targets into runs (the assets of one partition in one run,
backfill policies) is not compared here: the engine runs one node per (asset, partition).
"""

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import dagster as dg
from dagster._core.definitions.selector import PartitionRangeSelector, PartitionsByAssetSelector, PartitionsSelector
from dagster._core.execution.asset_backfill import AssetBackfillData
from dagster._core.execution.backfill import BulkActionStatus

from partition_assets.backfill.planning.graph import plan
from partition_assets.backfill.planning.keys import UNPARTITIONED
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.dagster_internals import (
    AssetGraph,
    AssetGraphSubset,
    AssetKeyPartitionKey,
    DynamicPartitionsStore,
)
from partition_assets_tests.conformance.dagster_backfill import run_dagster_backfill

# An (asset, partition): the asset's user string, the partition key ("" when unpartitioned).
Target = tuple[str, str]


@dataclass(frozen=True)
class Backfilled:
    """What a backfill covers: its targets, and which target waits for which (child, parent)."""

    targets: frozenset[Target]
    waits_for: frozenset[tuple[Target, Target]]


@dataclass(frozen=True)
class DagsterRun:
    """The end of Dagster's own asset backfill: its status, its error's message (None when it
    has none), and the targets each of its runs materialized, runs oldest first."""

    status: BulkActionStatus
    error: str | None
    runs: list[list[Target]]

    @property
    def materialized(self) -> list[Target]:
        """Every target materialized, in the order the runs did."""
        return [target for run in self.runs for target in run]


def engine_side(asset_graph: AssetGraph, spec: BackfillSpec, store: DynamicPartitionsStore | None = None) -> Backfilled:
    """The engine's plan of `spec`: its nodes and their edges (raises what `plan` refuses with)."""
    graph = plan(asset_graph, spec, dynamic_partitions_store=store)
    nodes = list(graph.nodes())
    return Backfilled(
        frozenset((node.asset.to_user_string(), node.partition) for node in nodes),
        frozenset(
            ((node.asset.to_user_string(), node.partition), (parent.asset.to_user_string(), parent.partition))
            for node in nodes
            for parent in graph.upstream(node)
        ),
    )


def dagster_side(
    asset_graph: AssetGraph, target: AssetGraphSubset, store: DynamicPartitionsStore | None = None
) -> Backfilled:
    """Dagster's targets of `target` and the order its backfill keeps among them."""
    members = list(target.iterate_asset_partitions())
    waits_for = set()
    with dg.partition_loading_context(dynamic_partitions_store=store):
        for member in members:
            parents = asset_graph.get_parents_partitions(member.asset_key, member.partition_key).parent_partitions
            waits_for |= {(_target(member), _target(parent)) for parent in parents if parent in target}
    return Backfilled(frozenset(_target(member) for member in members), frozenset(waits_for))


def dagster_target(
    asset_graph: AssetGraph,
    partition_names: Sequence[str] | None,
    selection: Iterable[dg.AssetKey] | None = None,
    store: DynamicPartitionsStore | None = None,
) -> AssetGraphSubset:
    """Dagster's target of a backfill of `partition_names` (every partition when None) over
    `selection` (every materializable asset when None): the names go to the selection's root
    assets, and reach the rest of it through the partition mappings."""
    return AssetBackfillData.from_asset_partitions(
        asset_graph=asset_graph,
        partition_names=partition_names,
        asset_selection=list(asset_graph.materializable_asset_keys if selection is None else selection),
        dynamic_partitions_store=store or dg.DagsterInstance.ephemeral(),
        backfill_start_timestamp=time.time(),
        all_partitions=partition_names is None,
    ).target_subset


def dagster_ranges(asset_graph: AssetGraph, ranges: Mapping[str, tuple[str, str]]) -> AssetGraphSubset:
    """Dagster's target of one key range (first, last) per asset."""
    return AssetBackfillData.from_partitions_by_assets(
        asset_graph=asset_graph,
        dynamic_partitions_store=dg.DagsterInstance.ephemeral(),
        backfill_start_timestamp=time.time(),
        partitions_by_assets=[
            PartitionsByAssetSelector(
                asset_key=dg.AssetKey.from_user_string(asset),
                partitions=PartitionsSelector(ranges=[PartitionRangeSelector(start=first, end=last)]),
            )
            for asset, (first, last) in ranges.items()
        ],
    ).target_subset


def dagster_backfill(module: str, asset_graph: AssetGraph, target: AssetGraphSubset) -> DagsterRun:
    """Dagster's asset backfill of `target`, run to its end by its own daemon's iterations on a
    fresh instance whose runs execute in this process as they are submitted; `module` is the code
    location of `asset_graph` (its assets must use the in-process executor)."""
    with dg.instance_for_test(synchronous_run_coordinator=True, synchronous_run_launcher=True) as instance:
        backfill = run_dagster_backfill(instance, module, target, None)
        # Runs oldest first (each one's events in a store of its own: their ids order one run's events only).
        runs = [
            [
                _materialized_target(record.event_log_entry)
                for record in instance.get_records_for_run(
                    run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
                ).records
            ]
            for run in reversed(instance.get_runs())
        ]
        return DagsterRun(backfill.status, backfill.error.message if backfill.error else None, runs)


def respects(order: Sequence[Target], waits_for: Iterable[tuple[Target, Target]]) -> list[tuple[Target, Target]]:
    """The pairs of `waits_for` whose child comes before its parent in `order` (empty: it keeps them all)."""
    position = {target: index for index, target in enumerate(order)}
    return [(child, parent) for child, parent in waits_for if position[child] < position[parent]]


def _target(asset_partition: AssetKeyPartitionKey) -> Target:
    return asset_partition.asset_key.to_user_string(), asset_partition.partition_key or UNPARTITIONED


def _materialized_target(entry: dg.EventLogEntry) -> Target:
    materialization = entry.asset_materialization
    assert materialization is not None  # the records were asked for materializations only
    return materialization.asset_key.to_user_string(), materialization.partition or UNPARTITIONED
