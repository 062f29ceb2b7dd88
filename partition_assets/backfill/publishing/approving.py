"""The steps of approval before publish (backfill/state/approval.py says when it is needed):
a backfill starts waiting (`start_waiting`), is approved and published (`approve`), or
discarded (`discard`, also what an expired approval comes to). Every surface calls these:
the command line, the Launchpad's jobs and the coordinator.

Each goes through the status table (backfill/state/status.py), so an approval of a
backfill not awaiting one (or approved already) is refused, naming what fits, with
nothing written. The publish itself is the one `backfill publish` runs.

Not guaranteed: an approval is recorded (record and ledger) before the publish; a
publish then refused by a foreign commit leaves it approved and `publish_refused`, to be
published with `publish --force` or discarded.
"""

from __future__ import annotations

from datetime import datetime

import dagster as dg

from partition_assets.backfill.planning.instance_state import graph_of
from partition_assets.backfill.publishing.freeze import freeze, unfreeze
from partition_assets.backfill.publishing.ledger_rows import append_status
from partition_assets.backfill.publishing.publication import Publication
from partition_assets.backfill.publishing.publish import check_as_gated, unpublished_tables
from partition_assets.backfill.state import approval
from partition_assets.backfill.state.ledger import LedgerStatus
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.status import BackfillStatus, check_command
from partition_assets.code_location import load_definitions
from partition_assets.errors import ApprovalError
from partition_assets.storage.leases import release


def approval_required(publication: Publication) -> bool:
    """Whether the backfill waits for an approval before publishing (its spec, else its assets' metadata)."""
    asset_graph = publication.definitions.resolve_asset_graph()
    return approval.requires_approval(
        publication.record.spec.approval, (asset_graph.get(key).metadata for key in publication.graph.assets)
    )


def start_waiting(publication: Publication, instance: dg.DagsterInstance, now: datetime) -> None:
    """Records when the backfill started waiting (and when that expires) and freezes its
    assets until it is approved, discarded or expires; the caller moves it to
    `awaiting_approval` and parks its leases."""
    record = publication.record
    record.approval = approval.awaiting(now, record.spec.approval_expires_after())
    record.save()
    freeze(instance, publication.graph.assets, approval.freeze_id(record.id))


def approve(
    publication: Publication, instance: dg.DagsterInstance, approver: str, force: bool, now: datetime
) -> dict[str, int | None]:
    """Approves the backfill in `approver`'s name and publishes it (as `backfill publish`);
    returns the published table versions. A backfill whose approval expired is discarded.

    Raises:
        IllegalTransitionError: It neither awaits approval nor failed its gate; nothing was written.
        ApprovalError: No approver; its gate failed and `force` is not set; or its approval
            expired (then it was discarded). Nothing was published.
        StagingChangedError: Its staging is not what its gate evaluated (publish.check_as_gated);
            nothing was written: it stays as it was, its leases parked.
    """
    record = publication.record
    check_command(record.id, record.status, "approve")
    approved = approval.approved(record.approval, approver, now)  # refuses an empty name first
    if record.status == BackfillStatus.GATE_FAILED and not force:
        raise ApprovalError(
            f"backfill {record.id} failed its gate: review `partition-assets backfill diff {record.id}`, then "
            f"approve with --force (the job config's force: true). Nothing was written."
        )
    if record.status == BackfillStatus.AWAITING_APPROVAL and approval.expired(record.approval, now):
        files = discard(publication, instance)
        raise ApprovalError(
            f"backfill {record.id}'s approval expired at {record.approval['expires_at']}: it was discarded now "
            f"({files} staged files deleted); nothing was published. Start a new backfill with "
            "`partition-assets backfill run`."
        )
    check_as_gated(publication, unpublished_tables(publication))  # before the approval is recorded
    record.approval = approved
    record.save()
    append_status(publication, LedgerStatus.APPROVED, approved_by=approved["approved_by"])
    with publication.held(instance, "approve") as leases:
        discard_approval_freeze(instance, record.id)  # the publish's own freeze holds from here
        versions = publication.publish(instance, force=force)
        release(leases)
    return versions


def discard(publication: Publication, instance: dg.DagsterInstance) -> int:
    """Discards the backfill (rollback.discard) and lifts the freeze its wait for approval
    kept; returns how many staged files were deleted."""
    files = publication.discard(instance)
    discard_approval_freeze(instance, publication.record.id)
    return files


def discard_approval_freeze(instance: dg.DagsterInstance, backfill_id: str) -> None:
    """Lifts the freeze that the backfill's wait for approval kept (nothing when none)."""
    unfreeze(instance, approval.freeze_id(backfill_id))


def publication_of(record: BackfillRecord, instance: dg.DagsterInstance) -> Publication:
    """The publication of `record`: its code location loaded, its graph planned again."""
    return Publication(record, load_definitions(record.spec.module), graph_of(record.spec, instance))
