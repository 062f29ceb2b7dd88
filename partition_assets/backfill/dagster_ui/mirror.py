"""Engine backfills as Dagster backfills: listed in the webserver's Backfills page and
canceled from it.

- `DagsterBackfillMirror` keeps the Dagster backfill of the same id as an engine backfill
  (creating it for one started by the CLI, the Launchpad job or the catch-up sensor) in
  step with the coordinator: its status, and per (asset, partition) requested, succeeded
  ("materialized" on the page) and failed-or-blocked. A *Cancel* clicked in the UI (status
  CANCELING) cancels the engine backfill within `POLL_SECONDS` (longer for large backfills:
  see `_poll`): the mirror sets its record's status (`cancel`, backfill/state/record.py, a
  compare-and-set in the instance), which the coordinator reads.
- `mark_canceled` writes what the mirror writes when its coordinator stops canceled, for
  `partition-assets backfill cancel` whose coordinator may be dead.

Not guaranteed: a node is "materialized" on the Backfills page once its run succeeded; a
staged backfill's partitions become materialized in Dagster's asset status only when it
publishes. A coordinator killed without running its exit leaves its Dagster backfill in
progress until `partition-assets backfill resume <id>` (or `cancel <id>`) is run.
The record is created (or taken over) through `DagsterInstance.add_backfill/update_backfill`;
progress is then written per asset (backfill_body.py) into its row (backfill_row.py), and
the whole record read again only when another process changed its status. The
`PartitionBackfill`/`AssetBackfillData` fields and the serialized form it writes are pinned
in partition_assets_tests/integration/test_dagster_internals.py against the installed Dagster.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Collection, Mapping
from types import TracebackType
from typing import TYPE_CHECKING

import dagster as dg

from partition_assets.backfill.dagster_ui.backfill_body import FAILED, MATERIALIZED, REQUESTED, BackfillBody
from partition_assets.backfill.dagster_ui.backfill_row import stored_status, write_if_status
from partition_assets.backfill.dagster_ui.conversion import PartitionSubsets, graph_subset
from partition_assets.backfill.model import BackfillStatus, Node, NodeResult, NodeStatus, RunUnit
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.state.record import BackfillRecord, cancel
from partition_assets.dagster_instance.daemon_filter import ENGINE_TAG, SPARSE
from partition_assets.dagster_internals import (
    AssetGraphSubset,
    BulkActionStatus,
    PartitionBackfill,
    PartitionsSubset,
    serializable_error_info_from_exc_info,
)
from partition_assets.errors import BackfillStateError

if TYPE_CHECKING:
    from partition_assets.dagster_internals import BaseAssetGraph

# How often the mirror writes progress and looks for a cancel clicked in the UI, at most.
POLL_SECONDS = 0.5
# A poll that writes still copies the whole body into the database (its size grows with the
# backfill's assets): the mirror waits this many times a poll's duration before the next, so
# that it takes a bounded share of a CPU however large the backfill.
POLL_IDLE_FACTOR = 9
# The final write is retried when another process changed the status between its read and
# the write (a cancel clicked at that moment); each retry reads the new status first.
_FINAL_WRITE_ATTEMPTS = 3
_log = logging.getLogger(__name__)

# The Dagster status of each engine record status (partition_assets/backfill/state/record.py).
_DAGSTER_STATUS = {
    BackfillStatus.RUNNING: BulkActionStatus.REQUESTED,
    BackfillStatus.PAUSED: BulkActionStatus.REQUESTED,
    BackfillStatus.PUBLISHING: BulkActionStatus.REQUESTED,
    BackfillStatus.CANCELED: BulkActionStatus.CANCELED,
    BackfillStatus.FAILED: BulkActionStatus.COMPLETED_FAILED,
    BackfillStatus.GATE_FAILED: BulkActionStatus.COMPLETED_FAILED,
    BackfillStatus.PUBLISH_REFUSED: BulkActionStatus.COMPLETED_FAILED,
    BackfillStatus.DONE: BulkActionStatus.COMPLETED_SUCCESS,
    BackfillStatus.PUBLISHED: BulkActionStatus.COMPLETED_SUCCESS,
}
_STOPPED = (BulkActionStatus.CANCELING, BulkActionStatus.CANCELED)
# What the mirror tracks per node: launched, succeeded, failed or blocked.
_REQUESTED, _MATERIALIZED, _FAILED = "requested", "materialized", "failed"


class DagsterBackfillMirror:
    """The Dagster backfill `record.id`, kept in step with one coordinator run of the record.

    Creates it when absent (tagged `partition_assets/engine=sparse`, so Dagster's daemon
    leaves it alone); `done` nodes count as materialized from the start. Use as a context
    manager: on exit it writes the final status from the record (FAILED with the error
    when the coordinator raised before deciding one, CANCELED when it was interrupted).

    A tick costs what changed since the last, not the backfill's size: one read of the
    stored status (backfill_row.py), the subsets of the assets that progressed serialized
    (backfill_body.py), and, when something did, one write of the body spliced from the
    serialized subsets of every asset. A tick with nothing new writes nothing. `body` is the
    record's serialized form (its `serialized_subsets` counts what the ticks serialized).
    """

    def __init__(
        self,
        record: BackfillRecord,
        graph: BackfillGraph,
        asset_graph: BaseAssetGraph,
        instance: dg.DagsterInstance,
        done: Collection[Node],
    ) -> None:
        self._record_id = record.id
        self._store = record.store
        self._asset_graph = asset_graph
        self._instance = instance
        self._lock = threading.Lock()
        # Nodes reported since the last tick, per kind.
        self._pending: dict[str, set[Node]] = {_REQUESTED: set(), _MATERIALIZED: set(), _FAILED: set()}
        # Every node reported so far, per kind: each asset's partition keys, and the unpartitioned assets.
        self._keys: dict[str, dict[dg.AssetKey, frozenset[str]]] = {kind: {} for kind in self._pending}
        self._unpartitioned: dict[str, set[dg.AssetKey]] = {kind: set() for kind in self._pending}
        self._subsets = PartitionSubsets()
        self._slices = graph.slices  # the partitions of each asset that progress can report
        self._unwritten = False  # progress merged that the last write attempt did not store
        self._cancel_seen = False
        self._stop = threading.Event()
        existing = instance.get_backfill(record.id)
        if existing is None:
            written = PartitionBackfill.from_asset_graph_subset(
                backfill_id=record.id,
                backfill_timestamp=time.time(),
                tags={**record.spec.tags, ENGINE_TAG: SPARSE},
                dynamic_partitions_store=instance,
                asset_graph_subset=graph_subset(graph, asset_graph, self._subsets),
                title=None,
                description=f"partition-assets backfill {record.id}: {record.spec.describe()}",
                run_config=None,
            )
            instance.add_backfill(written)
        else:  # launched from the UI, or resumed: in progress again, whatever it was
            written = existing._replace(
                status=BulkActionStatus.REQUESTED,
                tags={**existing.tags, ENGINE_TAG: SPARSE},
                backfill_end_timestamp=None,
                error=None,
            )
            instance.update_backfill(written)
        # The record as written, its progress replaced: the frame each write fills in.
        data = written.get_asset_backfill_data(asset_graph)._replace(
            requested_subset=AssetGraphSubset.create_empty_subset(),
            materialized_subset=AssetGraphSubset.create_empty_subset(),
            failed_and_downstream_subset=AssetGraphSubset.create_empty_subset(),
            requested_runs_for_target_roots=True,
        )
        self._frame = written._replace(serialized_asset_backfill_data=None, asset_backfill_data=data)
        self._written_status = written.status
        self.body = BackfillBody(self._frame)
        # Read as they are, not copied: a catch-up's current nodes are runs (planning/node_runs.py).
        self._unwritten = self._merge({_REQUESTED: done, _MATERIALIZED: done, _FAILED: ()})
        self._flush()
        self._thread = threading.Thread(target=self._poll, name=f"dagster-backfill-{record.id}", daemon=True)
        self._thread.start()

    def launched(self, unit: RunUnit) -> None:
        with self._lock:
            self._pending[_REQUESTED].update(Node(unit.asset, p) for p in unit.partitions)

    def finished(self, result: NodeResult) -> None:
        """A skipped node stays requested only, as in Dagster's own backfill (nothing was materialized)."""
        if result.skipped:
            return
        with self._lock:
            self._pending[_MATERIALIZED if result.succeeded else _FAILED].add(result.node)

    def settle(self, status: Mapping[Node, NodeStatus]) -> None:
        """Nodes left blocked behind failed ones count as failed (Dagster's "failed and downstream")."""
        with self._lock:
            self._pending[_FAILED].update(node for node, state in status.items() if state == NodeStatus.BLOCKED)

    def _poll(self) -> None:
        """Ticks until the mirror exits. A tick that fails (SQLite busy under many writers, a
        connection the database server closed as it restarted, Dagster giving up connecting
        while it is down) is logged once, and its progress written by the next tick that
        succeeds: the thread lives as long as its coordinator, or the UI would stay stale."""
        wait = POLL_SECONDS
        failing = False
        while not self._stop.wait(wait):
            started = time.monotonic()
            try:
                self._poll_once()
            except Exception as error:  # whatever failed is tried again; the exit's final write raises
                wait = POLL_SECONDS  # not in proportion to a tick that waited for a server away
                if not failing:
                    _log.warning(
                        "backfill %s: its Dagster backfill was not updated (%s: %s); retrying at each tick",
                        self._record_id,
                        type(error).__name__,
                        str(error).strip(),
                    )
                failing = True
            else:
                if failing:
                    _log.warning("backfill %s: its Dagster backfill is updated again", self._record_id)
                failing = False
                wait = max(POLL_SECONDS, POLL_IDLE_FACTOR * (time.monotonic() - started))

    def _poll_once(self) -> None:
        stored = stored_status(self._instance, self._record_id)
        if stored == BulkActionStatus.CANCELING and not self._cancel_seen:
            # Cancel in the UI: the coordinator stops launching and cancels its runs in flight.
            self._cancel_seen = True
            try:
                cancel(self._store, self._record_id)
            except BackfillStateError as error:  # publishing already: the cancel comes too late
                _log.warning("backfill %s: the cancel in the UI is ignored: %s", self._record_id, error)
        self._flush(stored=stored)

    def _flush(
        self, status: BulkActionStatus | None = None, error: object = None, stored: BulkActionStatus | None = None
    ) -> bool:
        """Writes the progress reported since the last write, and `status` (final, with the
        end time and `error`) when given; whether nothing is left to write (False: the
        stored status changed between its read and the write, to be written again)."""
        with self._lock:
            pending, self._pending = self._pending, {kind: set() for kind in self._pending}
        self._unwritten |= self._merge(pending)
        if status is None and not self._unwritten:
            return True
        if stored is None:
            stored = stored_status(self._instance, self._record_id)
        if stored is None:  # deleted from the UI meanwhile
            return True
        if stored != self._written_status and not self._adopt():
            return True
        frame = self._frame
        if status is not None:
            frame = frame.with_status(status).with_end_timestamp(time.time())
            if error is not None:
                frame = frame.with_error(error)
        elif stored in _STOPPED:  # a cancel clicked meanwhile is kept
            frame = frame.with_status(stored)
        else:
            frame = frame.with_status(BulkActionStatus.REQUESTED)
        if not write_if_status(self._instance, self._record_id, stored, frame.status, self.body.text(frame)):
            return False
        self._frame, self._written_status, self._unwritten = frame, frame.status, False
        return True

    def _merge(self, pending: Mapping[str, Collection[Node]]) -> bool:
        """Adds the pending nodes to what was reported, and hands the subsets of the assets they
        changed to the body (failed nodes that later succeeded are failed no more); whether
        any changed."""
        grown: dict[str, dict[dg.AssetKey, frozenset[str]]] = {kind: {} for kind in pending}  # asset: keys before
        for kind, nodes in pending.items():
            by_asset: dict[dg.AssetKey, set[str]] = defaultdict(set)
            for node in nodes:
                by_asset[node.asset].add(node.partition)
            known = self._keys[kind]
            for asset, keys in by_asset.items():
                if self._asset_graph.get(asset).partitions_def is None:
                    self._unpartitioned[kind].add(asset)
                else:
                    grown[kind][asset] = known.get(asset, frozenset())
                    known[asset] = grown[kind][asset] | keys
        materialized, failed = self._keys[_MATERIALIZED], self._keys[_FAILED]
        for field, kind in ((REQUESTED, _REQUESTED), (MATERIALIZED, _MATERIALIZED)):
            now = self._keys[kind]
            subsets = {asset: self._subset(asset, now[asset], before) for asset, before in grown[kind].items()}
            self.body.replace(field, subsets)
        still_failed = {
            asset: failed[asset] - materialized.get(asset, frozenset())
            for asset in (grown[_FAILED].keys() | grown[_MATERIALIZED].keys()) & failed.keys()
        }
        self.body.replace(FAILED, {asset: self._subset(asset, keys) for asset, keys in still_failed.items()})
        self.body.replace_unpartitioned(REQUESTED, self._unpartitioned[_REQUESTED])
        self.body.replace_unpartitioned(MATERIALIZED, self._unpartitioned[_MATERIALIZED])
        self.body.replace_unpartitioned(FAILED, self._unpartitioned[_FAILED] - self._unpartitioned[_MATERIALIZED])
        return any(pending.values())

    def _subset(
        self, asset: dg.AssetKey, keys: frozenset[str], grown_from: frozenset[str] = frozenset()
    ) -> PartitionsSubset:
        partitions_def = self._asset_graph.get(asset).partitions_def
        assert partitions_def is not None  # only partitioned assets' keys are kept
        return self._subsets.of(partitions_def, keys, grown_from, self._slices.get(asset))

    def _adopt(self) -> bool:
        """Takes the fields another process wrote (a cancel from the UI or the CLI: status,
        end time, error) into the frame, its progress kept; False when it is gone."""
        stored = self._instance.get_backfill(self._record_id)
        if stored is None:
            return False
        progress = self._frame.asset_backfill_data
        self._frame = stored._replace(serialized_asset_backfill_data=None, asset_backfill_data=progress)
        self._written_status = stored.status
        return True

    def __enter__(self) -> DagsterBackfillMirror:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        # A record not saved yet: the coordinator stopped before its first node.
        saved = self._store.exists(self._record_id)
        status = _DAGSTER_STATUS.get(self._store.status(self._record_id) if saved else BackfillStatus.RUNNING)
        error = serializable_error_info_from_exc_info(sys.exc_info()) if exc is not None else None
        if exc is not None and not isinstance(exc, Exception):
            status = BulkActionStatus.CANCELED  # interrupted: the Launchpad job's run terminated, Ctrl-C
        elif exc is not None and status == BulkActionStatus.REQUESTED:
            status = BulkActionStatus.FAILED  # the coordinator stopped before deciding: `backfill resume`
        if status == BulkActionStatus.REQUESTED:  # still publishing elsewhere: leave it in progress
            status = None
        for _ in range(_FINAL_WRITE_ATTEMPTS):
            if self._flush(status, error):
                break


def mark_canceled(instance: dg.DagsterInstance, backfill_id: str) -> None:
    """The Dagster backfill `backfill_id`, if any and not finished, is canceled."""
    backfill = instance.get_backfill(backfill_id)
    if backfill is not None and backfill.status in (BulkActionStatus.REQUESTED, BulkActionStatus.CANCELING):
        # An error read with it is the instance's note of a silent coordinator (backfill/dagster_ui/silence.py),
        # true no more once it is canceled: not written.
        canceled = backfill._replace(error=None).with_status(BulkActionStatus.CANCELED)
        instance.update_backfill(canceled.with_end_timestamp(time.time()))
