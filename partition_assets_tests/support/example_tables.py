"""The example's assets, and what its `events` and `daily_orders` tables hold after a backfill
of some days, computed independently: `events` from the deterministic generator, `daily_orders`
with pandas over those events; both read back with delta-rs (not through this library's Spark
read path).

Imports no conftest, so benchmarks use it without the test session's environment.
Not guaranteed: anything about partitions outside the days checked (a lake may hold others).
"""

from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
from pyspark.sql import SparkSession

from partition_assets.example import assets as example_assets
from partition_assets.example import sources
from partition_assets_tests.support.readers import delta_with_delta_rs

# Every asset of the example, to materialize any of them in this process.
EXAMPLE_ASSETS = dg.load_assets_from_modules([example_assets])


def rows(frame: pd.DataFrame, sort_by) -> list[dict]:
    frame = frame.copy()
    for column in frame.columns:
        if pd.api.types.is_datetime64_any_dtype(frame[column]):
            frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame.sort_values(sort_by).reset_index(drop=True).to_dict("records")


def as_float(series: pd.Series) -> pd.Series:
    return series.astype(float)


def expected_daily_orders(events: pd.DataFrame) -> pd.DataFrame:
    """Orders and revenue per (day, region) of events, computed with pandas."""
    events = events.copy()
    events["day"] = events.ds.str[:10]
    events["region"] = events.country.map(sources.REGION_OF_COUNTRY)
    events["amount"] = as_float(events.amount)
    return events.groupby(["day", "region"]).agg(orders=("amount", "size"), revenue=("amount", "sum"))


def hours_of(first_day: str, last_day: str) -> list[str]:
    """The hourly partition keys of `events` from `first_day` 00:00 to `last_day` 23:00."""
    return list(
        example_assets.HOURLY.get_partition_keys_in_range(
            dg.PartitionKeyRange(f"{first_day}-00:00", f"{last_day}-23:00")
        )
    )


def days_of(first_day: str, last_day: str) -> list[str]:
    """The daily partition keys of `daily_orders` from `first_day` to `last_day`."""
    return list(example_assets.DAILY.get_partition_keys_in_range(dg.PartitionKeyRange(first_day, last_day)))


def assert_tables_hold_the_days(lake: Path, spark: SparkSession, first: str, last: str) -> None:
    """`events` and `daily_orders` under `lake` hold the generator's rows for exactly these days."""
    hours = hours_of(first, last)
    start = datetime.fromisoformat(first).replace(tzinfo=UTC)
    generated = sources.hourly_events(spark, start, len(hours)).toPandas()
    events = delta_with_delta_rs(lake / "events")
    events = events[events.ds.isin(hours)]
    assert rows(events, "event_id") == rows(generated, "event_id")

    orders = delta_with_delta_rs(lake / "daily_orders")
    orders = orders[orders.ds.isin(days_of(first, last))].set_index(["ds", "region"]).sort_index()
    expected = expected_daily_orders(generated)
    assert list(orders.index) == list(expected.index)
    assert list(orders.orders) == list(expected.orders)
    assert list(as_float(orders.revenue)) == pytest.approx(list(expected.revenue))
