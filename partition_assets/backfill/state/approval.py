"""Approval before publish: a staged backfill that requires it waits, once its gate passed,
in `awaiting_approval` (its leases parked, its assets frozen) until someone approves it
(`partition-assets backfill approve <id> --by NAME`, or the Launchpad's `backfill_approve`
job), it is discarded, or its approval expires (`--approval-expires 24h`: then discarded
instead of published).
After a failed gate, only an approval with `--force` publishes it.

Whether a backfill requires approval: its spec's `approval` (`--approval required|none`,
the job config's `approval`, the UI tag `partition_assets/approval`) when given; else
`required` when any asset it writes declares `backfill_approval()` in its metadata.

The approval's state lives in the backfill's record (`BackfillRecord.approval`): when it
started waiting, when that expires, who approved it and when; the ledger's `approved`
rows (one per partition, `approved_by`) keep who and when beside the data they approved.

Not guaranteed: an expired approval is discarded when someone next tries to approve it
(the approval is refused, naming the expiry); until then it keeps waiting, its leases
parked, and `backfill discard <id>` ends it. The approver is the name given: Dagster's open-source webserver has no
user identity to check it against.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from partition_assets.errors import ApprovalError

APPROVAL_METADATA_KEY = "partition_assets/approval"
# The tag on a backfill launched from the webserver's dialog that sets its spec's `approval`.
APPROVAL_TAG = "partition_assets/approval"
REQUIRED, NOT_REQUIRED = "required", "none"
APPROVAL_CHOICES = (REQUIRED, NOT_REQUIRED)


def backfill_approval() -> dict[str, str]:
    """Asset metadata making every staged backfill that writes the asset wait for an
    approval (unless the backfill says `--approval none`): `@dg.asset(metadata=backfill_approval())`,
    merged with other metadata as `{**backfill_approval(), **backfill_gate(...)}`."""
    return {APPROVAL_METADATA_KEY: REQUIRED}


def requires_approval(spec_approval: str | None, asset_metadata: Iterable[Mapping[str, Any] | None]) -> bool:
    """Whether a backfill requires approval: its spec's choice when given, else whether any
    of its assets' metadata asks for it."""
    if spec_approval is not None:
        return spec_approval == REQUIRED
    return any(_value((metadata or {}).get(APPROVAL_METADATA_KEY)) == REQUIRED for metadata in asset_metadata)


def _value(value: Any) -> Any:
    """A metadata value as given (Dagster wraps a plain one in a TextMetadataValue)."""
    return getattr(value, "value", value)


def awaiting(now: datetime, expires_after: timedelta | None) -> dict[str, str | None]:
    """The record's approval state when its backfill starts waiting at `now`."""
    return {
        "awaiting_since": now.isoformat(),
        "expires_at": None if expires_after is None else (now + expires_after).isoformat(),
    }


def approved(state: Mapping[str, Any], approver: str, now: datetime) -> dict[str, Any]:
    """`state` with the approval by `approver` at `now`.

    Raises:
        ApprovalError: `approver` is empty; nothing was written.
    """
    if not isinstance(approver, str) or not approver.strip():
        raise ApprovalError(
            f"the approver {approver!r} is empty: name who approves (--by NAME, or the job config's approver), "
            "the ledger records it. Nothing was written."
        )
    return {**state, "approved_by": approver.strip(), "approved_at": now.isoformat()}


def expired(state: Mapping[str, Any], now: datetime) -> bool:
    """Whether the approval `state` awaits expired at or before `now`."""
    expires_at = state.get("expires_at")
    return expires_at is not None and datetime.fromisoformat(expires_at) <= now


def freeze_id(backfill_id: str) -> str:
    """The id under which a backfill awaiting approval keeps its assets frozen: one no
    coordinator announces, so the freeze counts until approval, discard or expiry lifts it
    (backfill/publishing/freeze.py)."""
    return f"{backfill_id}.awaiting_approval"


def utc_now() -> datetime:
    """Bookkeeping time of an approval (not asset logic)."""
    return datetime.now(UTC)
