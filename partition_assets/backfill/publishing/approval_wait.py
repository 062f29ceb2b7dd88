"""Whether a staged backfill waits for an approval before it publishes (the deployment's
policy, its spec, its assets' metadata: backfill/state/approval.py), and its wait: when it
started and expires, and the freeze of its assets until it is approved, discarded or expires.
The approval stage of publishing (stages.py) starts the wait; the approval itself, its
refusals and the discard are approval_steps.py's.
"""

from __future__ import annotations

from datetime import datetime

import dagster as dg

from partition_assets.backfill.publishing.freeze import freeze, unfreeze
from partition_assets.backfill.publishing.publication import Publication
from partition_assets.backfill.state import approval
from partition_assets.backfill.state.record import BackfillRecord


def approval_required(publication: Publication, instance: dg.DagsterInstance) -> bool:
    """Whether the backfill waits for an approval before publishing (the deployment's policy,
    its spec, its assets' metadata: backfill/state/approval.py `requires_approval`).

    Raises:
        ApprovalConfigError: The deployment's approval setting is malformed; nothing was written.
    """
    asset_graph = publication.definitions.resolve_asset_graph()
    return approval.requires_approval(
        publication.record.spec.approval,
        (asset_graph.get(key).metadata for key in publication.graph.assets),
        approval.approval_policy(instance),
    )


def start_waiting(publication: Publication, instance: dg.DagsterInstance, now: datetime) -> None:
    """Records when the backfill started waiting (and when that expires) and freezes its
    assets until it is approved, discarded or expires; the caller moves it to
    `awaiting_approval` and parks its leases."""
    record_wait(publication.record, now)
    freeze(instance, publication.graph.assets, approval.freeze_id(publication.record.id))


def record_wait(record: BackfillRecord, now: datetime) -> None:
    """Records that `record`'s backfill waits for an approval from `now` (its gate passed,
    or failed: then only `approve --force` publishes it), and when that expires."""
    record.approval = approval.awaiting(now, record.spec.approval_expires_after())
    record.save()


def discard_approval_freeze(instance: dg.DagsterInstance, backfill_id: str) -> None:
    """Lifts the freeze that the backfill's wait for approval kept (nothing when none)."""
    unfreeze(instance, approval.freeze_id(backfill_id))
