"""Undoing a staged backfill: discard (its staged data, before it publishes) and
rollback (one commit per table restoring what it published, downstream first; a
publish stopped part-way is rolled back for the tables it committed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

from partition_assets.backfill.model import BackfillCommand
from partition_assets.backfill.publishing import release_steps
from partition_assets.backfill.publishing.dagster_events import publish_recorded, reflect_rollback
from partition_assets.backfill.publishing.freeze import unfreeze
from partition_assets.backfill.publishing.ledger_writes import append_status
from partition_assets.backfill.publishing.publish_step import describe_versions, published_versions, unpublished_tables
from partition_assets.backfill.publishing.tables import BackfillTable
from partition_assets.backfill.state.ledger import LedgerStatus
from partition_assets.backfill.state.presence import coordinating
from partition_assets.backfill.state.status import BackfillStatus, check_command
from partition_assets.errors import BackfillStateError
from partition_assets.storage.failpoints import failpoint
from partition_assets.storage.leases import held_by, release

if TYPE_CHECKING:
    from partition_assets.backfill.publishing.publication import Publication


def discard(publication: Publication, instance: dg.DagsterInstance) -> int:
    """Deletes the backfill's staged data and lifts its freeze; returns how many files.
    Also from `publishing` while no table holds its publish commit (a publish killed before
    its first commit, whose moved files a standard vacuum may have deleted: then only
    discard leaves `publishing`; the files it moved are orphans for vacuum).
    Refused (IllegalTransitionError) when its status does not allow it, (BackfillStateError)
    once any table holds its publish commit (its tables' logs say so, whatever the record), and
    (CoordinatorLiveError) while its coordinator is live: see backfill/state/presence.py."""
    check_command(publication.record.id, publication.record.status, BackfillCommand.DISCARD)
    with coordinating(instance, publication.record.id, BackfillCommand.DISCARD):
        unpublished_tables(publication)  # brings the publish commits in the tables' logs into the record
        published = published_versions(publication)
        if published:
            raise BackfillStateError(
                f"backfill {publication.record.id} is {publication.record.status}"
                + f" (published {describe_versions(published)})"
                + ": its staged data is part of the tables now; use "
                f"`partition-assets backfill rollback {publication.record.id}` to undo it. Nothing was deleted."
            )
        files = sum(t.staging_format.discard_staged(t.uri, publication.record.id) for t in publication.tables.values())
        release([lease for t in publication.tables.values() for lease in held_by(t.uri, publication.record.id)])
        unfreeze(instance, publication.record.id)
        publication.record.move_to(BackfillStatus.DISCARDED, "discard")
        append_status(publication, LedgerStatus.DISCARDED)
    return files


def rollback(publication: Publication, instance: dg.DagsterInstance, force: bool = False) -> dict[str, int | None]:
    """Restores every table the backfill published to its content before, downstream
    first, one commit per table; idempotent like publish. The tables and versions to
    restore are read from the tables' logs (the publish commits carry the backfill's
    application transaction), never from the record alone. A backfill stopped part-way
    through its publish (status `publishing`) is rolled back for the tables it
    committed, and the rest of its staged data is deleted. Every table is checked before
    any is committed: a refusal (RollbackError; SchemaRollbackError for a schema change
    whose table gained partitions since) commits nothing and leaves the status as it was;
    after a commit that restored a schema, the table is checked to read in one schema."""
    published = check_rollback(publication, force)
    publication.record.save()
    publication.record.move_to(BackfillStatus.ROLLING_BACK, "rollback")
    release_steps.begin(publication, release_steps.ROLLBACK, [table for table, _ in published])
    versions = {}
    for table, version in published:
        result = table.staging_format.rollback(table.uri, publication.record.id, version, force=force)
        versions[table.asset.to_user_string()] = result.version
        if result.version is not None:
            table.staging_format.check_one_schema(table.spark.spark_session, table.uri, result.version)
        failpoint("between_rollback_commits")
    release_steps.release(publication, release_steps.ROLLBACK, versions)
    for table in publication.tables.values():  # what a publish stopped part-way left staged
        table.staging_format.discard_staged(table.uri, publication.record.id)
    if publish_recorded(publication, instance):
        reflect_rollback(publication, instance)
    append_status(publication, LedgerStatus.ROLLED_BACK)
    publication.record.move_to(BackfillStatus.ROLLED_BACK, "rollback")
    publication.notify("rolled_back", f"{len(versions)} tables restored")
    return versions


def check_rollback(publication: Publication, force: bool = False) -> list[tuple[BackfillTable, int]]:
    """The tables to restore, downstream first, with their publish versions read from their
    logs (whatever the record says); raises what `rollback` would refuse, before any table
    is committed or anything written (the record's versions are set in memory only).

    Raises:
        IllegalTransitionError: The backfill's status does not allow a rollback.
        RollbackError: A table refuses (see DeltaFormat.check_rollback); SchemaRollbackError when
            a schema change's table had a partition outside the backfill written since its publish.
    """
    check_command(publication.record.id, publication.record.status, BackfillCommand.ROLLBACK)
    unpublished_tables(publication)  # the versions the tables' logs hold, whatever the record says
    published = [
        (table, version)
        for table in reversed(list(publication.tables.values()))
        if (version := publication.record.published_versions.get(table.asset.to_user_string())) is not None
    ]
    for table, version in published:
        table.staging_format.check_rollback(table.uri, publication.record.id, version, force=force)
    return published
