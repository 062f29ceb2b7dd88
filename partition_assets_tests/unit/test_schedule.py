"""partitioned_schedule: each tick evaluated at a fixed scheduled time (never the wall
clock) against a real Dagster instance. (The requested runs executed for real through
Spark and the Delta IO manager: partition_assets_tests/integration/test_schedule_runs.py.)"""

from datetime import datetime
from zoneinfo import ZoneInfo

import dagster as dg
import pytest

from partition_assets.automation import SCHEDULE_TAG, TICK_TAG, partitioned_schedule
from partition_assets.errors import PartitionDefinitionError, PartitionScheduleError
from partition_assets.example.definitions import build_definitions
from partition_assets.partitions import daily, hourly, multi, static
from partition_assets.run_tags import RANGE_END_TAG, RANGE_START_TAG

UTC = ZoneInfo("UTC")
BERLIN = ZoneInfo("Europe/Berlin")
WEEKDAYS_6AM = "0 6 * * 1-5"  # the reference reading's Monday–Friday cron
# Monday 2024-03-04 .. Friday 2024-03-08.
SUNDAY, MONDAY, TUESDAY, WEDNESDAY = (datetime(2024, 3, day, 6, tzinfo=UTC) for day in (3, 4, 5, 6))

# The reference reading's keys are the days the job runs: the day's file lands that
# morning, so the day in progress is a partition (Dagster's end_offset=1).
SAME_DAY = dg.DailyPartitionsDefinition("2024-01-01", end_offset=1)
DAYS = daily("2024-01-01")  # the newest partition is the last complete day


def _asset(name: str, partitions_def: dg.PartitionsDefinition, **kwargs) -> dg.AssetsDefinition:
    @dg.asset(name=name, partitions_def=partitions_def, **kwargs)
    def _noop() -> None:
        pass

    return _noop


def _evaluate(
    assets: list[dg.AssetsDefinition],
    schedule: dg.ScheduleDefinition,
    instance: dg.DagsterInstance,
    tick: datetime,
    resources: dict | None = None,
):
    """One tick as the daemon evaluates it: in its code location, at its scheduled time."""
    repository = dg.Definitions(assets=assets, schedules=[schedule], resources=resources).get_repository_def()
    context = dg.build_schedule_context(instance=instance, scheduled_execution_time=tick, repository_def=repository)
    return repository.get_schedule_def(schedule.name).evaluate_tick(context)


def _partitions(data) -> list[str]:
    """Every partition the tick's runs cover, in order; a range run as 'first...last'."""
    found = []
    for request in data.run_requests:
        if request.partition_key is not None:
            found.append(str(request.partition_key))
        else:
            found.append(f"{request.tags[RANGE_START_TAG]}...{request.tags[RANGE_END_TAG]}")
    return found


def _days(*days: int) -> list[str]:
    return [f"2024-03-{day:02d}" for day in days]


# The reference reading's table: DailyBackfill(lookback=3, collect_schedule_gaps=True), Mon–Fri cron.
@pytest.mark.parametrize(
    ("tick", "lookback", "collect_gaps", "expected"),
    [
        (MONDAY, 0, True, _days(2, 3, 4)),  # schedule gaps: Sat, Sun, Mon
        (MONDAY, 3, False, _days(1, 2, 3, 4)),  # lookback: Fri, Sat, Sun, Mon
        (MONDAY, 3, True, _days(1, 2, 3, 4)),  # union: Fri, Sat, Sun, Mon
        (WEDNESDAY, 0, True, _days(6)),  # schedule gaps: Wed (no gap)
        (WEDNESDAY, 3, False, _days(3, 4, 5, 6)),  # lookback: Sun, Mon, Tue, Wed
        (WEDNESDAY, 3, True, _days(3, 4, 5, 6)),  # union: Sun, Mon, Tue, Wed
    ],
)
def test_monday_and_wednesday_ticks_request_the_reference_table(instance, tick, lookback, collect_gaps, expected):
    schedule = partitioned_schedule(
        "key:landed", WEEKDAYS_6AM, lookback=lookback, collect_gaps=collect_gaps, name="weekdays"
    )
    data = _evaluate([_asset("landed", SAME_DAY)], schedule, instance, tick)
    assert _partitions(data) == expected
    assert {r.tags[TICK_TAG] for r in data.run_requests} == {tick.isoformat()}
    assert {r.tags[SCHEDULE_TAG] for r in data.run_requests} == {"weekdays"}


def test_complete_partitions_end_the_day_before_the_tick(instance):
    """With the default end offset the newest partition is the last day that has ended:
    Monday 06:00 requests Sunday, and its gaps are Friday, Saturday and Sunday."""
    schedule = partitioned_schedule("key:daily_asset", WEEKDAYS_6AM, lookback=3, collect_gaps=True)
    data = _evaluate([_asset("daily_asset", DAYS)], schedule, instance, MONDAY)
    assert _partitions(data) == ["2024-02-29", *_days(1, 2, 3)]
    gaps_only = partitioned_schedule("key:daily_asset", WEEKDAYS_6AM, collect_gaps=True)
    assert _partitions(_evaluate([_asset("daily_asset", DAYS)], gaps_only, instance, MONDAY)) == _days(1, 2, 3)
    assert _partitions(_evaluate([_asset("daily_asset", DAYS)], gaps_only, instance, TUESDAY)) == _days(4)


def test_timezone_and_data_lag_of_the_definition(instance):
    """At 00:30 in Berlin (23:30 UTC the day before) the Berlin day that just ended is
    complete, the UTC one is not; data_lag moves the newest partition back."""
    just_after_midnight = datetime(2024, 3, 5, 0, 30, tzinfo=BERLIN)
    cases = [(daily("2024-01-01", tz="Europe/Berlin"), "2024-03-04"), (DAYS, "2024-03-03")]
    cases += [(daily("2024-01-01", tz="Europe/Berlin", data_lag=2), "2024-03-02")]
    for partitions_def, newest in cases:
        schedule = partitioned_schedule(
            "key:berlin", "30 0 * * *", execution_timezone="Europe/Berlin", name="berlin_night"
        )
        data = _evaluate([_asset("berlin", partitions_def)], schedule, instance, just_after_midnight)
        assert _partitions(data) == [newest], partitions_def


def test_hourly_assets_look_back_hours_and_collect_the_hours_since_the_previous_fire(instance):
    hours = hourly("2024-01-01-00:00")
    tick = datetime(2024, 3, 5, 6, tzinfo=UTC)
    lookback = partitioned_schedule("key:hourly_asset", "0 6 * * *", lookback=2, name="hourly_lookback")
    assert _partitions(_evaluate([_asset("hourly_asset", hours)], lookback, instance, tick)) == [
        "2024-03-05-03:00",
        "2024-03-05-04:00",
        "2024-03-05-05:00",
    ]
    gaps = partitioned_schedule("key:hourly_asset", "0 6 * * *", lookback=2, collect_gaps=True, name="hourly_gaps")
    requested = _partitions(_evaluate([_asset("hourly_asset", hours)], gaps, instance, tick))
    # The 24 hours that completed since yesterday's 06:00 fire.
    assert requested == [f"2024-03-04-{h:02d}:00" for h in range(6, 24)] + [f"2024-03-05-{h:02d}:00" for h in range(6)]


def test_multi_partitioned_assets_run_each_region_of_each_day(instance):
    by_region = multi(ds=DAYS, region=static(["eu", "us"]))
    schedule = partitioned_schedule("key:regional", WEEKDAYS_6AM, lookback=1, name="regional")
    data = _evaluate([_asset("regional", by_region)], schedule, instance, WEDNESDAY)
    assert sorted(_partitions(data)) == ["2024-03-04|eu", "2024-03-04|us", "2024-03-05|eu", "2024-03-05|us"]
    assert all(isinstance(r.partition_key, dg.MultiPartitionKey) for r in data.run_requests)


def test_backfill_policies_decide_range_runs_or_runs_per_partition(instance):
    single = _asset("single", DAYS, backfill_policy=dg.BackfillPolicy.single_run())
    pairs = _asset("pairs", DAYS, backfill_policy=dg.BackfillPolicy.multi_run(2))
    default = _asset("default", DAYS)
    expected = {
        "key:single": ["2024-02-29...2024-03-03"],
        "key:pairs": ["2024-02-29...2024-03-01", "2024-03-02...2024-03-03"],
        "key:default": ["2024-02-29", *_days(1, 2, 3)],
        # Every run holds the whole selection: the smallest batch decides.
        "key:single or key:default": ["2024-02-29", *_days(1, 2, 3)],
        "key:single or key:pairs": ["2024-02-29...2024-03-01", "2024-03-02...2024-03-03"],
    }
    for selection, runs in expected.items():
        schedule = partitioned_schedule(selection, WEEKDAYS_6AM, lookback=3, collect_gaps=True, name="policies")
        data = _evaluate([single, pairs, default], schedule, instance, MONDAY)
        assert _partitions(data) == runs, selection
        selected = {key.to_user_string() for r in data.run_requests for key in r.asset_selection or ()}
        assert selected == set(selection.replace("key:", "").split(" or "))


def test_a_tick_evaluated_twice_has_the_same_run_keys(instance):
    schedule = partitioned_schedule("key:daily_asset", WEEKDAYS_6AM, lookback=2)
    first, again = (_evaluate([_asset("daily_asset", DAYS)], schedule, instance, MONDAY) for _ in range(2))
    assert [r.run_key for r in first.run_requests] == [r.run_key for r in again.run_requests]
    assert len({r.run_key for r in first.run_requests}) == 3


def test_a_tick_before_the_first_complete_partition_skips(instance):
    schedule = partitioned_schedule("key:daily_asset", "0 6 * * *", lookback=3, collect_gaps=True)
    data = _evaluate([_asset("daily_asset", DAYS)], schedule, instance, datetime(2024, 1, 1, 6, tzinfo=UTC))
    assert data.run_requests == []
    assert "no partition" in (data.skip_message or "")
    first_day = _evaluate([_asset("daily_asset", DAYS)], schedule, instance, datetime(2024, 1, 2, 6, tzinfo=UTC))
    assert _partitions(first_day) == ["2024-01-01"]  # the lookback stops at the first partition


def test_the_ticks_skipped_for_a_run_in_flight_join_the_next_launch_each_as_it_would_have_run(instance):
    """An hourly range asset on a daily cron without gaps: Monday's tick skips for a run in
    flight (a run record of the schedule on the instance); Tuesday's tick then runs Monday's
    hour and its own, two ranges apart, as two range runs."""
    hours = _asset("hours", hourly("2024-01-01-00:00"), backfill_policy=dg.BackfillPolicy.single_run())
    schedule = partitioned_schedule("key:hours", "0 6 * * *", name="daily_hours")
    launched = SUNDAY.isoformat()
    blocking = instance.add_run(
        dg.DagsterRun(
            job_name="__anonymous_asset_job_daily_hours",
            status=dg.DagsterRunStatus.STARTED,
            tags={SCHEDULE_TAG: "daily_hours", TICK_TAG: launched},
        )
    )
    monday = _evaluate([hours], schedule, instance, MONDAY)
    assert monday.run_requests == [] and f"run {blocking.run_id} of tick {launched}" in (monday.skip_message or "")
    instance.report_run_failed(blocking)
    tuesday = _evaluate([hours], schedule, instance, TUESDAY)
    assert _partitions(tuesday) == ["2024-03-04-05:00", "2024-03-05-05:00"]
    assert tuesday.run_requests[0].tags[TICK_TAG] == TUESDAY.isoformat()
    for request in tuesday.run_requests:  # launched, as the daemon would, and done
        instance.add_run(
            dg.DagsterRun(job_name=blocking.job_name, status=dg.DagsterRunStatus.SUCCESS, tags=request.tags)
        )
    # The next tick collects nothing more: Monday was recorded on the run of Sunday's tick.
    wednesday = _evaluate([hours], schedule, instance, WEDNESDAY)
    assert _partitions(wednesday) == ["2024-03-06-05:00"]


@pytest.mark.parametrize(
    ("kwargs", "error", "named"),
    [
        ({"cron": "0 6 * * 8"}, PartitionScheduleError, "'0 6 * * 8'"),
        ({"cron": "every day"}, PartitionScheduleError, "'every day'"),
        ({"lookback": -1}, PartitionScheduleError, "lookback -1"),
        ({"lookback": 1.5}, PartitionScheduleError, "lookback 1.5"),
        ({"lookback": True}, PartitionScheduleError, "lookback True"),
        ({"execution_timezone": "Europe/Berln"}, PartitionDefinitionError, "Europe/Berlin"),
    ],
)
def test_bad_arguments_fail_when_the_schedule_is_built(kwargs, error, named):
    arguments = {"selection": "key:daily_asset", "cron": WEEKDAYS_6AM, **kwargs}
    with pytest.raises(error) as raised:
        partitioned_schedule(**arguments)
    assert named in str(raised.value)


def test_a_selection_without_one_time_partitions_definition_fails_its_tick(instance):
    daily_asset, hourly_asset = _asset("daily_asset", DAYS), _asset("hourly_asset", hourly("2024-01-01-00:00"))

    @dg.asset
    def unpartitioned() -> None:
        pass

    by_region = _asset("by_region", static(["eu", "us"]))
    cases = {
        "key:daily_asset or key:hourly_asset": "2 different partitions definitions",
        "key:daily_asset or key:unpartitioned": "['unpartitioned'] have no time partitions",
        "key:by_region": "['by_region'] have no time partitions",
    }
    for selection, message in cases.items():
        schedule = partitioned_schedule(selection, WEEKDAYS_6AM, name="bad_selection")
        repository = dg.Definitions(
            assets=[daily_asset, hourly_asset, unpartitioned, by_region], schedules=[schedule]
        ).get_repository_def()
        context = dg.build_schedule_context(
            instance=instance, scheduled_execution_time=MONDAY, repository_def=repository
        )
        with pytest.raises(PartitionScheduleError, match="Nothing was requested") as raised:
            repository.get_schedule_def("bad_selection")(context)
        assert message in str(raised.value)


def test_the_example_location_has_a_stopped_weekday_schedule(instance, monkeypatch):
    repository = build_definitions().get_repository_def()
    schedule = repository.get_schedule_def("weekday_revenue")
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    context = dg.build_schedule_context(instance=instance, scheduled_execution_time=MONDAY, repository_def=repository)
    data = schedule.evaluate_tick(context)
    assert _partitions(data) == ["2024-02-29...2024-03-03"]  # Thursday (lookback) .. Sunday
    assert [k.to_user_string() for k in data.run_requests[0].asset_selection or ()] == ["daily_orders", "daily_revenue"]
    monkeypatch.setenv("PARTITION_ASSETS_SENSORS", "weekday_revenue")
    started = build_definitions().get_repository_def().get_schedule_def("weekday_revenue")
    assert started.default_status == dg.DefaultScheduleStatus.RUNNING
