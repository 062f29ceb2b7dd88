"""Which backfills a host resumes under a new coordinator because theirs died: each one
once, whichever hosts notice at the same moment.

A backfill is taken over when it is running or publishing (`TAKEN_OVER_STATUSES`) and the
coordinator that announced itself fell silent (backfill/state/presence.py). A rollback cut
short is not: `backfill status` shows it silent, and `backfill resume` finishes it.
Noticing is not claiming: a host claims a backfill by compare-and-set on the record's
version in the instance's database (`BackfillStore.claim_takeover`), so of hosts racing,
one wins; a claim holds for `TAKEOVER_GRACE_TTLS` lease TTLs, the time the new
coordinator has to announce itself.
The opt-in surface is the coordinator takeover sensor (automation/takeover_sensor.py).

Not guaranteed: a new coordinator that has not announced itself within the grace (its
run still queued) may be joined by a second one; the second is refused by the first's
announcement (`coordinating`) or refuses it, and the backfill's nodes are never run twice
(backfill/state/record.py: a node whose run succeeded is not run again).
"""

import time

import dagster as dg

from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.state.presence import silent_coordinators
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.storage.leases import lease_ttl

TAKEOVER_GRACE_TTLS = 3
# What a new coordinator run of the engine job resumes (automation/job.py).
TAKEN_OVER_STATUSES = frozenset({BackfillStatus.RUNNING, BackfillStatus.PUBLISHING})


def claim_takeovers(instance: dg.DagsterInstance, store: BackfillStore) -> list[str]:
    """The backfills whose coordinator fell silent that this caller claimed to resume
    (see the module docstring); one query for the statuses, one for the coordinators, one
    statement per claim.

    Raises:
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
    """
    versions = store.versions_in(TAKEN_OVER_STATUSES)
    silent = silent_coordinators(instance, versions)
    claimed_before = time.time() - TAKEOVER_GRACE_TTLS * lease_ttl()
    return [
        backfill_id
        for backfill_id in sorted(silent)
        if store.claim_takeover(backfill_id, versions[backfill_id], claimed_before)
    ]
