"""Leases on real tables' folders: overlap, races between threads (between processes:
partition_assets_tests/integration/test_leases_across_processes.py), expiry, heartbeats and the per-write run lease."""

import threading
import time

import pytest

from partition_assets.errors import PartitionLeasedError
from partition_assets.storage.leases import (
    Heartbeat,
    _LeaseFolder,
    acquire,
    check_write,
    leases,
    park,
    refresh,
    release,
    run_lease,
)
from partition_assets.storage.partition_scope import PartitionScope


def days(*keys: str) -> PartitionScope:
    return PartitionScope(("ds",), frozenset((key,) for key in keys))


@pytest.fixture
def table(tmp_path) -> str:
    return str(tmp_path / "lake" / "orders")


@pytest.fixture
def short_ttl(monkeypatch):
    monkeypatch.setenv("PARTITION_ASSETS_LEASE_TTL", "1")
    return 1.0


def test_a_lease_is_a_file_beside_the_table_and_release_deletes_it(table, tmp_path):
    lease = acquire(table, "bf1", "backfill", days("2024-01-01", "2024-01-02"))
    assert (tmp_path / "lake" / "orders" / "_leases" / "bf1.json").is_file()
    assert [(found.holder, found.kind, found.partitions) for found in leases(table)] == [
        ("bf1", "backfill", frozenset({("2024-01-01",), ("2024-01-02",)}))
    ]
    release(lease)
    assert leases(table) == []
    release(lease)  # twice is harmless
    taken = [
        acquire(table, "bf2", "backfill", days("2024-01-01")),
        acquire(table, "bf3", "backfill", days("2024-01-02")),
    ]
    assert [lease.holder for lease in leases(table)] == ["bf2", "bf3"]
    release(taken)  # several at once


def test_overlapping_acquire_fails_naming_the_backfill_and_the_fix(table):
    acquire(table, "bf1", "backfill", days("2024-01-01", "2024-01-02", "2024-01-03"))
    with pytest.raises(PartitionLeasedError) as raised:
        acquire(table, "bf2", "backfill", days("2024-01-03", "2024-01-04"))
    message = str(raised.value)
    assert "backfill bf1" in message and "ds=2024-01-03" in message and "ds=2024-01-01" not in message
    assert "partition-assets backfill status bf1" in message and "partition-assets backfill cancel bf1" in message
    assert "Nothing was written" in message
    # Disjoint partitions lease freely; a whole-table lease overlaps everything.
    acquire(table, "bf3", "backfill", days("2024-02-01"))
    with pytest.raises(PartitionLeasedError, match="bf1"):
        acquire(table, "bf4", "backfill", None)
    assert [lease.holder for lease in leases(table)] == ["bf1", "bf3"]


def test_a_whole_table_lease_blocks_every_partition(table):
    acquire(table, "bf1", "backfill", None)
    with pytest.raises(PartitionLeasedError, match="the whole table"):
        check_write(table, days("2024-01-01"), holder=None)


def test_check_write_passes_the_holder_and_free_partitions(table, tmp_path):
    check_write(table, days("2024-01-01"), holder=None)
    assert not (tmp_path / "lake").exists()  # checking creates nothing
    acquire(table, "bf1", "backfill", days("2024-01-01"))
    check_write(table, days("2024-01-01"), holder="bf1")
    check_write(table, days("2024-01-02"), holder=None)
    with pytest.raises(PartitionLeasedError, match="cannot write"):
        check_write(table, days("2024-01-01", "2024-01-02"), holder="run-7")


def test_reacquiring_as_the_same_holder_refreshes_and_rescopes(table):
    first = acquire(table, "bf1", "backfill", days("2024-01-01"))
    again = acquire(table, "bf1", "backfill", days("2024-01-01", "2024-01-02"))
    assert again.acquired_at == first.acquired_at and again.heartbeat_at >= first.heartbeat_at
    assert [lease.partitions for lease in leases(table)] == [frozenset({("2024-01-01",), ("2024-01-02",)})]


def _race(table: str, holder: str, start_at: float) -> bool:
    time.sleep(max(0.0, start_at - time.time()))
    try:
        acquire(table, holder, "backfill", days("2024-01-01", holder))
    except PartitionLeasedError:
        return False
    return True


def _race_after(barrier: threading.Barrier, won: dict[str, bool], table: str, holder: str) -> None:
    barrier.wait()
    won[holder] = _race(table, holder, 0.0)


def test_of_racing_threads_exactly_one_wins(table):
    for round_ in range(5):
        racers = [f"r{round_}-{i}" for i in range(6)]
        barrier = threading.Barrier(len(racers))
        won: dict[str, bool] = {}
        threads = [threading.Thread(target=_race_after, args=(barrier, won, table, holder)) for holder in racers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [holder for holder, ok in won.items() if ok]
        assert len(winners) == 1, won
        assert [lease.holder for lease in leases(table)] == winners
        release(leases(table)[0])


def test_a_dead_lease_is_ignored_and_taken_over(table, short_ttl):
    crashed = acquire(table, "bf1", "backfill", days("2024-01-01"))
    time.sleep(short_ttl + 0.2)
    assert leases(table) == []
    check_write(table, days("2024-01-01"), holder=None)
    acquire(table, "bf2", "backfill", days("2024-01-01"))
    assert refresh(crashed) is False  # its holder cannot revive it
    assert [lease.holder for lease in leases(table)] == ["bf2"]


def test_a_heartbeat_keeps_a_lease_alive_past_the_ttl_and_stops_on_exit(table, short_ttl):
    lease = acquire(table, "bf1", "backfill", days("2024-01-01"))
    with Heartbeat([lease], interval=0.2) as heartbeat:
        time.sleep(short_ttl * 2)
        with pytest.raises(PartitionLeasedError, match="bf1"):
            acquire(table, "bf2", "backfill", days("2024-01-01"))
    assert heartbeat.lost == []
    time.sleep(short_ttl + 0.2)
    acquire(table, "bf2", "backfill", days("2024-01-01"))


def test_a_heartbeat_drops_a_lease_taken_over_meanwhile(table, short_ttl):
    lease = acquire(table, "bf1", "backfill", days("2024-01-01"))
    time.sleep(short_ttl + 0.2)  # the holder stalled past the TTL
    acquire(table, "bf2", "backfill", days("2024-01-01"))
    with Heartbeat([lease], interval=0.1) as heartbeat:
        time.sleep(0.4)
    assert heartbeat.lost == [lease]
    assert [found.holder for found in leases(table)] == ["bf2"]


def test_a_run_lease_blocks_a_backfill_while_the_write_lasts(table):
    with run_lease(table, days("2024-01-01"), "run-42"):
        with pytest.raises(PartitionLeasedError) as raised:
            acquire(table, "bf1", "backfill", days("2024-01-01", "2024-01-02"))
        assert "run run-42" in str(raised.value) and "wait for run run-42 to finish" in str(raised.value)
    assert leases(table) == []
    with pytest.raises(RuntimeError, match="the write failed"):
        with run_lease(table, days("2024-01-01"), "run-43"):
            raise RuntimeError("the write failed")
    assert leases(table) == []  # released on error too
    acquire(table, "bf1", "backfill", days("2024-01-01"))
    with pytest.raises(PartitionLeasedError, match="backfill bf1"):
        with run_lease(table, days("2024-01-01"), "run-44"):
            pass


RACE_ROUNDS = 200


def test_park_and_release_are_never_undone_by_a_heartbeat_refresh_under_way(table):
    """Audit hole 7: the heartbeat thread's read-then-write refresh raced `park` and `release`
    (with a short interval, 50 of 200 parks were lost and 41 of 200 releases undone)."""
    lost_parks = undone_releases = 0
    for round_ in range(RACE_ROUNDS):
        lease = acquire(table, f"bf{round_}", "backfill", days(f"park-{round_}"))
        with Heartbeat([lease], interval=0.0001):
            time.sleep(0.001 * (round_ % 5))  # park at varying points of the refresh loop
            park([lease])
        lost_parks += not _read(table, lease.holder).parked
        release(lease)

        lease = acquire(table, f"again{round_}", "backfill", days(f"release-{round_}"))
        with Heartbeat([lease], interval=0.0001):
            time.sleep(0.001 * (round_ % 5))
            release(lease)
        undone_releases += _read(table, lease.holder) is not None
    assert (lost_parks, undone_releases) == (0, 0)


def test_a_heartbeat_paused_past_the_ttl_reports_its_leases_lost(table, short_ttl):
    """A process paused longer than the TTL may have lost its leases, even where the file still
    looks fresh (a refresh under way when the pause began writes it back afterwards)."""
    lease = acquire(table, "bf1", "backfill", days("2024-01-01"))
    with Heartbeat([lease], interval=0.05) as heartbeat:
        assert heartbeat.lapsed() == []
        with heartbeat._lock:  # the beats stop, as in a paused process
            time.sleep(short_ttl * 1.2)
        assert [lost.holder for lost in heartbeat.lapsed()] == ["bf1"]


def _read(table: str, holder: str):
    return _LeaseFolder(table).read(holder)
