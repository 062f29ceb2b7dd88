"""One asset with about 100,000 partitions, as a code location for bench/huge_asset_bench.py
and its test-sized version (partition_assets_tests/integration/test_catch_up_huge_asset.py).

`hours`: hourly partitions over PARTITION_ASSETS_BENCH_YEARS years (default 12: 105,192
partitions, 2014-01-01-00:00 to 2025-12-31-23:00); `days`: its daily child, each day reading
its 24 hours (fan-in). Both are range-capable (BackfillPolicy.single_run) assets with no output
(their materialization is their only record): no IO manager, no table, nothing stored, so that
the bench measures everything around the runs.

`missing_days`: the days a history of this location leaves out, about 1% of them (blocks of
GAP_DAYS days, one every 100 blocks): what `--catch-up` has to run.

Not guaranteed: that the layout resembles a given team's; only its size is the point.
"""

import os
from datetime import date, timedelta

import dagster as dg

from partition_assets.partitions import daily, hourly, mappings

YEARS_ENV = "PARTITION_ASSETS_BENCH_YEARS"
LAST_YEAR = 2025
GAP_DAYS = 4  # a missing block: 4 consecutive days (96 hours), one block in every 100
RANGE_RUN = dg.BackfillPolicy.single_run()


def first_day(years: int) -> date:
    return date(LAST_YEAR - years + 1, 1, 1)


def end_day() -> date:
    """The day after the last partition."""
    return date(LAST_YEAR + 1, 1, 1)


def all_days(years: int) -> list[date]:
    first = first_day(years)
    return [first + timedelta(days=n) for n in range((end_day() - first).days)]


def missing_days(years: int) -> list[date]:
    """The days whose hours and day a history leaves out: the 51st block of every 100 blocks of
    GAP_DAYS days (1%), so that the gaps are spread over the whole range."""
    return [day for n, day in enumerate(all_days(years)) if (n // GAP_DAYS) % 100 == 50]


def history(years: int) -> list[tuple[dg.AssetKey, str, str]]:
    """(asset, partition, commit) of every partition of both assets but those of the missing
    days: what the bench and its test write as materializations (history_selection_bench.write_events)."""
    gone = set(missing_days(years))
    kept = [day for day in all_days(years) if day not in gone]
    hours = [f"{day}-{hour:02d}:00" for day in kept for hour in range(24)]
    return [(dg.AssetKey("hours"), h, "seed") for h in hours] + [(dg.AssetKey("days"), str(d), "seed") for d in kept]


def definitions(years: int) -> dg.Definitions:
    start, end = first_day(years), end_day()
    hours_def = hourly(f"{start}-00:00", end=f"{end}-00:00")
    days_def = daily(str(start), end=str(end))

    @dg.asset(partitions_def=hours_def, backfill_policy=RANGE_RUN)
    def hours() -> None:
        """Nothing to compute: the bench measures everything around the runs."""

    @dg.asset(
        partitions_def=days_def,
        backfill_policy=RANGE_RUN,
        deps=[dg.AssetDep(hours, partition_mapping=mappings.fan_in())],
    )
    def days() -> None:
        """Nothing to compute: each day reads its 24 hours."""

    return dg.Definitions(assets=[hours, days])


defs = definitions(int(os.environ.get(YEARS_ENV, "12")))
