"""Partition keys of every kind, and every bad input refused when the definition is built."""

from datetime import UTC, datetime

import dagster as dg
import pytest

from partition_assets.partitions import (
    PartitionDefinitionError,
    cron,
    daily,
    dynamic,
    hourly,
    monthly,
    multi,
    static,
    weekly,
)


def at(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_hourly_keys_in_utc():
    keys = hourly("2024-01-01-00:00").get_partition_keys(current_time=at(2024, 1, 1, 3, 30))
    assert keys == ["2024-01-01-00:00", "2024-01-01-01:00", "2024-01-01-02:00"]


def test_hourly_berlin_spring_forward_day_has_23_hours():
    berlin = hourly("2024-03-31-00:00", end="2024-04-01-00:00", tz="Europe/Berlin")
    keys = berlin.get_partition_keys()
    assert len(keys) == 23
    assert "2024-03-31-02:00" not in keys  # 02:00 does not exist that night
    assert keys[1:3] == ["2024-03-31-01:00", "2024-03-31-03:00"]


def test_hourly_berlin_fall_back_day_has_25_hours_with_distinct_keys():
    berlin = hourly("2024-10-27-00:00", end="2024-10-28-00:00", tz="Europe/Berlin")
    keys = berlin.get_partition_keys()
    assert len(keys) == 25 == len(set(keys))
    # The repeated 02:00 hour is told apart by its UTC offset.
    assert keys[2:4] == ["2024-10-27-02:00", "2024-10-27-02:00+0100"]
    first, second = (berlin.time_window_for_partition_key(k) for k in keys[2:4])
    assert second.start.timestamp() - first.start.timestamp() == 3600
    assert first.start.utcoffset().total_seconds() == 7200
    assert second.start.utcoffset().total_seconds() == 3600


def test_daily_weekly_monthly_keys():
    assert daily("2024-02-27").get_partition_keys(current_time=at(2024, 3, 2)) == [
        "2024-02-27",
        "2024-02-28",
        "2024-02-29",
        "2024-03-01",
    ]
    assert weekly("2024-01-01", day_offset=1).get_partition_keys(current_time=at(2024, 1, 22)) == [
        "2024-01-01",
        "2024-01-08",
        "2024-01-15",
    ]
    assert monthly("2024-01-01").get_partition_keys(current_time=at(2024, 4, 1)) == [
        "2024-01-01",
        "2024-02-01",
        "2024-03-01",
    ]


def test_cron_keys():
    six_hourly = cron("0 */6 * * *", "2024-01-01-00:00")
    assert six_hourly.get_partition_keys(current_time=at(2024, 1, 2, 0)) == [
        "2024-01-01-00:00",
        "2024-01-01-06:00",
        "2024-01-01-12:00",
        "2024-01-01-18:00",
    ]


def test_custom_format_keys_round_trip():
    compact = daily("20240101", fmt="%Y%m%d")
    keys = compact.get_partition_keys(current_time=at(2024, 1, 3))
    assert keys == ["20240101", "20240102"]
    assert compact.time_window_for_partition_key("20240102").start == at(2024, 1, 2)


def test_data_lag_holds_back_the_newest_partitions():
    now = at(2024, 1, 10, 5)
    assert daily("2024-01-01").get_partition_keys(current_time=now)[-1] == "2024-01-09"
    lagged = daily("2024-01-01", data_lag=2).get_partition_keys(current_time=now)
    assert lagged[-1] == "2024-01-07"
    assert hourly("2024-01-01-00:00", data_lag=3).get_partition_keys(current_time=now)[-1] == ("2024-01-10-01:00")


def test_static_multi_and_dynamic_keys(instance):
    regions = static(["amer", "apac", "emea"])
    assert regions.get_partition_keys() == ["amer", "apac", "emea"]
    by_region = multi(ds=daily("2024-01-01", end="2024-01-03"), region=regions)
    keys = by_region.get_partition_keys()
    assert len(keys) == 6
    assert keys[0].keys_by_dimension == {"ds": "2024-01-01", "region": "amer"}

    campaigns = dynamic("campaigns")
    instance.add_dynamic_partitions("campaigns", ["spring", "summer"])
    assert campaigns.get_partition_keys(dynamic_partitions_store=instance) == ["spring", "summer"]


@pytest.mark.parametrize(
    ("build", "names"),
    [
        (lambda: hourly("2024-01-01-00:00", tz="Europe/Berln"), ["Europe/Berln", "Europe/Berlin"]),
        (lambda: daily("2024-01-01", tz="Mars/Olympus"), ["Mars/Olympus", "IANA"]),
        (lambda: daily("2024-02-01", end="2024-01-01"), ["2024-02-01", "2024-01-01", "swap"]),
        (lambda: daily("2024-01-01", end="2024-01-01"), ["not before end"]),
        (lambda: daily("2024-13-01"), ["2024-13-01", "'%Y-%m-%d'", "2024-01-31"]),
        (lambda: daily("01/02/2024"), ["01/02/2024", "write it like"]),
        (lambda: hourly("2024-01-01"), ["2024-01-01", "%H:%M"]),
        (lambda: daily("2024-01", fmt="%Y-%m"), ["'%Y-%m'", "round-trip", "'2024-01'"]),
        (lambda: hourly("2024-01-01", fmt="%Y-%m-%d"), ["'%Y-%m-%d'", "round-trip"]),
        (lambda: daily("01-01", fmt="%m-%d"), ["'%m-%d'", "no year", "%Y"]),
        (lambda: daily("2024-01-01", data_lag=-1), ["data_lag -1", ">= 0"]),
        (lambda: cron("every day", "2024-01-01-00:00"), ["'every day'", "five fields"]),
        (lambda: static([]), ["non-empty"]),
        (lambda: static("amer"), ["non-empty list"]),
        (lambda: static(["amer", "emea", "amer"]), ["['amer']", "more than once"]),
        (lambda: static(["amer", ""]), ["''", "non-empty string"]),
        (lambda: static(["a|b"]), ["'a|b'", "'|'"]),
        (lambda: static(["a,b"]), ["'a,b'", "','"]),
        (lambda: static(["a...b"]), ["'a...b'", "'...'"]),
        (lambda: static([" amer"]), ["' amer'", "whitespace"]),
        (lambda: static(["am\ner"]), ["control"]),
        (lambda: dynamic("my campaigns"), ["'my campaigns'"]),
        (lambda: multi(ds=daily("2024-01-01")), ["exactly two"]),
        (lambda: multi(a=daily("2024-01-01"), b=hourly("2024-01-01-00:00")), ["one time dimension"]),
        (lambda: multi(**{"ds": daily("2024-01-01"), "my region": static(["a"])}), ["'my region'"]),
    ],
)
def test_bad_input_fails_at_definition_with_a_message_naming_value_and_fix(build, names):
    with pytest.raises(PartitionDefinitionError) as raised:
        build()
    for name in names:
        assert name in str(raised.value)


def test_constructors_return_dagster_definitions():
    assert isinstance(hourly("2024-01-01-00:00"), dg.HourlyPartitionsDefinition)
    assert isinstance(daily("2024-01-01"), dg.DailyPartitionsDefinition)
    assert isinstance(weekly("2024-01-01"), dg.WeeklyPartitionsDefinition)
    assert isinstance(monthly("2024-01-01"), dg.MonthlyPartitionsDefinition)
    assert isinstance(cron("0 6 * * *", "2024-01-01-00:00"), dg.TimeWindowPartitionsDefinition)
