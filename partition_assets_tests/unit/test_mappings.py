"""Each mapping's upstream keys at the edges: month ends, leap day, DST, first partitions."""

import dagster as dg
import pytest

from partition_assets.partitions import (
    PartitionDefinitionError,
    daily,
    hourly,
    mappings,
    monthly,
    multi,
    static,
    weekly,
)
from partition_assets.partitions.mappings import upstream_keys

DAILY = daily("2024-01-01")
MONTHLY = monthly("2024-01-01")
REGIONS = static(["amer", "apac", "emea"])
BY_REGION = multi(ds=DAILY, region=REGIONS)


def days(first: str, last: str) -> list[str]:
    return list(DAILY.get_partition_keys_in_range(dg.PartitionKeyRange(first, last)))


def test_identity():
    assert upstream_keys(mappings.identity(), DAILY, DAILY, ["2024-02-29"]) == ["2024-02-29"]


def test_fan_in_hourly_to_daily_covers_the_day():
    hours = upstream_keys(mappings.fan_in(), DAILY, hourly("2024-01-01-00:00"), ["2024-02-29"])
    assert len(hours) == 24
    assert hours[0] == "2024-02-29-00:00" and hours[-1] == "2024-02-29-23:00"


@pytest.mark.parametrize(("day", "hours"), [("2024-03-31", 23), ("2024-10-27", 25), ("2024-10-28", 24)])
def test_fan_in_hourly_to_daily_across_dst_in_berlin(day, hours):
    berlin_daily = daily("2024-01-01", tz="Europe/Berlin")
    berlin_hourly = hourly("2024-01-01-00:00", tz="Europe/Berlin")
    assert len(upstream_keys(mappings.fan_in(), berlin_daily, berlin_hourly, [day])) == hours


@pytest.mark.parametrize(
    ("month", "first", "last", "count"),
    [
        ("2024-01-01", "2024-01-01", "2024-01-31", 31),
        ("2024-02-01", "2024-02-01", "2024-02-29", 29),
        ("2025-02-01", "2025-02-01", "2025-02-28", 28),
        ("2024-04-01", "2024-04-01", "2024-04-30", 30),
    ],
)
def test_fan_in_daily_to_monthly_at_month_ends(month, first, last, count):
    keys = upstream_keys(mappings.fan_in(), MONTHLY, DAILY, [month])
    assert (keys[0], keys[-1], len(keys)) == (first, last, count)


def test_fan_in_daily_to_weekly():
    week = weekly("2024-01-01", day_offset=1)
    assert upstream_keys(mappings.fan_in(), week, DAILY, ["2024-02-26"]) == days("2024-02-26", "2024-03-03")


@pytest.mark.parametrize(
    ("day", "month"),
    [
        ("2024-01-01", "2024-01-01"),
        ("2024-01-31", "2024-01-01"),
        ("2024-02-29", "2024-02-01"),
        ("2024-03-01", "2024-03-01"),
        ("2024-12-31", "2024-12-01"),
    ],
)
def test_fan_out_monthly_to_daily(day, month):
    assert upstream_keys(mappings.fan_out(), DAILY, MONTHLY, [day]) == [month]


@pytest.mark.parametrize(
    ("day", "window"),
    [
        ("2024-03-01", days("2024-02-24", "2024-03-01")),  # spans the leap day
        ("2024-01-07", days("2024-01-01", "2024-01-07")),
        ("2024-01-03", days("2024-01-01", "2024-01-03")),  # cut at the first partition
        ("2024-01-01", ["2024-01-01"]),
    ],
)
def test_rolling_window_of_7_days(day, window):
    assert upstream_keys(mappings.rolling_window(7), DAILY, DAILY, [day]) == window


def test_rolling_window_of_a_range_is_the_union_of_windows():
    keys = upstream_keys(mappings.rolling_window(7), DAILY, DAILY, days("2024-01-10", "2024-01-12"))
    assert keys == days("2024-01-04", "2024-01-12")


@pytest.mark.parametrize(
    ("day", "previous"),
    [("2024-03-01", ["2024-02-29"]), ("2024-01-02", ["2024-01-01"]), ("2024-01-01", [])],
)
def test_previous_period_self_dependency(day, previous):
    assert upstream_keys(mappings.previous_period(), DAILY, DAILY, [day]) == previous


def test_static_to_static():
    countries = static(["br", "de", "fr", "us"])
    mapping = mappings.static_to_static({"de": "emea", "fr": "emea", "us": "amer", "br": "amer"})
    assert upstream_keys(mapping, REGIONS, countries, ["emea"]) == ["de", "fr"]
    assert upstream_keys(mapping, REGIONS, countries, ["apac"]) == []


def test_all_partitions():
    assert upstream_keys(mappings.all_partitions(), DAILY, REGIONS, ["2024-01-05"]) == [
        "amer",
        "apac",
        "emea",
    ]


def test_to_dimension_in_both_directions():
    assert upstream_keys(mappings.to_dimension("ds"), BY_REGION, DAILY, ["2024-02-29|emea"]) == ["2024-02-29"]
    assert upstream_keys(mappings.to_dimension("ds"), DAILY, BY_REGION, ["2024-02-29"]) == [
        "2024-02-29|amer",
        "2024-02-29|apac",
        "2024-02-29|emea",
    ]
    assert upstream_keys(mappings.to_dimension("region"), BY_REGION, REGIONS, ["2024-02-29|emea"]) == ["emea"]


def test_per_dimension_rolling_window_keeps_the_region():
    mapping = mappings.per_dimension(ds=mappings.rolling_window(3), region=mappings.identity())
    assert upstream_keys(mapping, BY_REGION, BY_REGION, ["2024-03-01|apac"]) == [
        "2024-02-28|apac",
        "2024-02-29|apac",
        "2024-03-01|apac",
    ]
    assert upstream_keys(mapping, BY_REGION, BY_REGION, ["2024-01-01|apac"]) == ["2024-01-01|apac"]


@pytest.mark.parametrize(
    "build",
    [
        lambda: mappings.rolling_window(0),
        lambda: mappings.previous_period(0),
        lambda: mappings.static_to_static({}),
        lambda: mappings.per_dimension(),
    ],
)
def test_bad_mapping_arguments_are_refused(build):
    with pytest.raises(PartitionDefinitionError):
        build()
