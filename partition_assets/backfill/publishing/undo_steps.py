"""Undoing a staged backfill: discard (its staged data, before it publishes) and the
commits of a rollback (one per table restoring what it published, downstream first; a
publish stopped part-way is rolled back for the tables it committed). What follows a
rollback's commits (Dagster's records, the ledger, the status `rolled_back`) is the
publication's (publication.py).
"""

from __future__ import annotations

import dagster as dg

from partition_assets.backfill.model import BackfillCommand, BackfillStatus
from partition_assets.backfill.publishing import release_steps
from partition_assets.backfill.publishing.freeze import unfreeze
from partition_assets.backfill.publishing.ledger_writes import append_status
from partition_assets.backfill.publishing.publish_step import describe_versions, published_versions, unpublished_tables
from partition_assets.backfill.publishing.tables import BackfillTable, Tables
from partition_assets.backfill.state.ledger import Ledger, LedgerStatus
from partition_assets.backfill.state.presence import coordinating
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.status import check_command
from partition_assets.errors import BackfillStateError
from partition_assets.storage.failpoints import failpoint
from partition_assets.storage.leases import held_by, release
from partition_assets.storage.table_format import Capability, requires


def discard(instance: dg.DagsterInstance, record: BackfillRecord, tables: Tables, ledger: Ledger | None) -> int:
    """Deletes the staged data `record`'s backfill holds in `tables`, releases its leases,
    lifts its freeze and appends the ledger's `discarded` rows; returns how many files.
    Also from `publishing` while no table holds its publish commit (a publish killed before
    its first commit, whose moved files a standard vacuum may have deleted: then only
    discard leaves `publishing`; the files it moved are orphans for vacuum).
    Refused (IllegalTransitionError) when its status does not allow it, (BackfillStateError)
    once any table holds its publish commit (its tables' logs say so, whatever the record), and
    (CoordinatorLiveError) while its coordinator is live: see backfill/state/presence.py."""
    check_command(record.id, record.status, BackfillCommand.DISCARD)
    with coordinating(instance, record.id, BackfillCommand.DISCARD):
        unpublished_tables(record, tables)  # brings the publish commits in the tables' logs into the record
        published = published_versions(record)
        if published:
            raise BackfillStateError(
                f"backfill {record.id} is {record.status} (published {describe_versions(published)}): its staged "
                f"data is part of the tables now; use `partition-assets backfill rollback {record.id}` to undo it. "
                "Nothing was deleted."
            )
        files = sum(table.staging_format.discard_staged(table.uri, record.id) for table in tables.values())
        release([lease for table in tables.values() for lease in held_by(table.uri, record.id)])
        unfreeze(instance, record.id)
        record.move_to(BackfillStatus.DISCARDED, BackfillCommand.DISCARD)
        append_status(ledger, record, LedgerStatus.DISCARDED)
    return files


def restore_tables(
    record: BackfillRecord,
    tables: Tables,
    published: list[tuple[BackfillTable, int]],
    lake: str | None,
    force: bool = False,
) -> dict[str, int | None]:
    """Restores each table of `published` (from `check_rollback`) to its content before
    `record`'s backfill, one commit each, in that order, between the rollback's begin and
    release in the release log of `lake` (None: no log), then deletes what a publish stopped
    part-way left staged in `tables`; returns each restored table's new version. `record`
    moves to `rolling_back` first. After a commit that restored a schema, the table is
    checked to read in one schema."""
    record.save()
    record.move_to(BackfillStatus.ROLLING_BACK, BackfillCommand.ROLLBACK)
    release_steps.begin(lake, release_steps.ReleaseOperation.ROLLBACK, record.id, [table for table, _ in published])
    versions = {}
    for table, version in published:
        result = table.staging_format.rollback(table.uri, record.id, version, force=force)
        versions[table.asset.to_user_string()] = result.version
        if result.version is not None:
            table.staging_format.check_one_schema(table.spark_session, table.uri, result.version)
        failpoint("between_rollback_commits")
    release_steps.release(lake, release_steps.ReleaseOperation.ROLLBACK, record.id, tables, versions)
    for table in tables.values():  # what a publish stopped part-way left staged
        table.staging_format.discard_staged(table.uri, record.id)
    return versions


def check_rollback(record: BackfillRecord, tables: Tables, force: bool = False) -> list[tuple[BackfillTable, int]]:
    """The tables to restore, downstream first, with their publish versions read from their
    logs (the publish commits carry the backfill's application transaction), never from the
    record alone; raises what a rollback would refuse, before any table is committed or
    anything written (the record's versions are set in memory only). A backfill stopped
    part-way through its publish (status `publishing`) is rolled back for the tables it committed.

    Raises:
        IllegalTransitionError: The backfill's status does not allow a rollback.
        UnsupportedByFormatError: A table's format lacks `rollback`; nothing was written.
        RollbackError: A table refuses (see StagingFormat.check_rollback); SchemaRollbackError when
            a schema change's table had a partition outside the backfill written since its publish.
    """
    if record.status != BackfillStatus.ROLLBACK_AWAITING_APPROVAL:  # one approved (approval_steps.py) goes on
        check_command(record.id, record.status, BackfillCommand.ROLLBACK)
    unpublished_tables(record, tables)  # the versions the tables' logs hold, whatever the record says
    published = [
        (table, version)
        for table in reversed(list(tables.values()))
        if (version := record.published_versions.get(table.asset.to_user_string())) is not None
    ]
    for table, version in published:
        requires(table.table_format, Capability.ROLLBACK, table.uri, "rewrite the partitions by a new backfill")
        table.staging_format.check_rollback(table.uri, record.id, version, force=force)
    return published
