"""The catch-up sensor's gaps (automation/catch_up.py, `historical_gaps`) over the two-year
hourly asset of test_catch_up_huge_asset (17,544 hours and their 731 days, 1% of the days missing):
exactly the missing partitions, with their windows, found without asking Dagster partition by
partition (its per-partition status, or each key parsed into its window)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import dagster as dg
from dagster._core.definitions.partitions.definition import time_window

from bench.history_selection_bench import write_events
from bench.huge_asset_defs import definitions, history, missing_days
from partition_assets.automation.catch_up import historical_gaps

YEARS = 2
HOURS, DAYS = dg.AssetKey("hours"), dg.AssetKey("days")


def test_a_tick_over_two_years_of_hours_finds_exactly_the_missing_ones_without_parsing_each_key(home, monkeypatch):
    asset_graph = definitions(YEARS).resolve_asset_graph()
    expected = set()
    for day in missing_days(YEARS):
        start = datetime.combine(day, time(), UTC)
        expected.add((DAYS, str(day), start, start + timedelta(days=1), False))
        expected |= {
            (HOURS, f"{day}-{hour:02d}:00", start + timedelta(hours=hour), start + timedelta(hours=hour + 1), False)
            for hour in range(24)
        }
    parsed, asked = [], []
    with dg.DagsterInstance.from_config(str(home)) as instance:
        write_events(instance, history(YEARS))
        historical_gaps(instance, asset_graph, {HOURS, DAYS})  # the first tick: builds the index and status cache
        monkeypatch.setattr(time_window, "dst_safe_strptime", _counted(time_window.dst_safe_strptime, parsed))
        monkeypatch.setattr(
            dg.DagsterInstance, "get_status_by_partition", _counted(dg.DagsterInstance.get_status_by_partition, asked)
        )
        gaps = historical_gaps(instance, asset_graph, {HOURS, DAYS})

    found = {(g.asset, g.partition, g.window.start, g.window.end, g.failed) for g in gaps}
    assert len(gaps) == len(found) == len(expected) == 8 * 25
    assert found == expected
    assert asked == []  # Dagster's status asked key by key: 18,275 keys tested against its subsets
    assert len(parsed) < 100, f"{len(parsed)} keys parsed for {len(gaps)} gaps"


def _counted(function, calls: list):
    """`function`, recording each call's arguments in `calls`."""

    def counting(*args, **kwargs):
        calls.append(args)
        return function(*args, **kwargs)

    return counting
