"""Engine backfills as Dagster backfills: listed in the webserver's Backfills page, canceled
from it, and launched from its "Materialize range" dialog.

- `DagsterBackfillMirror` keeps the Dagster backfill of the same id as an engine backfill
  (creating it for one started by the CLI, the Launchpad job or the catch-up sensor) in
  step with the coordinator: its status, and per (asset, partition) requested, succeeded
  ("materialized" on the page) and failed-or-blocked. A *Cancel* clicked in the UI (status
  CANCELING) cancels the engine backfill within `POLL_SECONDS` (longer for backfills whose
  record takes long to read and write: see `_poll`).
- `spec_of_dagster_backfill` turns an asset backfill launched from the webserver into the
  `BackfillSpec` that plans exactly its target partitions, or refuses (BackfillPlanError)
  when no spec does: the caller hands such a backfill back to Dagster's daemon.

Not guaranteed: a node is "materialized" on the Backfills page once its run succeeded; a
staged backfill's partitions become materialized in Dagster's asset status only when it
publishes. A coordinator killed without running its exit leaves its Dagster backfill in
progress until `partition-assets backfill resume <id>` (or `cancel <id>`) is run.
Writes go through `DagsterInstance.get_backfill/add_backfill/update_backfill` and
`PartitionBackfill`/`AssetBackfillData` fields; partition_assets_tests/test_dagster_backfills.py
pins them against the installed Dagster.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING

import dagster as dg
from sqlalchemy.exc import OperationalError

from partition_assets.backfill.planning.graph import BackfillGraph, Node, plan
from partition_assets.backfill.planning.keys import UNPARTITIONED
from partition_assets.backfill.planning.spec import RESERVED_TAG_PREFIXES, BackfillSpec, config_key_of
from partition_assets.backfill.running.scheduling import NodeResult, NodeStatus, RunUnit
from partition_assets.backfill.state.record import BackfillRecord, record_path
from partition_assets.code_location import load_definitions
from partition_assets.dagster_internals import (
    AssetGraphSubset,
    AssetKeyPartitionKey,
    BulkActionStatus,
    PartitionBackfill,
    SerializableErrorInfo,
    serializable_error_info_from_exc_info,
)
from partition_assets.errors import BackfillPlanError
from partition_assets.instance.engine_instance import DAGSTER, ENGINE_TAG, SPARSE

if TYPE_CHECKING:
    from partition_assets.dagster_internals import BaseAssetGraph

# How often the mirror writes progress and looks for a cancel clicked in the UI, at most.
POLL_SECONDS = 0.5
# A poll reads and writes the whole Dagster backfill (its size grows with the backfill's):
# the mirror waits this many times a poll's duration before the next, so that it takes a
# bounded share of a CPU however large the backfill, not one growing with it.
POLL_IDLE_FACTOR = 9
_log = logging.getLogger(__name__)

# The Dagster status of each engine record status (partition_assets/backfill/state/record.py).
_DAGSTER_STATUS = {
    "running": BulkActionStatus.REQUESTED,
    "publishing": BulkActionStatus.REQUESTED,
    "canceled": BulkActionStatus.CANCELED,
    "failed": BulkActionStatus.COMPLETED_FAILED,
    "gate_failed": BulkActionStatus.COMPLETED_FAILED,
    "publish_refused": BulkActionStatus.COMPLETED_FAILED,
    "done": BulkActionStatus.COMPLETED_SUCCESS,
    "published": BulkActionStatus.COMPLETED_SUCCESS,
}
_STOPPED = (BulkActionStatus.CANCELING, BulkActionStatus.CANCELED)
# What the mirror tracks per node: launched, succeeded, failed or blocked.
_REQUESTED, _MATERIALIZED, _FAILED = "requested", "materialized", "failed"


def subset_of(nodes: Iterable[Node], asset_graph: BaseAssetGraph) -> AssetGraphSubset:
    """The nodes as Dagster's AssetGraphSubset."""
    return AssetGraphSubset.from_asset_partition_set(
        {AssetKeyPartitionKey(node.asset, node.partition or None) for node in nodes}, asset_graph
    )


def nodes_of(subset: AssetGraphSubset) -> set[Node]:
    """The (asset, partition) nodes of Dagster's AssetGraphSubset."""
    return {Node(item.asset_key, item.partition_key or UNPARTITIONED) for item in subset.iterate_asset_partitions()}


class DagsterBackfillMirror:
    """The Dagster backfill `record.id`, kept in step with one coordinator run of the record.

    Creates it when absent (tagged `partition_assets/engine=sparse`, so Dagster's daemon
    leaves it alone); `done` nodes count as materialized from the start. Use as a context
    manager: on exit it writes the final status from the record (FAILED with the error
    when the coordinator raised before deciding one, CANCELED when it was interrupted).
    """

    def __init__(
        self,
        record: BackfillRecord,
        graph: BackfillGraph,
        asset_graph: BaseAssetGraph,
        instance: dg.DagsterInstance,
        done: Iterable[Node],
    ) -> None:
        self._record_id = record.id
        self._asset_graph = asset_graph
        self._instance = instance
        self._lock = threading.Lock()
        # Nodes reported since the last write, per kind; written ones are kept as Dagster
        # subsets, so that a write costs what changed, not the whole backfill.
        self._pending: dict[str, set[Node]] = {_REQUESTED: set(done), _MATERIALIZED: set(done), _FAILED: set()}
        self._written = {kind: AssetGraphSubset.create_empty_subset() for kind in self._pending}
        self._cancel_seen = False
        self._stop = threading.Event()
        existing = instance.get_backfill(record.id)
        if existing is None:
            instance.add_backfill(
                PartitionBackfill.from_asset_graph_subset(
                    backfill_id=record.id,
                    backfill_timestamp=time.time(),
                    tags={**record.spec.tags, ENGINE_TAG: SPARSE},
                    dynamic_partitions_store=instance,
                    asset_graph_subset=subset_of(graph.nodes(), asset_graph),
                    title=None,
                    description=f"partition-assets backfill {record.id}: {record.spec.describe()}",
                    run_config=None,
                )
            )
        else:  # launched from the UI, or resumed: in progress again, whatever it was
            instance.update_backfill(
                existing._replace(
                    status=BulkActionStatus.REQUESTED,
                    tags={**existing.tags, ENGINE_TAG: SPARSE},
                    backfill_end_timestamp=None,
                    error=None,
                )
            )
        self._flush()
        self._thread = threading.Thread(target=self._poll, name=f"dagster-backfill-{record.id}", daemon=True)
        self._thread.start()

    def launched(self, unit: RunUnit) -> None:
        with self._lock:
            self._pending[_REQUESTED].update(Node(unit.asset, p) for p in unit.partitions)

    def finished(self, result: NodeResult) -> None:
        with self._lock:
            self._pending[_MATERIALIZED if result.succeeded else _FAILED].add(result.node)

    def settle(self, status: Mapping[Node, NodeStatus]) -> None:
        """Nodes left blocked behind failed ones count as failed (Dagster's "failed and downstream")."""
        with self._lock:
            self._pending[_FAILED].update(node for node, state in status.items() if state == NodeStatus.BLOCKED)

    def _poll(self) -> None:
        wait = POLL_SECONDS
        while not self._stop.wait(wait):
            started = time.monotonic()
            try:
                self._poll_once()
            except OperationalError as error:  # e.g. SQLite busy under many writers: next time
                _log.warning("backfill %s: its Dagster backfill was not updated (%s); retrying", self._record_id, error)
            wait = max(POLL_SECONDS, POLL_IDLE_FACTOR * (time.monotonic() - started))

    def _poll_once(self) -> None:
        stored = self._instance.get_backfill(self._record_id)
        if stored is not None and stored.status == BulkActionStatus.CANCELING and not self._cancel_seen:
            # Cancel in the UI: the coordinator stops launching and cancels its runs in flight.
            self._cancel_seen = True
            record = BackfillRecord.load(self._record_id)
            record.status = "canceled"
            record.save()
        self._flush()

    def _flush(self, status: BulkActionStatus | None = None, error: object = None) -> None:
        with self._lock:
            pending, self._pending = self._pending, {kind: set() for kind in self._pending}
        if status is None and not any(pending.values()):
            return
        for kind, nodes in pending.items():
            if nodes:
                self._written[kind] = self._written[kind] | subset_of(nodes, self._asset_graph)
        stored = self._instance.get_backfill(self._record_id)
        if stored is None:  # deleted from the UI meanwhile
            return
        materialized = self._written[_MATERIALIZED]
        data = stored.get_asset_backfill_data(self._asset_graph)._replace(
            requested_subset=self._written[_REQUESTED],
            materialized_subset=materialized,
            failed_and_downstream_subset=self._written[_FAILED] - materialized,
            requested_runs_for_target_roots=True,
        )
        updated = stored.with_asset_backfill_data(data, self._instance, self._asset_graph)
        if status is not None:
            updated = updated.with_status(status).with_end_timestamp(time.time())
            if error is not None:
                updated = updated.with_error(error)
        elif stored.status not in _STOPPED:  # a cancel clicked meanwhile is kept
            updated = updated.with_status(BulkActionStatus.REQUESTED)
        self._instance.update_backfill(updated)

    def __enter__(self) -> DagsterBackfillMirror:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        # A record not saved yet: the coordinator stopped before its first node.
        saved = record_path(self._record_id).exists()
        status = _DAGSTER_STATUS.get(BackfillRecord.load(self._record_id).status if saved else "running")
        error = serializable_error_info_from_exc_info(sys.exc_info()) if exc is not None else None
        if exc is not None and not isinstance(exc, Exception):
            status = BulkActionStatus.CANCELED  # interrupted: the Launchpad job's run terminated, Ctrl-C
        elif exc is not None and status == BulkActionStatus.REQUESTED:
            status = BulkActionStatus.FAILED  # the coordinator stopped before deciding: `backfill resume`
        if status == BulkActionStatus.REQUESTED:  # still publishing elsewhere: leave it in progress
            status = None
        self._flush(status, error)


def spec_of_dagster_backfill(backfill: PartitionBackfill, asset_graph: BaseAssetGraph, module: str) -> BackfillSpec:
    """The spec whose plan is `backfill`'s target: its assets, the time span of their
    targeted windows, the static keys it targets; its own tags. BackfillPlanError says why
    there is none (dynamic partitions, an asset of another code location)."""
    target = backfill.get_asset_backfill_data(asset_graph).target_subset
    missing = sorted(key.to_user_string() for key in target.asset_keys if not asset_graph.has(key))
    if missing:
        raise BackfillPlanError(f"assets {missing} are not in code location {module}")
    starts: list[datetime] = []
    ends: list[datetime] = []
    static: dict[str, set[str]] = {}
    for key in target.asset_keys:
        partitions_def = asset_graph.get(key).partitions_def
        if partitions_def is None:
            continue
        keys = list(target.get_partitions_subset(key).get_partition_keys())
        dimensions = (
            [(d.name, d.partitions_def) for d in partitions_def.partitions_defs]
            if isinstance(partitions_def, dg.MultiPartitionsDefinition)
            else [(key.to_user_string(), partitions_def)]
        )
        for name, dimension_def in dimensions:
            values = [k.keys_by_dimension[name] if isinstance(k, dg.MultiPartitionKey) else k for k in keys]
            if isinstance(dimension_def, dg.TimeWindowPartitionsDefinition):
                windows = [dimension_def.time_window_for_partition_key(v) for v in set(values)]
                starts.append(min(w.start for w in windows))
                ends.append(max(w.end for w in windows))
            elif isinstance(dimension_def, dg.StaticPartitionsDefinition):
                static.setdefault(name, set()).update(values)
            else:
                raise BackfillPlanError(
                    f"{key.to_user_string()} has {type(dimension_def).__name__} partitions: the engine takes a UI "
                    "backfill of time and static partitions only; Dagster's daemon runs this one"
                )
    user_tags = {k: v for k, v in backfill.tags.items() if not k.startswith(RESERVED_TAG_PREFIXES)}
    return BackfillSpec(
        module=module,
        selection=" or ".join(f'key:"{key.to_user_string()}"' for key in sorted(target.asset_keys)),
        start=min(starts).isoformat() if starts else None,
        end=(max(ends) - timedelta(microseconds=1)).isoformat() if ends else None,
        static={name: sorted(keys) for name, keys in static.items()},
        tags=user_tags,
    )


def adopted_plan(
    backfill: PartitionBackfill, modules: Iterable[str], instance: dg.DagsterInstance
) -> tuple[BackfillSpec, BackfillGraph]:
    """The spec and graph of a UI-launched `backfill`, from the first of `modules` (code
    locations) that holds its assets; BackfillPlanError when none plans exactly its target."""
    reasons = []
    for module in modules:
        asset_graph = load_definitions(module).resolve_asset_graph()
        try:
            spec = spec_of_dagster_backfill(backfill, asset_graph, module)
            # The engine derived the spec: its fields go by their own names, as a recorded spec shows them.
            graph = plan(asset_graph, spec, dynamic_partitions_store=instance, wording=config_key_of)
        except BackfillPlanError as error:
            reasons.append(f"{module}: {error}")
            continue
        target = nodes_of(backfill.get_asset_backfill_data(asset_graph).target_subset)
        planned = set(graph.nodes())
        if planned == target:
            return spec, graph
        reasons.append(
            f"{module}: the spec {spec.describe()} plans {len(planned - target)} nodes outside the backfill's "
            f"target and misses {len(target - planned)} of it (a target no time range and static filter states)"
        )
    raise BackfillPlanError(
        f"backfill {backfill.backfill_id} is not one the engine can run exactly "
        f"({'; '.join(reasons) or 'no engine_modules'}): handed back to Dagster's daemon"
    )


def hand_back(instance: dg.DagsterInstance, backfill: PartitionBackfill) -> None:
    """Leaves `backfill` to Dagster's daemon (its next tick runs it)."""
    instance.update_backfill(backfill._replace(tags={**backfill.tags, ENGINE_TAG: DAGSTER}))


def mark_canceled(instance: dg.DagsterInstance, backfill_id: str) -> None:
    """The Dagster backfill `backfill_id`, if any and not finished, is canceled."""
    backfill = instance.get_backfill(backfill_id)
    if backfill is not None and backfill.status in (BulkActionStatus.REQUESTED, BulkActionStatus.CANCELING):
        instance.update_backfill(backfill.with_status(BulkActionStatus.CANCELED).with_end_timestamp(time.time()))


def mark_failed(instance: dg.DagsterInstance, backfill_id: str, error: BaseException) -> None:
    """The Dagster backfill `backfill_id` failed before the engine ran any node; `error` says why."""
    backfill = instance.get_backfill(backfill_id)
    if backfill is not None:
        info = SerializableErrorInfo(message=str(error), stack=[], cls_name=type(error).__name__)
        instance.update_backfill(
            backfill.with_status(BulkActionStatus.FAILED).with_error(info).with_end_timestamp(time.time())
        )
