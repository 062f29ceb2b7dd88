"""Undoing a staged backfill: discard (its staged data, before it publishes) and
rollback (one commit per table restoring what it published, downstream first; a
publish stopped part-way is rolled back for the tables it committed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

from partition_assets.backfill.publishing.dagster_events import publish_recorded, reflect_rollback
from partition_assets.backfill.publishing.freeze import unfreeze
from partition_assets.backfill.publishing.ledger_rows import append_status
from partition_assets.backfill.publishing.publish import describe_versions, published_versions, unpublished_tables
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
    Refused (IllegalTransitionError) when its status does not allow it, (BackfillStateError)
    once any table holds its publish commit, and
    (CoordinatorLiveError) while its coordinator is live: see backfill/state/presence.py."""
    check_command(publication.record.id, publication.record.status, "discard")
    with coordinating(instance, publication.record.id, "discard"):
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
    first, one commit per table; idempotent like publish. A backfill stopped part-way
    through its publish (status `publishing`) is rolled back for the tables it
    committed, and the rest of its staged data is deleted."""
    check_command(publication.record.id, publication.record.status, "rollback")
    if publication.record.status == BackfillStatus.PUBLISHING:
        unpublished_tables(publication)  # the versions its log holds, also those the record missed
    published = [
        (table, version)
        for table in reversed(list(publication.tables.values()))
        if (version := publication.record.published_versions.get(table.asset.to_user_string())) is not None
    ]
    for table, version in published:  # refuse before committing any table
        table.staging_format.check_rollback(table.uri, publication.record.id, version, force=force)
    publication.record.save()
    publication.record.move_to(BackfillStatus.ROLLING_BACK, "rollback")
    versions = {}
    for table, version in published:
        result = table.staging_format.rollback(table.uri, publication.record.id, version, force=force)
        versions[table.asset.to_user_string()] = result.version
        failpoint("between_rollback_commits")
    for table in publication.tables.values():  # what a publish stopped part-way left staged
        table.staging_format.discard_staged(table.uri, publication.record.id)
    if publish_recorded(publication, instance):
        reflect_rollback(publication, instance)
    append_status(publication, LedgerStatus.ROLLED_BACK)
    publication.record.move_to(BackfillStatus.ROLLED_BACK, "rollback")
    publication.notify("rolled_back", f"{len(versions)} tables restored")
    return versions
