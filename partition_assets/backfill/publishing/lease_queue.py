"""`--on-lease wait`: a backfill whose partitions another backfill or run holds queues
behind it, instead of failing.

`leases_when_free` tries to take the leases, and while a live lease of another holder
overlaps them (PartitionLeasedError), says so once (naming the holder, from the refusal)
and tries again every `LEASE_POLL_SECONDS`, until it has them all. The default,
`--on-lease fail`, fails at once with the refusal, nothing written.

Not guaranteed: waiters are served in no set order (whoever tries first once the holder
lets go); a backfill that took some of its tables' leases keeps them while it waits for
the others, so two backfills each waiting on the other's tables wait until their leases
lapse (a lease is refreshed by each try, so that is until one is stopped).
"""

import time
from collections.abc import Callable

from partition_assets.errors import PartitionLeasedError
from partition_assets.storage.leases import Lease

# How often a waiting backfill tries its leases again.
LEASE_POLL_SECONDS = 2.0


def leases_when_free(take: Callable[[], list[Lease]], on_wait: Callable[[PartitionLeasedError], None]) -> list[Lease]:
    """`take()`'s leases, once no other holder's live lease overlaps them; `on_wait` sees
    the first refusal (before the first wait)."""
    waited = False
    while True:
        try:
            return take()
        except PartitionLeasedError as refusal:
            if not waited:
                on_wait(refusal)
                waited = True
        time.sleep(LEASE_POLL_SECONDS)
