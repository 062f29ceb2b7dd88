"""A staged backfill as its coordinator holds it: the record, its code location and graph,
the tables it writes and its ledger (passed in: `staged_publication` builds them from the
code location); its leases, freeze and coordinator claim for the duration of a step
(`held`). Each step is a function of its own module that takes only what it reads and
writes (the record, the tables, the ledger, the instance) and returns its result:
statistics (backfill_stats.py), the gate (gate_step.py), discard and the rollback's commits
(undo_steps.py), the ledger's rows (ledger_writes.py) and what Dagster records
(dagster_events.py). The publish is a list of stages walked in order (stages.py: the gate,
the approval, the table commits, the release, Dagster's records, the ledger, the
notification, the status). A retract (`retract`) is a staged backfill whose staging removes
partitions (retract_steps.py), then gated and published as any other; its publish also
wipes its partitions from Dagster's records before its status says `published`.

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
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import dagster as dg

from partition_assets.backfill.model import BackfillCommand, BackfillStatus, Node, OnLease, PublishMode
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.publishing import gate_step, retract_steps, undo_steps
from partition_assets.backfill.publishing.backfill_stats import StatsAhead, TableStats, stats_of
from partition_assets.backfill.publishing.dagster_events import publish_recorded, reflect_rollback
from partition_assets.backfill.publishing.freeze import freeze, unfreeze
from partition_assets.backfill.publishing.lease_queue import leases_when_free
from partition_assets.backfill.publishing.ledger_writes import append_status, latest
from partition_assets.backfill.publishing.notify import BackfillEvent, EventKind, notify
from partition_assets.backfill.publishing.publish_step import published_files
from partition_assets.backfill.publishing.tables import Tables, lake_root, tables_of
from partition_assets.backfill.state.ledger import Ledger, LedgerEntry, LedgerStatus, ledger_uri
from partition_assets.backfill.state.presence import Announcement, coordinating
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.status import FINAL_STATUSES, check_transition
from partition_assets.deploy.versioning import definitions_git_sha
from partition_assets.errors import LeaseLapsedError, PartitionLeasedError
from partition_assets.storage.leases import Heartbeat, Lease, acquire, park, release

_log = logging.getLogger(__name__)


def staged_publication(record: BackfillRecord, definitions: dg.Definitions, graph: BackfillGraph) -> Publication:
    """The publication of `record` over `graph`: the tables its assets' IO managers write
    (tables.py), the ledger and release log of their lake (none when the code location names
    no lake root)."""
    root = lake_root(definitions)
    ledger = Ledger(ledger_uri(root)) if root else None
    return Publication(record, definitions, graph, tables_of(definitions, graph), ledger, root)


@dataclass(frozen=True)
class Retraction:
    """A retract staged and gated (`Publication.retract`): (asset, partition, rows it held) per
    partition it removes, and the gate it evaluated."""

    removed: list[tuple[str, str, int]]
    gate: gate_step.GateOutcome


class Publication:
    """The staged backfill `record` of the code location `definitions` over `graph`, writing
    `tables` (upstream first), recording its rows in `ledger` and its releases in the release
    log of `lake`, the lake's root (None: no ledger, no release log)."""

    def __init__(
        self,
        record: BackfillRecord,
        definitions: dg.Definitions,
        graph: BackfillGraph,
        tables: Tables,
        ledger: Ledger | None,
        lake: str | None,
    ) -> None:
        self.record = record
        self.definitions = definitions
        self.graph = graph
        self.tables = tables
        self.ledger = ledger
        self.lake = lake
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
        before it takes the leases (backfill/publishing/approval_steps.py). A block that
        ends with an error (a publish refused by a foreign commit, an interrupt) leaves the
        leases as the status it left requires (`settle_leases`), never to lapse with their
        heartbeat while staged data waits for them."""
        taken = self._leases_for(action)
        freeze(instance, self.graph.assets, self.record.id)
        try:
            with Heartbeat(taken) as heartbeat:
                self._held = (heartbeat, announcement)
                yield taken
        except BaseException:
            self.settle_leases(taken)
            raise
        finally:
            self._held = None
            unfreeze(instance, self.record.id)

    def settle_leases(self, leases: list[Lease]) -> None:
        """Leaves `leases` as the backfill's status requires once a step stops: released when
        the backfill is final or publishes per node, else parked (its staged data keeps its
        partitions leased until it is published, resumed or discarded). A lease released
        already is left alone."""
        if self.record.status in FINAL_STATUSES or self.record.spec.publish != PublishMode.staged:
            release(leases)
        else:
            park(leases)

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

    def notify(self, kind: EventKind, detail: str = "") -> bool:
        """Tells the notification hook (notify.py); whether it heard it."""
        return notify(self.definitions, BackfillEvent(kind, self.record.id, tuple(self.graph.assets), detail))

    # -- the steps (each in its own module; the publish's are stages.py's) --------------------

    def stats(
        self, old_of_every_table: bool = False, ahead: Mapping[dg.AssetKey, TableStats | None] | None = None
    ) -> list[TableStats]:
        """See backfill_stats.stats_of."""
        return stats_of(self.record, self.tables, old_of_every_table, ahead)

    def stats_ahead(self, done: Iterable[Node]) -> StatsAhead:
        """Each table's statistics computed as soon as its asset's nodes are done (nodes `done` already are)."""
        return StatsAhead(self.record, self.tables, self.graph, done)

    def gate(
        self, ahead: Mapping[dg.AssetKey, TableStats | None] | None = None, skipped: Collection[Node] = ()
    ) -> gate_step.GateOutcome:
        """See gate_step.gate."""
        return gate_step.gate(self.record, self.tables, self.ledger, ahead, skipped)

    def retract(self) -> Retraction:
        """The steps of a retract before its publish, inside `held`: the removal of the
        partitions its record names (`record.retracted`) staged (retract_steps.stage_removals,
        again when resumed), the gate evaluated on every table's old and new content (each
        removed partition goes to 0 rows: its ledger row says so, with the checks). The gate
        does not stop a retract (rows going to zero are what it asked for); its checks are
        returned to be shown. Then it publishes as any staged backfill, after an approval when
        one is required: the publishing stages (stages.py `publish`) commit its tables and mark its
        partitions not materialized in Dagster (dagster_events.record_retraction) before its status
        says `published`.
        `rollback` undoes it.
        """
        retract_steps.stage_removals(self.record, self.tables, definitions_git_sha(self.definitions))
        stats = self.stats(old_of_every_table=True)
        outcome = self.gate(ahead={table_stats.table.asset: table_stats for table_stats in stats})
        return Retraction(retract_steps.rows_removed(stats), outcome)

    def discard(self, instance: dg.DagsterInstance) -> int:
        """See undo_steps.discard."""
        return undo_steps.discard(instance, self.record, self.tables, self.ledger)

    def check_rollback(self, force: bool = False) -> None:
        """See undo_steps.check_rollback."""
        undo_steps.check_rollback(self.record, self.tables, force)

    def rollback(self, instance: dg.DagsterInstance, force: bool = False) -> dict[str, int | None]:
        """Restores every table the backfill published, downstream first, one commit per table
        (undo_steps.check_rollback says what is refused, before any commit; then
        undo_steps.restore_tables), then records Dagster's view of the old content
        (dagster_events.reflect_rollback, when the publish was recorded), the ledger's
        `rolled_back` rows and the status `rolled_back`; returns the restored versions.
        Idempotent like the publish."""
        published = undo_steps.check_rollback(self.record, self.tables, force)
        versions = undo_steps.restore_tables(self.record, self.tables, published, self.lake, force)
        if publish_recorded(instance, self.record.id):
            reflect_rollback(instance, self.record, self.graph, self.tables)
        append_status(self.ledger, self.record, LedgerStatus.ROLLED_BACK)
        self.record.move_to(BackfillStatus.ROLLED_BACK, BackfillCommand.ROLLBACK)
        self.notify("rolled_back", f"{len(versions)} tables restored")
        return versions

    def ledger_entries(self) -> list[LedgerEntry]:
        """The newest ledger row of each (asset, partition) the backfill touched."""
        return latest(self.ledger, self.record.id)
