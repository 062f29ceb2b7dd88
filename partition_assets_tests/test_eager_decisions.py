"""What the eager sensor requests over the example pipeline's mappings (fan-in, cron,
multi-dimension, self-dependency), evaluated against a real instance whose
materializations are reported without running Spark."""

import dagster as dg
import pytest

from partition_assets.automation import eager_partitions_sensor
from partition_assets.backfill.freeze import freeze, unfreeze
from partition_assets.backfill.spec import BackfillSpec
from partition_assets.backfill.state import BackfillRecord
from partition_assets.example import defs, sources
from partition_assets.example.definitions import build_definitions
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets_tests import automation_defs

SENSOR = eager_partitions_sensor(dg.AssetSelection.all(), watch_seconds=0)


@pytest.fixture
def tick(instance):
    """Reports materializations, then evaluates one tick; returns the requested nodes."""
    state = {"cursor": None}

    def run(*materialized: tuple[str, str | None]) -> set[tuple[str, str | None]]:
        for asset, partition in materialized:
            instance.report_runless_asset_event(dg.AssetMaterialization(asset, partition=partition))
        context = dg.build_sensor_context(instance=instance, cursor=state["cursor"], definitions=defs)
        result = SENSOR(context)
        state["cursor"] = result.cursor
        return {(k.to_user_string(), r.partition_key) for r in result.run_requests for k in r.asset_selection}

    assert run() == set()  # the first tick only places the cursor: history is not replayed
    return run


def hours(day: str, first: int, last: int) -> list[tuple[str, str]]:
    return [("events", f"{day}-{h:02d}:00") for h in range(first, last + 1)]


def test_fan_in_waits_for_every_hour(tick):
    assert tick(*hours("2024-01-02", 0, 22)) == {
        ("events_6h", f"2024-01-02-{h:02d}:00") for h in (0, 6, 12)
    }  # the 18:00 window and the day still miss 23:00
    assert tick(*hours("2024-01-02", 23, 23)) == {("events_6h", "2024-01-02-18:00"), ("daily_orders", "2024-01-02")}


def test_a_current_partition_is_not_requested_again(tick):
    tick(*hours("2024-01-02", 0, 23))
    assert tick(("events_6h", "2024-01-02-00:00")) == set()  # nothing reads events_6h
    # events_6h[00:00] is now newer than its input hours: a repeated upstream-less tick asks nothing.
    assert tick() == set()
    # A new version of hour 03:00 makes the window and the day stale again.
    assert tick(("events", "2024-01-02-03:00")) == {("events_6h", "2024-01-02-00:00"), ("daily_orders", "2024-01-02")}


def test_multi_dimension_and_rolling_self_dependent_assets(tick):
    # daily_region_revenue[day|region] reads daily_orders[day] and regions[region].
    assert tick(("daily_orders", "2024-01-01")) == set()
    assert tick(("regions", "emea")) == {
        ("daily_region_revenue", dg.MultiPartitionKey({"ds": "2024-01-01", "region": "emea"}))
    }
    # daily_revenue reads every region: ready once all of them exist.
    others = [("regions", r) for r in sources.REGIONS if r != "emea"]
    requested = tick(*others)
    assert ("daily_revenue", "2024-01-01") in requested
    # revenue_running_total reads daily_revenue[day] and its own previous day (none on the first day).
    assert tick(("daily_revenue", "2024-01-01")) >= {
        ("revenue_running_total", "2024-01-01"),
        ("revenue_7d", "2024-01-01"),
    }
    assert ("revenue_running_total", "2024-01-02") not in tick(("daily_revenue", "2024-01-02"))  # day 1 not yet run
    assert ("revenue_running_total", "2024-01-02") in tick(("revenue_running_total", "2024-01-01"))


@pytest.fixture
def light_tick(instance, monkeypatch):
    """Like `tick`, over the light automation code location, materializing through Dagster."""
    monkeypatch.setenv("DAGSTER_HOME", instance.root_directory)  # where backfill records live
    sensor = eager_partitions_sensor("group:eager", watch_seconds=0)
    state = {"cursor": None}

    def run(*partitions: str, tags=None) -> set[tuple[str, str]]:
        for partition in partitions:
            assert dg.materialize(
                [automation_defs.eager_up], partition_key=partition, instance=instance, tags=tags or {}
            ).success
        result = sensor(
            dg.build_sensor_context(instance=instance, cursor=state["cursor"], definitions=automation_defs.defs)
        )
        state["cursor"] = result.cursor
        return {(k.to_user_string(), r.partition_key) for r in result.run_requests for k in r.asset_selection}

    run()
    return run


def test_downstream_of_a_backfill_is_left_to_that_backfill(light_tick):
    BackfillRecord(BackfillSpec(module="m", selection="group:eager"), id="covers").save()
    BackfillRecord(BackfillSpec(module="m", selection="key:eager_up"), id="upstream_only").save()
    assert light_tick("2024-01-05", tags={BACKFILL_ID_TAG: "covers"}) == set()
    assert light_tick("2024-01-07", tags={BACKFILL_ID_TAG: "upstream_only"}) == {("eager_down", "2024-01-07")}


def test_a_partition_targeted_by_a_run_in_flight_waits_for_it(instance, light_tick):
    waiting = instance.create_run_for_job(
        automation_defs.defs.resolve_implicit_global_asset_job_def(),
        asset_selection=frozenset({dg.AssetKey("eager_down")}),
        tags={"dagster/partition": "2024-01-05"},
        status=dg.DagsterRunStatus.NOT_STARTED,
    )
    assert light_tick("2024-01-05") == set()  # eager_down[2024-01-05] is already on its way
    assert light_tick() == set()  # not started yet: still waiting
    instance.report_run_canceled(waiting)  # it never ran: the partition is still not current
    assert light_tick() == {("eager_down", "2024-01-05")}


@pytest.mark.parametrize(
    "setting, running",
    [
        (None, set()),
        ("all", {"eager_partitions", "catch_up"}),
        ("catch_up", {"catch_up"}),
    ],
)
def test_sensors_run_by_default_only_when_named(monkeypatch, setting, running):
    if setting is None:
        monkeypatch.delenv("PARTITION_ASSETS_SENSORS", raising=False)
    else:
        monkeypatch.setenv("PARTITION_ASSETS_SENSORS", setting)
    sensors = build_definitions().sensors
    assert {s.name for s in sensors} == {"eager_partitions", "catch_up"}
    assert {s.name for s in sensors if s.default_status == dg.DefaultSensorStatus.RUNNING} == running


def test_frozen_assets_and_readers_of_frozen_assets_wait_for_the_unfreeze(instance, light_tick):
    freeze(instance, [dg.AssetKey("eager_down")], "bf1")
    assert light_tick("2024-01-05") == set()  # eager_down is being rewritten by bf1
    freeze(instance, [dg.AssetKey("eager_up")], "bf2")
    assert light_tick("2024-01-06") == set()  # and now its input too: not read while rewritten
    unfreeze(instance, "bf1")
    assert light_tick() == set()  # bf2 still rewrites the input
    unfreeze(instance, "bf2")
    assert light_tick() == {
        ("eager_down", "2024-01-05"),
        ("eager_down", "2024-01-06"),
        ("eager_pair", "2024-01-06"),
    }  # decided again once thawed, still not current
