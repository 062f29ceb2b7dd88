"""Leases raced from processes: of several processes acquiring overlapping leases at once,
exactly one wins (threads race in partition_assets_tests/unit/test_leases.py)."""

import time

from partition_assets.storage.leases import leases
from partition_assets_tests.support.racing import racing_pool
from partition_assets_tests.unit.test_leases import _race


def test_of_racing_processes_exactly_one_wins(lake):
    table = str(lake / "orders")
    racers = [f"p{i}" for i in range(4)]
    with racing_pool(len(racers), "partition_assets_tests.unit.test_leases") as pool:
        list(pool.map(time.sleep, [0.0] * len(racers)))  # workers up before the start signal
        start_at = time.time() + 0.5
        won = dict(zip(racers, pool.map(_race, [table] * len(racers), racers, [start_at] * len(racers)), strict=True))
    assert sum(won.values()) == 1, won
    assert [lease.holder for lease in leases(table)] == [holder for holder, ok in won.items() if ok]
