"""Whether a backfill that should be moving has a coordinator moving it, in words for
`backfill status`.

A backfill running, publishing or rolling back needs a live coordinator
(backfill/state/presence.py). One whose coordinator's heartbeat is older than the lease
TTL (PARTITION_ASSETS_LEASE_TTL), or whose process is provably gone (in this host's boot
and pid namespace: its pid free or another process), is shown as silent, with the command
that takes it over. A coordinator in another pid namespace (another container on the same
host) or on another host is judged by its heartbeat alone: never silent while it beats.

Not guaranteed: a coordinator paused (not dead) for longer than the TTL is shown as
silent too; it stops by itself once another one claims the backfill. A backfill whose
coordinator never announced itself (it died before its leases were taken) or let go
(it stopped on an error it reported) is not called silent: its status says what to do.
"""

import time

import dagster as dg

from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.state.presence import silent_coordinators
from partition_assets.storage.leases import lease_ttl

# A backfill in one of these is moved on by a coordinator, which must be live.
MOVING_STATUSES = frozenset({BackfillStatus.RUNNING, BackfillStatus.PUBLISHING, BackfillStatus.ROLLING_BACK})


def silent_coordinator(instance: dg.DagsterInstance, backfill_id: str, status: BackfillStatus) -> str | None:
    """A line saying that the coordinator of `backfill_id` fell silent, when its `status`
    needs one and the last one announced has not beaten for longer than the TTL (or its
    process is provably gone), with the command that takes over; else None.

    Raises:
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
    """
    presence = silent_coordinators(instance, [backfill_id]).get(backfill_id)
    if status not in MOVING_STATUSES or presence is None:
        return None
    return (
        f"coordinator: silent ({presence.describe(time.time())}; the lease TTL is {lease_ttl():.0f} s): it is "
        f"dead and nothing moves this {status.value} backfill; `partition-assets backfill resume {backfill_id}` "
        "takes it over"
    )
