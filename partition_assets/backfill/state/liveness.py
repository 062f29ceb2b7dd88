"""Whether a backfill that should be moving has a coordinator moving it, in words for
`backfill status`.

A backfill running, publishing or rolling back needs a live coordinator
(backfill/state/presence.py). One whose coordinator's heartbeat is older than the lease
TTL (PARTITION_ASSETS_LEASE_TTL) is shown as silent, with the command that takes it over.

Not guaranteed: a coordinator paused (not dead) for longer than the TTL is shown as
silent too; it stops by itself once another one claims the backfill.
"""

import time

import dagster as dg

from partition_assets.backfill.state.presence import announcement
from partition_assets.backfill.state.status import BackfillStatus
from partition_assets.storage.leases import lease_ttl

# A backfill in one of these is moved on by a coordinator, which must be live.
MOVING_STATUSES = frozenset({BackfillStatus.RUNNING, BackfillStatus.PUBLISHING, BackfillStatus.ROLLING_BACK})


def describe_coordinator(instance: dg.DagsterInstance, backfill_id: str, status: BackfillStatus) -> str:
    """One line: the live coordinator of `backfill_id`, or that none moves it although its
    `status` needs one (silent longer than the TTL, or gone), and the command that takes over.

    Raises:
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
    """
    presence = announcement(instance, backfill_id)
    now, ttl = time.time(), lease_ttl()
    if presence is not None and presence.is_live(now, ttl):
        return f"coordinator: live ({presence.describe(now)})"
    if status not in MOVING_STATUSES:
        return f"coordinator: none (nothing moves a {status.value} backfill)"
    takeover = f"`partition-assets backfill resume {backfill_id}` takes it over"
    if presence is None:
        return f"coordinator: none is live although the backfill is {status.value}; {takeover}"
    return (
        f"coordinator: silent ({presence.describe(now)}, longer than the lease TTL of {ttl:.0f} s): "
        f"it is dead; {takeover}"
    )
