"""What a staged backfill does around its node runs: leases, the validation gate,
the ledger, one publish per table, discard and rollback.

Every step is resumable: its progress is in the backfill's record (status, the
fingerprints its leases took, the table versions it published) and each table
commit carries the backfill's application transaction, so a coordinator killed
anywhere is finished by `resume` without running a node or committing a table twice.
Every step runs as the backfill's one coordinator (backfill/state/presence.py): discard,
publish, rollback and resume are refused while another process coordinates it.

Publishing checks every table for commits made outside the backfill before it commits
the first, so such a commit found then publishes nothing. One landing between that
check and its table's commit stops the publish there (PartiallyPublishedError names
what was and was not published); `rollback` then restores the published tables.

Not guaranteed: tables are committed one after the other, upstream first, so for
the moments between the first and the last table commit a reader joining two
tables can see one published and the other not (each table on its own is old or
new, never a mix); after a foreign commit stops a publish part-way, that lasts until
it is finished or rolled back. The ledger is appended after the commits; a coordinator killed
in between appends it again on resume (`Ledger.latest` shows the newest row).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

import dagster as dg

from partition_assets.backfill.planning.graph import BackfillGraph, Node
from partition_assets.backfill.publishing.freeze import freeze, unfreeze
from partition_assets.backfill.publishing.gate import Gate, GateCheck, apply_overrides, evaluate, gate_of
from partition_assets.backfill.publishing.notify import BackfillEvent, EventKind, notify
from partition_assets.backfill.publishing.stats import PartitionStats, partition_stats
from partition_assets.backfill.publishing.tables import BackfillTable, lake_root, tables_of, unstaged_assets
from partition_assets.backfill.running.scheduling import NodeResult, NodeStatus
from partition_assets.backfill.state.ledger import Ledger, LedgerEntry, LedgerStatus, ledger_uri
from partition_assets.backfill.state.presence import Announcement, coordinating
from partition_assets.backfill.state.record import BackfillRecord, node_states
from partition_assets.deploy.runtime import RUNTIME_METADATA
from partition_assets.deploy.versioning import GIT_SHA_METADATA, GIT_SHA_TAG, definitions_git_sha
from partition_assets.errors import (
    BackfillStateError,
    ForeignCommitError,
    LeaseLapsedError,
    PartiallyPublishedError,
    PartitionAssetsError,
)
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets.storage.backfill_staging import StagedTable
from partition_assets.storage.failpoints import failpoint
from partition_assets.storage.io_manager import INPUT_VERSIONS_METADATA, INPUTS_AS_OF_METADATA, RUN_ID_METADATA
from partition_assets.storage.leases import Heartbeat, Lease, acquire, held_by, release
from partition_assets.storage.partition_scope import PartitionScope


@dataclass(frozen=True)
class TableStats:
    """The old (published) and new (staged) content of a table's rewritten partitions."""

    table: BackfillTable
    partitions: frozenset[tuple[str, ...]]  # every partition the backfill staged, emptied ones too
    old: dict[tuple[str, ...], PartitionStats]  # {} when not asked for (a table without a gate)
    new: dict[tuple[str, ...], PartitionStats]
    # per partition, the commit metadata of its staging: run id, input versions, git SHA
    provenance: Mapping[tuple[str, ...], Mapping[str, str]]


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

    # -- leases and freeze -------------------------------------------------------------

    def take_leases(self) -> list[Lease]:
        """Leases on every partition the backfill writes; the first time, also the
        fingerprint of their published files, which publishing checks."""
        leases = [acquire(table.uri, self.record.id, "backfill", table.scope) for table in self.tables.values()]
        if not self.record.fingerprints:
            self.record.fingerprints = {
                table.asset.to_user_string(): _fingerprint(table) for table in self.tables.values()
            }
            self.record.save()
        return leases

    @contextmanager
    def held(self, instance: dg.DagsterInstance, action: str = "run") -> Iterator[list[Lease]]:
        """This process as the backfill's coordinator (refused with CoordinatorLiveError
        while another is live: see backfill/state/presence.py), its leases (kept alive by a
        heartbeat) and its assets frozen, for the duration of `action`; the freeze is
        lifted however the block ends. The caller releases or parks the leases; if it
        dies, they expire with their heartbeat. `check_held` says whether they lapsed."""
        with coordinating(instance, self.record.id, action) as announcement:
            taken = self.take_leases()
            freeze(instance, self.graph.assets, self.record.id)
            try:
                with Heartbeat(taken) as heartbeat:
                    self._held = (heartbeat, announcement)
                    yield taken
            finally:
                self._held = None
                unfreeze(instance, self.record.id)

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

    def notify(self, kind: EventKind, detail: str = "") -> None:
        notify(self.definitions, BackfillEvent(kind, self.record.id, tuple(self.graph.assets), detail))

    # -- gate --------------------------------------------------------------------------

    def stats(
        self, old_of_every_table: bool = False, ahead: Mapping[dg.AssetKey, TableStats | None] | None = None
    ) -> list[TableStats]:
        """New stats of every partition the backfill staged, table by table, and old ones
        for the tables with a gate (for every table with `old_of_every_table`); tables in
        `ahead` (see `StatsAhead`) are not read again. Tables are read concurrently:
        each is a small Spark job, dominated by its round trips."""
        ahead = ahead or {}
        with ThreadPoolExecutor(max_workers=_STATS_THREADS) as pool:
            futures = [
                pool.submit(self.table_stats, table, old_of_every_table)
                for table in self.tables.values()
                if table.asset not in ahead
            ]
            computed = [future.result() for future in futures]
        return [stats for stats in [*ahead.values(), *computed] if stats is not None]

    def table_stats(self, table: BackfillTable, with_old: bool = False) -> TableStats | None:
        """The table's stats (see `stats`); None when the backfill staged nothing there."""
        staged = table.staging_format.staged(table.uri, self.record.id)
        return None if staged is None else self._table_stats(table, staged, with_old)

    def _table_stats(self, table: BackfillTable, staged: StagedTable, with_old: bool) -> TableStats:
        partitions = frozenset(staged.files_by_partition)
        gate = self._gate(table)
        measures = tuple(gate.measures) if gate else ()
        keys = tuple(gate.keys) if gate else ()
        scope = None if table.partitions_def is None else PartitionScope(table.columns, partitions)
        spark = table.spark.spark_session
        new_frame = table.staging_format.read_overlay(spark, table.uri, scope, self.record.id)
        new = partition_stats(new_frame, table.columns, measures, keys) if new_frame is not None else {}
        old = {}
        if with_old or gate is not None:
            old_frame = table.table_format.read(spark, table.uri, scope)
            old = partition_stats(old_frame, table.columns, measures, keys) if old_frame is not None else {}
        return TableStats(table, partitions, old, new, staged.metadata_by_partition)

    def gate(
        self, instance: dg.DagsterInstance, ahead: Mapping[dg.AssetKey, TableStats | None] | None = None
    ) -> list[GateCheck]:
        """Evaluates every table's gate on the staged data and records the ledger's
        `staged` (or `gate_failed`) rows; returns the checks (failed ones included).
        Stats already computed `ahead` (while other nodes ran) are used as they are."""
        failpoint("gating")
        all_stats = self.stats(ahead=ahead)
        checks = [
            check
            for stats in all_stats
            if (gate := self._gate(stats.table)) is not None
            for check in evaluate(stats.table.asset.to_user_string(), gate, stats.old, stats.new)
        ]
        failed = any(not check.passed for check in checks)
        self.record.created = {stats.table.asset.to_user_string(): self._created(stats) for stats in all_stats}
        self.record.save()
        self._record(instance, all_stats, checks, LedgerStatus.GATE_FAILED if failed else LedgerStatus.STAGED)
        return checks

    def _created(self, stats: TableStats) -> list[str]:
        """The partitions the backfill writes that held no file when it started."""
        before = _as_files(self.record.fingerprints.get(stats.table.asset.to_user_string())) or {}
        return [stats.table.partition_key(row) for row in sorted(stats.partitions) if not before.get(row)]

    def _gate(self, table: BackfillTable) -> Gate | None:
        return apply_overrides(gate_of(table.metadata), table.asset.to_user_string(), self.record.spec.gate)

    # -- publish -----------------------------------------------------------------------

    def publish(self, instance: dg.DagsterInstance, force: bool = False) -> dict[str, int | None]:
        """Commits every table's staged partitions, upstream first, each in one commit;
        then records the materializations in one publish run and the ledger's rows.

        Before the first commit, every table still to publish is checked for commits made
        outside the backfill to its partitions since it started (unless `force`): any is a
        ForeignCommitError naming them all, status `publish_refused`, nothing committed.
        A foreign commit landing after that check stops the publish at its table:
        PartiallyPublishedError names the tables published and those not (status stays
        `publishing`; `rollback` undoes the published ones, `publish --force` finishes).
        Idempotent: tables already committed are not committed again."""
        pending = self._unpublished_tables()
        if not force:
            self._check_unchanged(pending)
        self.record.status = "publishing"
        self.record.save()
        for table in pending:
            fingerprint = None if force else self._fingerprint_of(table)
            try:
                result = table.staging_format.publish_staged(
                    table.uri, self.record.id, fingerprint, {BACKFILL_ID_TAG: self.record.id}
                )
            except ForeignCommitError as error:
                raise self._partially_published(table, error) from None
            self.record.published_versions[table.asset.to_user_string()] = result.version
            self.record.save()
            failpoint("between_table_commits")
        self._record_materializations(instance)
        self._append_ledger_status(LedgerStatus.PUBLISHED)
        self.record.status = "published"
        self.record.save()
        self.notify("published", f"{len(self.tables)} tables")
        return dict(self.record.published_versions)

    def _unpublished_tables(self) -> list[BackfillTable]:
        """The tables whose publish commit is not in their log, with staged data; the tables
        already published get their version into the record (a coordinator may die between
        a commit and saving the record: the log, not the record, is the truth)."""
        pending = []
        for table in self.tables.values():
            version = table.staging_format.published_version(table.uri, self.record.id)
            if version is not None:
                self.record.published_versions[table.asset.to_user_string()] = version
            elif table.staging_format.staged(table.uri, self.record.id) is not None:
                pending.append(table)
        return pending

    def _fingerprint_of(self, table: BackfillTable) -> dict[tuple[str, ...], frozenset[str]]:
        return _as_files(self.record.fingerprints.get(table.asset.to_user_string())) or {}

    def _check_unchanged(self, pending: Sequence[BackfillTable]) -> None:
        refusals = []
        for table in pending:
            try:
                table.staging_format.check_publish(table.uri, self.record.id, self._fingerprint_of(table))
            except ForeignCommitError as error:
                refusals.append(str(error))
        if not refusals:
            return
        published = self._published()
        if not published:
            self.record.status = "publish_refused"
            self.record.save()
            raise ForeignCommitError(
                f"backfill {self.record.id}: nothing was published, as commits outside the backfill changed "
                f"partitions it rewrites: {' '.join(refusals)}"
            )
        raise self._partially_published(pending[0], ForeignCommitError(" ".join(refusals)))

    def _published(self) -> dict[str, int | None]:
        return {asset: version for asset, version in self.record.published_versions.items() if version is not None}

    def _partially_published(self, stopped_at: BackfillTable, cause: ForeignCommitError) -> PartitionAssetsError:
        """What a publish stopped by a foreign commit at `stopped_at` left: nothing (a
        ForeignCommitError), or some tables published (PartiallyPublishedError)."""
        published = self._published()
        if not published:
            return cause
        names = list(self.tables)
        left = [
            asset.to_user_string()
            for asset in names[names.index(stopped_at.asset) :]
            if asset.to_user_string() not in published
        ]
        bid = self.record.id
        return PartiallyPublishedError(
            f"backfill {bid} stopped publishing part-way: published {describe_versions(published)}; not published: "
            f"{', '.join(left)}. {cause} Readers see the new content of the published tables beside the old "
            f"content of the others until you either finish with `partition-assets backfill publish {bid} "
            f"--force` (overwrites the commit made outside the backfill) or undo with `partition-assets backfill "
            f"rollback {bid}` (restores the published tables and deletes the rest of the staged data)."
        )

    def _record_materializations(self, instance: dg.DagsterInstance) -> None:
        """One run in the instance recording a materialization of every node the backfill
        ran, now that readers can see them: the metadata its IO manager gave the staged
        output, the table version published, the asset's code version. Skipped when an
        earlier publish run of the backfill succeeded."""
        if self._publish_recorded(instance):
            return
        tags = {BACKFILL_ID_TAG: self.record.id, PUBLISH_RUN_TAG: "true"}
        sha = definitions_git_sha(self.definitions)
        asset_graph = self.definitions.resolve_asset_graph()
        states = node_states(instance, self.record.id, self.graph)
        ledger_rows = {(entry.asset, entry.partition): entry for entry in self._latest()}
        foreign = set(unstaged_assets(self.definitions, self.graph))
        events = []
        for node in self._ran(instance):
            asset = node.asset.to_user_string()
            metadata: dict[str, dg.RawMetadataValue] = {"backfill_id": self.record.id}
            if node.asset in foreign:  # what its own IO manager said of the output
                metadata.update(_handled_output_metadata(instance, states[node][1].run_id, node.asset))
            entry = ledger_rows.get((asset, node.partition))
            if entry is not None:
                table = self.tables[node.asset]
                metadata.update(_entry_metadata(entry, table.uri, self.record.published_versions.get(asset)))
            code_version = asset_graph.get(node.asset).code_version
            events.append(
                dg.AssetMaterialization(
                    node.asset,
                    partition=node.partition or None,
                    metadata=metadata,
                    tags={CODE_VERSION_TAG: code_version} if code_version else None,
                )
            )
        if sha:
            tags[GIT_SHA_TAG] = sha
        _run_reporting(instance, events, tags, "partition_assets_publish")

    def _publish_recorded(self, instance: dg.DagsterInstance) -> bool:
        """Whether a publish run of the backfill recorded its materializations in Dagster."""
        tags = {BACKFILL_ID_TAG: self.record.id, PUBLISH_RUN_TAG: "true"}
        return bool(instance.get_runs(dg.RunsFilter(tags=tags, statuses=[dg.DagsterRunStatus.SUCCESS]), limit=1))

    # -- discard and rollback ----------------------------------------------------------

    def discard(self, instance: dg.DagsterInstance) -> int:
        """Deletes the backfill's staged data and lifts its freeze; returns how many files.
        Refused (BackfillStateError) once any table holds its publish commit, and
        (CoordinatorLiveError) while its coordinator is live: see backfill/state/presence.py."""
        with coordinating(instance, self.record.id, "discard"):
            self._unpublished_tables()  # brings the publish commits in the tables' logs into the record
            published = self._published()
            if self.record.status in ("published", "rolled_back", "rolling_back") or published:
                raise BackfillStateError(
                    f"backfill {self.record.id} is {self.record.status}"
                    + (f" (published {describe_versions(published)})" if published else "")
                    + ": its staged data is part of the tables now; use "
                    f"`partition-assets backfill rollback {self.record.id}` to undo it. Nothing was deleted."
                )
            files = sum(t.staging_format.discard_staged(t.uri, self.record.id) for t in self.tables.values())
            release([lease for t in self.tables.values() for lease in held_by(t.uri, self.record.id)])
            unfreeze(instance, self.record.id)
            self._append_ledger_status(LedgerStatus.DISCARDED)
            self.record.status = "discarded"
            self.record.save()
        return files

    def rollback(self, instance: dg.DagsterInstance, force: bool = False) -> dict[str, int | None]:
        """Restores every table the backfill published to its content before, downstream
        first, one commit per table; idempotent like publish. A backfill stopped part-way
        through its publish (status `publishing`) is rolled back for the tables it
        committed, and the rest of its staged data is deleted."""
        if self.record.status == "publishing":
            self._unpublished_tables()  # the versions its log holds, also those the record missed
        if self.record.status not in ("published", "publishing", "rolling_back"):
            raise BackfillStateError(
                f"backfill {self.record.id} is {self.record.status}, not published: there is nothing to roll "
                "back"
                + (f"; discard its staged data with `backfill discard {self.record.id}`" if self._staged() else "")
            )
        published = [
            (table, version)
            for table in reversed(list(self.tables.values()))
            if (version := self.record.published_versions.get(table.asset.to_user_string())) is not None
        ]
        for table, version in published:  # refuse before committing any table
            table.staging_format.check_rollback(table.uri, self.record.id, version, force=force)
        self.record.status = "rolling_back"
        self.record.save()
        versions = {}
        for table, version in published:
            result = table.staging_format.rollback(table.uri, self.record.id, version, force=force)
            versions[table.asset.to_user_string()] = result.version
            failpoint("between_rollback_commits")
        for table in self.tables.values():  # what a publish stopped part-way left staged
            table.staging_format.discard_staged(table.uri, self.record.id)
        if self._publish_recorded(instance):
            self._reflect_rollback(instance)
        self._append_ledger_status(LedgerStatus.ROLLED_BACK)
        self.record.status = "rolled_back"
        self.record.save()
        self.notify("rolled_back", f"{len(versions)} tables restored")
        return versions

    def _ran(self, instance: dg.DagsterInstance) -> list[Node]:
        """The nodes a run of this backfill succeeded on, in graph order: not those a
        catch-up left alone because they were current."""
        succeeded = {
            node
            for node, (state, _) in node_states(instance, self.record.id, self.graph).items()
            if state == NodeStatus.SUCCEEDED
        }
        return [node for node in self.graph.nodes() if node in succeeded]

    def _staged(self) -> bool:
        return any(t.staging_format.staged(t.uri, self.record.id) for t in self.tables.values())

    def _reflect_rollback(self, instance: dg.DagsterInstance) -> None:
        """Dagster's view after a rollback: each restored partition gets a materialization
        of its old content; each partition the backfill created is wiped (missing again)
        where the instance's event log can wipe partitions, else gets an observation
        saying the rollback removed it (Dagster 1.13's SQL event logs cannot wipe one
        partition: NotImplementedError)."""
        created = {(asset, partition) for asset, partitions in self.record.created.items() for partition in partitions}
        events: list[dg.AssetMaterialization | dg.AssetObservation] = [
            dg.AssetMaterialization(
                node.asset, partition=node.partition or None, metadata={"rolled_back_backfill_id": self.record.id}
            )
            for node in self._ran(instance)
            if (node.asset.to_user_string(), node.partition) not in created
        ]
        for asset, partitions in _by_asset(created).items():
            key = dg.AssetKey.from_user_string(asset)
            try:
                instance.wipe_asset_partitions(key, partitions)
            except NotImplementedError:
                events += [
                    dg.AssetObservation(key, partition=p, metadata={"removed_by_rollback_of": self.record.id})
                    for p in partitions
                ]
        _run_reporting(instance, events, {BACKFILL_ID_TAG: self.record.id}, "partition_assets_rollback")

    # -- ledger ------------------------------------------------------------------------

    def _record(
        self, instance: dg.DagsterInstance, all_stats: list[TableStats], checks: list[GateCheck], status: LedgerStatus
    ) -> None:
        if self.ledger is None:
            return
        checks_by_partition: dict[tuple[str, tuple[str, ...]], list[dict]] = {}
        for check in checks:
            checks_by_partition.setdefault((check.asset, check.partition), []).append(check.to_json())
        now = datetime.now(UTC)  # bookkeeping time of the ledger row, not asset logic
        entries = []
        for stats in all_stats:
            table = stats.table
            asset = table.asset.to_user_string()
            for row in sorted(stats.partitions):
                partition = table.partition_key(row)
                provenance = stats.provenance.get(row, {})
                new = stats.new.get(row)
                entries.append(
                    LedgerEntry(
                        backfill_id=self.record.id,
                        asset=asset,
                        partition=partition,
                        run_id=provenance.get(RUN_ID_METADATA),
                        git_sha=provenance.get(GIT_SHA_METADATA),
                        rows=new.rows if new else 0,
                        checksum=new.checksum if new else None,
                        input_versions=json.loads(provenance.get(INPUT_VERSIONS_METADATA, "{}")),
                        inputs_as_of=self.record.spec.inputs_as_of,
                        runtime=json.loads(provenance.get(RUNTIME_METADATA, "{}")),
                        published_version=None,
                        gate=checks_by_partition.get((asset, row), []),
                        status=status,
                        recorded_at=now,
                    )
                )
        self.ledger.append(entries)

    def ledger_entries(self) -> list[LedgerEntry]:
        """The newest ledger row of each (asset, partition) the backfill touched."""
        return self._latest()

    def _latest(self) -> list[LedgerEntry]:
        return self.ledger.latest(self.record.id) if self.ledger else []

    def _append_ledger_status(self, status: LedgerStatus) -> None:
        """The latest ledger rows again, with `status` and the table version now published."""
        if self.ledger is None:
            return
        now = datetime.now(UTC)  # bookkeeping time of the ledger row, not asset logic
        entries = [
            dataclasses.replace(
                entry,
                status=status,
                recorded_at=now,
                published_version=self.record.published_versions.get(entry.asset)
                if status == LedgerStatus.PUBLISHED
                else entry.published_version,
            )
            for entry in self._latest()
        ]
        if entries:
            self.ledger.append(entries)


class StatsAhead:
    """Computes a table's gate stats as soon as every node of its asset has succeeded,
    while the backfill's other nodes still run, so that the gate after the last node
    reads only the tables that finished last. One table at a time, beside the runs."""

    def __init__(self, publication: Publication, done: Iterable[Node]) -> None:
        self._publication = publication
        self._remaining = Counter(node.asset for node in publication.graph.nodes())
        self._remaining.subtract(node.asset for node in done)
        self._pool = ThreadPoolExecutor(max_workers=1)
        self._futures: dict[dg.AssetKey, Future] = {}
        for asset in publication.tables:
            self._submit_when_done(asset)

    def finished(self, result: NodeResult) -> None:
        """Counts a node's result; its table's stats start once its asset has no node left."""
        if result.succeeded:
            self._remaining[result.node.asset] -= 1
            self._submit_when_done(result.node.asset)

    def results(self) -> dict[dg.AssetKey, TableStats | None]:
        """The stats computed so far (waiting for those under way)."""
        return {asset: future.result() for asset, future in self._futures.items()}

    def close(self) -> None:
        """Drops what has not started and waits for what has (one table's Spark job)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _submit_when_done(self, asset: dg.AssetKey) -> None:
        table = self._publication.tables.get(asset)
        if table is not None and self._remaining[asset] <= 0 and asset not in self._futures:
            self._futures[asset] = self._pool.submit(self._publication.table_stats, table)


def describe_versions(versions: Mapping[str, int | None]) -> str:
    """Table versions as text: `a v3, b v7` ("no tables" when none)."""
    return ", ".join(f"{asset} v{version}" for asset, version in versions.items()) or "no tables"


PUBLISH_RUN_TAG = "partition_assets/publish_run"
_STATS_THREADS = 4
CODE_VERSION_TAG = "dagster/code_version"


def _by_asset(keys: set[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for asset, partition in sorted(keys):
        grouped.setdefault(asset, []).append(partition)
    return grouped


def _fingerprint(table: BackfillTable) -> dict[str, list[str]]:
    """The published files of each partition the backfill writes, keyed by the JSON
    list of the partition's column values (a JSON object needs text keys)."""
    files = table.staging_format.partition_files(table.uri, table.scope)
    return {json.dumps(list(row)): sorted(paths) for row, paths in files.items()}


def _as_files(fingerprint: Mapping[str, list[str]] | None) -> dict[tuple[str, ...], frozenset[str]] | None:
    if fingerprint is None:
        return None
    return {tuple(json.loads(key)): frozenset(paths) for key, paths in fingerprint.items()}


def _entry_metadata(entry: LedgerEntry, table_uri: str, version: int | None) -> dict[str, dg.RawMetadataValue]:
    """A published partition's materialization metadata, from its ledger row."""
    metadata: dict[str, dg.RawMetadataValue] = {
        "table_uri": table_uri,
        "rows": entry.rows or 0,
        "checksum": entry.checksum or "",
        INPUT_VERSIONS_METADATA: dg.MetadataValue.json(dict(entry.input_versions)),
        "staged_by_run": entry.run_id or "",
    }
    if entry.inputs_as_of:
        metadata[INPUTS_AS_OF_METADATA] = entry.inputs_as_of
    if entry.runtime:
        metadata[RUNTIME_METADATA] = dg.MetadataValue.json(dict(entry.runtime))
    if entry.git_sha:
        metadata[GIT_SHA_METADATA] = entry.git_sha
    if version is not None:
        metadata["delta_version"] = version
    return metadata


def _handled_output_metadata(instance: dg.DagsterInstance, run_id: str, asset: dg.AssetKey) -> dict:
    """The metadata another IO manager gave `asset`'s output in run `run_id`."""
    metadata: dict = {}
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.HANDLED_OUTPUT):
        event = record.dagster_event
        if event is not None and event.asset_key in (None, asset):
            metadata.update(getattr(event.event_specific_data, "metadata", None) or {})
    return metadata


def _run_reporting(
    instance: dg.DagsterInstance,
    events: Sequence[dg.AssetMaterialization | dg.AssetObservation],
    tags: dict[str, str],
    name: str,
) -> None:
    """Records `events` from one in-process run named `name` in `instance`."""

    @dg.op(name=f"{name}_op")
    def report():
        yield from events
        yield dg.Output(None)

    @dg.job(name=name, executor_def=dg.in_process_executor)
    def reporting_job():
        report()

    reporting_job.execute_in_process(instance=instance, tags=tags)
