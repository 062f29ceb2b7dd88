"""A staged backfill as its coordinator holds it: the record, its code location and graph,
the tables it writes and its ledger; its leases, freeze and coordinator claim for the
duration of a step (`held`); and the steps themselves, each in a module of its own:
statistics (backfill_stats.py), the gate (gate_step.py), publish (publish_step.py), discard and
rollback (undo_steps.py), the ledger's rows (ledger_writes.py) and what Dagster records
(dagster_events.py).

Every step is resumable: its progress is in the backfill's record (status, the
fingerprints its leases took, the table versions it published) and each table
commit carries the backfill's application transaction, so a coordinator killed
anywhere is finished by `resume` without running a node or committing a table twice.
Every step runs as the backfill's one coordinator (backfill/state/presence.py): discard,
publish, rollback and resume are refused while another process coordinates it.

Not guaranteed: the ledger is appended after the commits; a coordinator killed in
between appends it again on resume (`Ledger.latest` shows the newest row).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import dagster as dg

from partition_assets.backfill.model import BackfillCommand, BackfillStatus, OnLease
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.publishing import backfill_stats, gate_step, publish_step, undo_steps
from partition_assets.backfill.publishing.backfill_stats import TableStats
from partition_assets.backfill.publishing.freeze import freeze, unfreeze
from partition_assets.backfill.publishing.lease_queue import leases_when_free
from partition_assets.backfill.publishing.ledger_writes import latest
from partition_assets.backfill.publishing.notify import BackfillEvent, EventKind, notify
from partition_assets.backfill.publishing.publish_step import published_files
from partition_assets.backfill.publishing.tables import BackfillTable, lake_root, tables_of
from partition_assets.backfill.state.ledger import Ledger, LedgerEntry, ledger_uri
from partition_assets.backfill.state.presence import Announcement, coordinating
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.status import check_transition
from partition_assets.errors import LeaseLapsedError, PartitionLeasedError
from partition_assets.storage.leases import Heartbeat, Lease, acquire

_log = logging.getLogger(__name__)


class Publication:
    """The staged backfill `record` of the code location `definitions` over `graph`."""

    def __init__(self, record: BackfillRecord, definitions: dg.Definitions, graph: BackfillGraph) -> None:
        self.record = record
        self.definitions = definitions
        self.graph = graph
        self.tables = tables_of(definitions, graph)
        root = lake_root(definitions)
        self.ledger = Ledger(ledger_uri(root)) if root else None
        self._held: tuple[Heartbeat, Announcement] | None = None

    def take_leases(self) -> list[Lease]:
        """Leases on every partition the backfill writes; the first time, also the
        fingerprint of their published files, which publishing checks."""
        leases = [acquire(table.uri, self.record.id, "backfill", table.scope) for table in self.tables.values()]
        if not self.record.fingerprints:
            self.record.fingerprints = {
                table.asset.to_user_string(): published_files(table) for table in self.tables.values()
            }
            self.record.save()
        return leases

    @contextmanager
    def held(
        self,
        instance: dg.DagsterInstance,
        action: BackfillCommand = BackfillCommand.RUN,
        entering: BackfillStatus | None = None,
    ) -> Iterator[list[Lease]]:
        """This process as the backfill's coordinator (refused with CoordinatorLiveError
        while another is live: see backfill/state/presence.py), its leases (kept alive by a
        heartbeat) and its assets frozen, for the duration of `action`; the freeze is
        lifted however the block ends. The caller releases or parks the leases; if it
        dies, they expire with their heartbeat. `check_held` says whether they lapsed.

        Args:
            entering: The status `action` moves a recorded backfill to: once this process is
                its coordinator, the stored status must allow that move (status.py), else
                IllegalTransitionError before any lease is taken, so a refused step leaves
                the leases as they were (parked ones stay parked).

        Raises:
            IllegalTransitionError: The stored status may not become `entering`; nothing was changed.
        """
        with coordinating(instance, self.record.id, action) as announcement:
            if entering is not None and self.record.store.exists(self.record.id):
                check_transition(self.record.id, self.record.stored_status(), entering, action)
            with self.leased(instance, announcement, action) as taken:
                yield taken

    @contextmanager
    def leased(
        self, instance: dg.DagsterInstance, announcement: Announcement, action: BackfillCommand
    ) -> Iterator[list[Lease]]:
        """`held` for a process that claimed the backfill already (`announcement`, from
        `coordinating`): a step that must check and write its record under the claim
        before it takes the leases (backfill/publishing/approval_steps.py)."""
        taken = self._leases_for(action)
        freeze(instance, self.graph.assets, self.record.id)
        try:
            with Heartbeat(taken) as heartbeat:
                self._held = (heartbeat, announcement)
                yield taken
        finally:
            self._held = None
            unfreeze(instance, self.record.id)

    def _leases_for(self, action: BackfillCommand) -> list[Lease]:
        """The leases `take_leases` takes; a run of a backfill that waits for leases
        (`--on-lease wait`) queues until they are free (lease_queue.py)."""
        if action != BackfillCommand.RUN or self.record.spec.on_lease != OnLease.wait:
            return self.take_leases()

        def waiting(refusal: PartitionLeasedError) -> None:
            _log.warning("backfill %s waits for its partitions (--on-lease wait): %s", self.record.id, refusal)

        return leases_when_free(self.take_leases, waiting)

    def check_held(self) -> None:
        """LeaseLapsedError when, inside `held`, a lease lapsed or another process claimed
        the backfill: what the backfill wrote may have been overwritten meanwhile."""
        if self._held is None:
            return
        heartbeat, announcement = self._held
        lapsed = heartbeat.lapsed()
        if not lapsed and not announcement.lost:
            return
        what = (
            f"its leases on {', '.join(sorted({lease.table_uri for lease in lapsed}))} lapsed (no heartbeat "
            f"for {heartbeat.ttl:.0f} s: the coordinator was paused or starved, or the storage unreachable)"
            if lapsed
            else "another process claimed it as its coordinator"
        )
        raise LeaseLapsedError(
            f"backfill {self.record.id}: {what}, so another writer may have written its partitions meanwhile; "
            f"nothing was published. `partition-assets backfill resume {self.record.id}` takes the leases "
            "again and checks the tables for commits made outside the backfill before publishing."
        )

    def gone_spark_server(self) -> str | None:
        """The URL of a Spark Connect server its tables are read and written with that no longer
        listens (see SparkResource.gone_server); None when every one does."""
        servers = {table.spark.connect_url(): table.spark for table in self.tables.values()}
        return next((url for spark in servers.values() if (url := spark.gone_server()) is not None), None)

    def notify(self, kind: EventKind, detail: str = "") -> None:
        notify(self.definitions, BackfillEvent(kind, self.record.id, tuple(self.graph.assets), detail))

    # -- the steps (each in its own module) ------------------------------------------------

    def stats(
        self, old_of_every_table: bool = False, ahead: Mapping[dg.AssetKey, TableStats | None] | None = None
    ) -> list[TableStats]:
        """See backfill_stats.stats_of."""
        return backfill_stats.stats_of(self, old_of_every_table, ahead)

    def table_stats(self, table: BackfillTable, with_old: bool = False) -> TableStats | None:
        """See backfill_stats.table_stats."""
        return backfill_stats.table_stats(self, table, with_old)

    def gate(
        self, instance: dg.DagsterInstance, ahead: Mapping[dg.AssetKey, TableStats | None] | None = None
    ) -> gate_step.GateOutcome:
        """See gate_step.gate."""
        return gate_step.gate(self, instance, ahead)

    def publish(self, instance: dg.DagsterInstance, force: bool = False) -> dict[str, int | None]:
        """See publish_step.publish."""
        return publish_step.publish(self, instance, force)

    def discard(self, instance: dg.DagsterInstance) -> int:
        """See undo_steps.discard."""
        return undo_steps.discard(self, instance)

    def rollback(self, instance: dg.DagsterInstance, force: bool = False) -> dict[str, int | None]:
        """See undo_steps.rollback."""
        return undo_steps.rollback(self, instance, force)

    def check_rollback(self, force: bool = False) -> None:
        """See undo_steps.check_rollback."""
        undo_steps.check_rollback(self, force)

    def ledger_entries(self) -> list[LedgerEntry]:
        """The newest ledger row of each (asset, partition) the backfill touched."""
        return latest(self)
