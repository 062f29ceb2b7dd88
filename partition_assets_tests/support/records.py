"""The backfill records an instance holds (backfill/state/store.py), read as a user's process
would; records set up in a given status, and coordinators' announcements, for a test; and
processes racing others to change a status (`race_transitions`) or to take over a backfill
(`race_takeovers`).

Not guaranteed: `record_at` and `announce` write past the library's checks (the transition
table, a real coordinator's heartbeat): a test's setup only.
"""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import dagster as dg

from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.state.presence import KEY_PREFIX, Presence
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BACKFILLS, BackfillStore
from partition_assets.backfill.state.takeover_claims import claim_takeovers
from partition_assets.errors import IllegalTransitionError
from partition_assets.processes.identity import ProcessIdentity

# A backfill of the engine test location's `raw` over two days, for records a test sets up.
SPEC = BackfillSpec(
    module="partition_assets_tests.support.locations.engine_defs",
    selection="key:raw",
    start="2024-01-01",
    end="2024-01-02",
)


@contextmanager
def backfill_store(home: Path) -> Iterator[BackfillStore]:
    """The backfill records of the instance at `home` (its Postgres too, with DAGSTER_PG_URL set)."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        yield BackfillStore(instance)


def recorded_backfill(home: Path, backfill_id: str) -> BackfillRecord:
    """Backfill `backfill_id` as the instance at `home` records it now."""
    with backfill_store(home) as store:
        return store.load(backfill_id)


def recorded_ids(home: Path) -> list[str]:
    """The ids of the backfills the instance at `home` records, oldest first."""
    with backfill_store(home) as store:
        return store.ids()


def record_at(store: BackfillStore, backfill_id: str, status: BackfillStatus, spec: BackfillSpec) -> BackfillRecord:
    """A record of `spec` saved in `store` and set to `status` directly, past the transition
    table: a test's setup, as if the backfill had got there."""
    record = BackfillRecord(spec, id=backfill_id, store=store)
    record.save()
    with store._connect() as connection:
        connection.execute(BACKFILLS.update().where(BACKFILLS.c.id == backfill_id).values(status=status.value))
    record.status = status
    return record


def version_of(store: BackfillStore, backfill_id: str) -> int:
    """The version of the record's row: every write bumps it."""
    row = store._row(backfill_id, BACKFILLS.c.version)
    assert row is not None, backfill_id
    return row.version


def race_transitions(home: str, steps: list[tuple[str, str, str]], barrier: Barrier, outcomes: Queue) -> None:
    """In a process of its own: for each (backfill id, target status, action) of `steps` in
    turn, waits at `barrier` (the other racers' turn), then tries to move that backfill to
    the target; puts (id, target, "moved" or the refusal's message) on `outcomes`."""
    with backfill_store(Path(home)) as store:
        for backfill_id, target, action in steps:
            barrier.wait()
            try:
                store.transition(backfill_id, BackfillStatus(target), action)
                outcomes.put((backfill_id, target, "moved"))
            except IllegalTransitionError as refused:
                outcomes.put((backfill_id, target, str(refused)))


def announce(instance: dg.DagsterInstance, backfill_id: str, seconds_ago: float) -> None:
    """A coordinator announcement of `backfill_id` from another host, its last beat `seconds_ago`."""
    presence = Presence(ProcessIdentity("another-host", 4242), "token", time.time() - seconds_ago)
    instance.run_storage.set_cursor_values({f"{KEY_PREFIX}/{backfill_id}": presence.to_text()})


def race_takeovers(home: str, barrier: Barrier, outcomes: Queue) -> None:
    """In a process of its own (a host): waits at `barrier` with the other racers, then claims
    the backfills whose coordinator fell silent; puts the list it won on `outcomes`."""
    with dg.DagsterInstance.from_config(home) as instance:
        store = BackfillStore(instance)
        barrier.wait()
        outcomes.put(claim_takeovers(instance, store))
