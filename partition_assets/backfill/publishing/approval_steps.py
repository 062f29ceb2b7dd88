"""The steps of approval before publish (backfill/state/approval.py says when it is needed):
a backfill starts waiting (approval_wait.py, from the approval stage of publishing: stages.py),
is approved and published (`approve`), or
discarded (`discard`, also what an expired approval comes to). Under a deployment's policy, a
rollback waits the same way (`request_rollback`), and `approve` rolls it back. Every surface calls these:
the command line, the Launchpad's jobs and the coordinator.

Each goes through the status table (backfill/state/status.py), so an approval of a
backfill not awaiting one (or approved already) is refused, naming what fits, with
nothing written. An approval claims the backfill before it writes anything, and writes
its record by compare-and-set: of two at once, exactly one publishes. The deployment's
policy (dagster.yaml `partition_assets: approval:`, backfill/state/approval.py) decides
who may approve, and refuses launch options that skip a required approval
(`check_launch`). The publish itself walks the publishing stages from the table commits on
(stages.py `publish`), as `backfill publish` does.

Not guaranteed: an approval is recorded (record and ledger) before the publish; a
publish then refused by a foreign commit leaves it approved and `publish_refused`, to be
published with `publish --force` or discarded.
"""

from __future__ import annotations

from datetime import datetime

import dagster as dg

from partition_assets.backfill.model import Approval, BackfillCommand, BackfillStatus, PublishMode
from partition_assets.backfill.publishing.approval_wait import approval_required, discard_approval_freeze
from partition_assets.backfill.publishing.ledger_writes import append_status
from partition_assets.backfill.publishing.publication import Publication, staged_publication
from partition_assets.backfill.publishing.publish_step import check_schema_changes, check_staging, unpublished_tables
from partition_assets.backfill.publishing.stages import publish
from partition_assets.backfill.state import approval
from partition_assets.backfill.state.ledger import LedgerStatus
from partition_assets.backfill.state.presence import Announcement, coordinating
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.status import check_command
from partition_assets.backfill.state.stored_plan import recorded_graph
from partition_assets.code_location import load_definitions
from partition_assets.errors import ApprovalError
from partition_assets.storage.leases import release


def rollback_requires_approval(publication: Publication, instance: dg.DagsterInstance) -> bool:
    """Whether a rollback of the backfill waits for an approval (`request_rollback`): under a
    deployment's policy (dagster.yaml), where its publish would need one (`approval_required`).
    Without a policy, a spec's or an asset's own ask gates the publish only: its rollback is
    the way back and needs none.

    Raises:
        ApprovalConfigError: The deployment's approval setting is malformed; nothing was written.
    """
    return approval.approval_policy(instance) is not None and approval_required(publication, instance)


def check_launch(publication: Publication, instance: dg.DagsterInstance) -> None:
    """Refuses a backfill whose options skip an approval the deployment's policy, or its
    assets under that policy, require (ApprovalPolicy.check_launch); nothing without a policy.

    Raises:
        ApprovalError: Its options skip a required approval; nothing was recorded or run.
        ApprovalConfigError: The deployment's approval setting is malformed; nothing was written.
    """
    policy = approval.approval_policy(instance)
    if policy is not None:
        spec = publication.record.spec
        policy.check_launch(
            spec.approval, spec.publish, spec.publish == PublishMode.staged, approval_required(publication, instance)
        )


def approve(
    publication: Publication,
    instance: dg.DagsterInstance,
    approver: str,
    force: bool,
    now: datetime,
    dagster_user: str | None = None,
) -> dict[str, int | None]:
    """Approves the backfill in `approver`'s name and publishes it (as `backfill publish`);
    returns the published table versions. A backfill whose approval expired while awaiting
    it is discarded. `dagster_user`: the Dagster user the approval's run carries, where the
    instance knows one (the deployment's policy checks it).

    The backfill is claimed (backfill/state/presence.py) before anything is written, and its
    record read again under the claim: of two approvals at once, one publishes and the other
    is refused by the claim, or by the status the first left; the record is written by
    compare-and-set (backfill/state/store.py), never over what another process wrote.

    Raises:
        IllegalTransitionError: It neither awaits approval nor failed its gate (e.g. another
            approval published it); nothing was written.
        CoordinatorLiveError: Another process holds the backfill (another approval); nothing was written.
        ApprovalError: No approver, or one the deployment's policy refuses; its gate failed and
            `force` is not set, or its approval expired after the failed gate: nothing was
            written. Its approval expired while awaiting it: it was discarded. Nothing was published.
        StagingMissingError, StagingChangedError: Its staging is gone, or not what its gate
            evaluated (publish.check_staging); nothing was written: it stays as it was, its
            leases parked.
        SchemaChangeError: Its staged schema change needs a partition it did not stage (one
            written since it started); nothing was written: it stays as it was, not approved.
        CommitError: The storage refused the ledger's `approved` rows (a full disk); nothing
            was recorded: it still awaits approval, its leases parked.
    """
    record = publication.record
    approval.approved(record.approval, approver, now)  # refuses an empty name before anything
    policy = approval.approval_policy(instance)
    if policy is not None:
        requester, asked = _requester(record)
        policy.check_approver(record.id, approver, requester, dagster_user, asked)
    with coordinating(instance, record.id, BackfillCommand.APPROVE) as announcement:
        record.reload()  # under the claim: another approval may have published it meanwhile
        check_command(record.id, record.status, BackfillCommand.APPROVE)
        if record.status == BackfillStatus.ROLLBACK_AWAITING_APPROVAL:
            return _approve_rollback(publication, instance, announcement, approver, force, now)
        _check_gate_failure(record, force, now)
        if not (record.status == BackfillStatus.AWAITING_APPROVAL and approval.expired(record.approval, now)):
            return _approve_and_publish(publication, instance, announcement, approver, force, now)
    files = discard(publication, instance)
    raise ApprovalError(
        f"backfill {record.id}'s approval expired at {_expiry(record)}: it was discarded now "
        f"({files} staged files deleted); nothing was published. Start a new backfill with "
        "`partition-assets backfill run`."
    )


def _approve_and_publish(
    publication: Publication,
    instance: dg.DagsterInstance,
    announcement: Announcement,
    approver: str,
    force: bool,
    now: datetime,
) -> dict[str, int | None]:
    """Records the approval (record and ledger) and publishes, under the claim `announcement`."""
    record = publication.record
    tables = publication.tables
    pending = unpublished_tables(record, tables)
    check_staging(record, tables, pending, publication.ledger)  # before the approval is recorded, as the schema check
    check_schema_changes(record, pending)  # a refused publish must not leave it approved and awaiting
    approved = approval.approved(record.approval, approver, now)
    # The ledger first: a write the storage refuses (a full disk) leaves the record not approved.
    rows = append_status(publication.ledger, record, LedgerStatus.APPROVED, approved_by=approved.approved_by)
    record.approval = approved
    record.save()
    with publication.leased(instance, announcement, BackfillCommand.APPROVE) as leases:
        discard_approval_freeze(instance, record.id)  # the publish's own freeze holds from here
        return publish(publication, instance, leases, force=force, approved_rows=rows, approved_staging=pending)


def request_rollback(publication: Publication, instance: dg.DagsterInstance, requested_by: str, now: datetime) -> None:
    """Records that `requested_by` asks at `now` for the rollback of the backfill (published, or
    its publish cut short), which requires approval (`rollback_requires_approval`), and moves it
    to `rollback_awaiting_approval`:
    nothing is restored until an approver other than `requested_by` approves it (`approve`).
    The caller checked that the rollback would be accepted now (Publication.check_rollback).

    Raises:
        CoordinatorLiveError: Another process holds the backfill; nothing was written.
        IllegalTransitionError: Its status (as read under the claim) refuses a rollback; nothing was written.
    """
    record = publication.record
    with coordinating(instance, record.id, BackfillCommand.ROLLBACK):
        record.reload()
        check_command(record.id, record.status, BackfillCommand.ROLLBACK)
        # Never expires: until approved, the backfill stays published as it is.
        record.rollback_approval = Approval(awaiting_since=now, requested_by=requested_by)
        record.save()
        record.move_to(BackfillStatus.ROLLBACK_AWAITING_APPROVAL, BackfillCommand.ROLLBACK)


def _approve_rollback(
    publication: Publication,
    instance: dg.DagsterInstance,
    announcement: Announcement,
    approver: str,
    force: bool,
    now: datetime,
) -> dict[str, int | None]:
    """Records the approval of the backfill's rollback and rolls it back (`force`: despite
    later commits to its partitions), under the claim `announcement`; a rollback the tables
    refuse now (Publication.check_rollback) records nothing."""
    record = publication.record
    publication.check_rollback(force=force)  # before the approval is recorded
    record.rollback_approval = approval.approved(record.rollback_approval, approver, now)
    record.save()
    with publication.leased(instance, announcement, BackfillCommand.ROLLBACK) as leases:
        versions = publication.rollback(instance, force=force)
        release(leases)
    return versions


def _requester(record: BackfillRecord) -> tuple[str | None, str]:
    """Who asked for what awaits approval, whom the policy refuses as its approver, and what
    they did: the requester of a rollback, else the backfill's launcher."""
    if record.status == BackfillStatus.ROLLBACK_AWAITING_APPROVAL and record.rollback_approval is not None:
        return record.rollback_approval.requested_by, "asked for the rollback of backfill"
    return record.launched_by, "launched backfill"


def _check_gate_failure(record: BackfillRecord, force: bool, now: datetime) -> None:
    """Refuses to approve a backfill whose gate failed without `force`, or after its approval expired.

    Raises:
        ApprovalError: Either; nothing was written.
    """
    if record.status != BackfillStatus.GATE_FAILED:
        return
    if not force:
        raise ApprovalError(
            f"backfill {record.id} failed its gate: review `partition-assets backfill diff {record.id}`, then "
            f"approve with --force (the job config's force: true). Nothing was written."
        )
    if approval.expired(record.approval, now):
        raise ApprovalError(
            f"backfill {record.id} failed its gate and its approval expired at {_expiry(record)} "
            f"(--approval-expires {record.spec.approval_expires}): a forced approval is refused after the expiry. "
            f"Nothing was written; drop it with `partition-assets backfill discard {record.id}`, or start a new "
            "backfill with `partition-assets backfill run`."
        )


def _expiry(record: BackfillRecord) -> str:
    expires_at = record.approval.expires_at if record.approval else None
    return expires_at.isoformat() if expires_at else "never"


def discard(publication: Publication, instance: dg.DagsterInstance) -> int:
    """Discards the backfill (undo_steps.discard) and lifts the freeze its wait for approval
    kept; returns how many staged files were deleted."""
    files = publication.discard(instance)
    discard_approval_freeze(instance, publication.record.id)
    return files


def publication_of(record: BackfillRecord, instance: dg.DagsterInstance) -> Publication:
    """The publication of `record`: its code location loaded, its graph as its record stores it
    (backfill/state/stored_plan.py: nothing is planned, no git is read)."""
    return staged_publication(record, load_definitions(record.spec.module), recorded_graph(record, instance))
