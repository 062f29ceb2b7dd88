"""Runs a recorded backfill: plans its graph, launches its nodes, honours cancel.

Shared by every surface that starts a backfill (the CLI, a Dagster job, a sensor),
so each behaves the same and leaves the same record.
"""

from collections.abc import Callable, Iterable
from datetime import datetime, time, timedelta, timezone

import dagster as dg

from partition_assets.backfill.engine import NodeResult, NodeStatus, Throttle, execute
from partition_assets.backfill.graph import (
    BackfillGraph,
    BackfillPlanError,
    Node,
    TimeRange,
    plan,
)
from partition_assets.backfill.runner import DagsterNodeRunner, load_definitions
from partition_assets.backfill.state import (
    BACKFILL_ID_TAG,
    BackfillRecord,
    cancel_in_flight,
    node_states,
)


def time_range(start: str | None, end: str | None) -> TimeRange | None:
    """The half-open range of the inclusive ISO `start` and `end` (a day or an instant)."""
    if start is None and end is None:
        return None
    if start is None or end is None:
        raise BackfillPlanError("give both a start and an end (inclusive)")
    first, last = _parse_time(start), _parse_time(end)
    # An end date covers its whole day; an end time, the instant (and so its partition).
    last = last + (timedelta(days=1) if len(end) <= 10 else timedelta(microseconds=1))
    if last <= first:
        raise BackfillPlanError(f"start {start} is after end {end}")
    return TimeRange(first, last)


def _parse_time(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise BackfillPlanError(
            f"{value!r} is not an ISO date or time, e.g. 2024-01-31 or 2024-01-31T13:00"
        ) from None
    if len(value) <= 10:
        parsed = datetime.combine(parsed.date(), time())
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def graph_of(record: BackfillRecord, instance: dg.DagsterInstance) -> BackfillGraph:
    """The record's graph, planned against its code location and the instance's dynamic partitions."""
    asset_graph = load_definitions(record.module).resolve_asset_graph()
    try:
        selection = dg.AssetSelection.from_string(record.selection).resolve(asset_graph)
    except dg.DagsterInvalidAssetSelectionError as error:
        raise BackfillPlanError(
            f"selection {record.selection!r}: {error}. Use Dagster's selection syntax, "
            "e.g. 'key:daily_orders+' or 'key:a or key:b' or 'group:revenue'"
        ) from None
    graph = plan(asset_graph, selection, time_range(record.start, record.end), record.static,
                 dynamic_partitions_store=instance, lookback=record.lookback, exact=record.exact,
                 downstream=record.downstream)
    unknown = sorted(set(record.asset_limits) - {key.to_user_string() for key in graph.slices})
    if unknown:
        raise BackfillPlanError(f"asset limits name assets outside the backfill: {unknown}; "
                                f"it holds {[key.to_user_string() for key in graph.slices]}")
    return graph


def current_nodes(graph: BackfillGraph, instance: dg.DagsterInstance) -> set[Node]:
    """The graph's nodes that hold a materialization whose latest run did not fail since:
    what catch-up leaves alone (Dagster's partition status, as the UI colours it)."""
    failed = {
        Node(key, partition)
        for key, asset_slice in graph.slices.items()
        if asset_slice.partitions_def is not None
        for partition in failed_partitions(instance, key, asset_slice.partitions_def, asset_slice.partition_keys)
    }
    return _materialized(graph, instance) - failed


def failed_partitions(
    instance: dg.DagsterInstance, key: dg.AssetKey, partitions_def: dg.PartitionsDefinition, keys: Iterable[str]
) -> set[str]:
    """Partitions of `keys` whose latest run failed to materialize them."""
    status = instance.get_status_by_partition(key, list(keys), partitions_def) or {}
    return {k for k, s in status.items() if s == dg.AssetPartitionStatus.FAILED}


def _materialized(graph: BackfillGraph, instance: dg.DagsterInstance) -> set[Node]:
    return {
        Node(key, partition)
        for key, asset_slice in graph.slices.items()
        for partition in (
            instance.get_materialized_partitions(key) if asset_slice.partitions_def else
            ({""} if instance.get_latest_materialization_event(key) else set())
        )
        if partition in asset_slice.index_of
    }


def succeeded_nodes(record: BackfillRecord, graph: BackfillGraph, instance: dg.DagsterInstance) -> set[Node]:
    """Nodes whose latest run in this backfill succeeded; runs a dead coordinator left
    in flight are canceled first, since nobody will finish them."""
    cancel_in_flight(instance, record.id)
    return {node for node, (state, _) in node_states(instance, record.id, graph).items()
            if state == NodeStatus.SUCCEEDED}


def run_backfill(
    record: BackfillRecord,
    graph: BackfillGraph,
    done: set[Node],
    newest_first: bool = False,
    on_result: Callable[[NodeResult], None] = lambda result: None,
) -> dict[Node, NodeStatus]:
    """Runs every node of `graph` not in `done`; stops launching once the record is canceled."""
    record.status = "running"
    record.save()

    def canceled() -> bool:
        return BackfillRecord.load(record.id).status == "canceled"

    runner = DagsterNodeRunner(record.module, record.max_parallel, {BACKFILL_ID_TAG: record.id})
    try:
        throttle = Throttle(record.max_parallel, {
            dg.AssetKey.from_user_string(asset): limit for asset, limit in record.asset_limits.items()
        })
        status = execute(graph, runner.launch, throttle, done=done, on_result=on_result,
                         newest_first=newest_first, should_stop=canceled, batch_chains=record.batch)
    finally:
        if canceled():
            runner.terminate()
            with dg.DagsterInstance.get() as instance:
                cancel_in_flight(instance, record.id)
        else:
            runner.close()
    if not canceled():
        record.status = "done"
        record.save()
    return status
