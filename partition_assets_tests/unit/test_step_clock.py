"""The publish line's split (backfill/publishing/step_clock.py), on a fake clock."""

import itertools

from partition_assets.backfill.publishing import step_clock
from partition_assets.backfill.publishing.step_clock import StepClock


def test_a_part_timed_twice_adds_up_and_parts_read_in_the_order_they_first_ran(monkeypatch):
    ticks = itertools.count(0.0, 0.5)  # each reading of the clock is half a second later
    monkeypatch.setattr(step_clock.time, "monotonic", lambda: next(ticks))
    clock = StepClock()
    with clock.step("table commits"):
        pass
    with clock.step("ledger"):
        pass
    with clock.step("Dagster's records"):
        pass
    with clock.step("ledger"):
        pass
    assert clock.seconds == {"table commits": 0.5, "ledger": 1.0, "Dagster's records": 0.5}
    assert clock.describe() == "table commits 0.5 s, ledger 1.0 s, Dagster's records 0.5 s"
