"""What the eager sensor requests over the example pipeline's mappings (fan-in, cron,
multi-dimension, self-dependency), evaluated against a real instance whose
materializations are reported without running Spark. (On PostgreSQL, an event that commits
after a higher-numbered one was read: partition_assets_tests/e2e/test_eager_on_postgres.py.)"""

import json

import dagster as dg
import pytest

from partition_assets.automation import eager, eager_partitions_sensor
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing.freeze import freeze, unfreeze
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.errors import SensorConfigError
from partition_assets.example import defs, sources
from partition_assets.example.definitions import build_definitions
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets_tests.support.locations import automation_defs
from partition_assets_tests.support.node_runs import materialize_as

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
def light_tick(instance):
    """Like `tick`, over the light automation code location, materializing through Dagster."""
    sensor = eager_partitions_sensor("group:eager", watch_seconds=0)
    state = {"cursor": None}

    def run(*partitions: str, tags=None, node_run_of: str | None = None) -> set[tuple[str, str]]:
        """`node_run_of`: materialize as a node run of that backfill (its lease proof), else as production."""
        for partition in partitions:
            assert materialize_as([automation_defs.eager_up], instance, partition, tags, node_run_of).success
        result = sensor(
            dg.build_sensor_context(instance=instance, cursor=state["cursor"], definitions=automation_defs.defs)
        )
        state["cursor"] = result.cursor
        return {(k.to_user_string(), r.partition_key) for r in result.run_requests for k in r.asset_selection}

    run()
    return run


def test_downstream_of_a_backfill_is_left_to_that_backfill(instance, light_tick):
    store = BackfillStore(instance)
    BackfillRecord(BackfillSpec(module="m", selection="group:eager"), id="covers", store=store).save()
    BackfillRecord(BackfillSpec(module="m", selection="key:eager_up"), id="upstream_only", store=store).save()
    assert light_tick("2024-01-05", node_run_of="covers") == set()
    assert light_tick("2024-01-07", node_run_of="upstream_only") == {("eager_down", "2024-01-07")}


def test_a_production_run_tagged_with_a_finished_backfill_s_id_gets_its_children_refreshed(instance, light_tick):
    """Issue 50 hole 9: a production run carrying the id tag of a long-finished backfill (typed in
    the Launchpad, or copied by re-executing one of its node runs) got no eager refresh of its
    children, as if that backfill would run them. Only a node run's lease proof shows a backfill."""
    store = BackfillStore(instance)
    BackfillRecord(BackfillSpec(module="m", selection="group:eager"), id="covers", store=store).save()
    assert light_tick("2024-01-05", tags={BACKFILL_ID_TAG: "covers"}) == {("eager_down", "2024-01-05")}


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


def test_the_read_window_takes_each_id_once_and_gives_up_on_ids_width_below_the_top():
    read = eager.ReadIds(floor=10, top=10)
    # 11 is numbered but not committed yet: 12 is read first.
    taken, read = read.take([12], top=12, width=5)
    assert (taken, read) == ({12}, eager.ReadIds(10, 12, frozenset({12})))
    # The next read queries the window again: 11 is new, 12 is not.
    taken, read = read.take([11, 12], top=12, width=5)
    assert (taken, read) == ({11}, eager.ReadIds(10, 12, frozenset({11, 12})))
    # The window follows the top: ids 5 or more below it are no longer queried, nor kept.
    taken, read = read.take([11, 12, 16], top=16, width=5)
    assert (taken, read) == ({16}, eager.ReadIds(11, 16, frozenset({12, 16})))
    # 13-15 still missing when the top is 18: 13 is given up on (the docstring's bound).
    taken, read = read.take([12, 16], top=18, width=5)
    assert (taken, read) == (set(), eager.ReadIds(13, 18, frozenset({16})))


def test_a_cursor_written_before_the_window_still_parses(instance):
    sensor = eager_partitions_sensor("group:eager", watch_seconds=0)
    instance.report_runless_asset_event(dg.AssetMaterialization("eager_up", partition="2024-01-04"))
    old_cursor = json.dumps({"after": instance.event_log_storage.get_maximum_record_id(), "pending": []})
    instance.report_runless_asset_event(dg.AssetMaterialization("eager_up", partition="2024-01-05"))
    result = sensor(dg.build_sensor_context(instance=instance, cursor=old_cursor, definitions=automation_defs.defs))
    # Everything up to "after" counts as read: 2024-01-04 is not replayed.
    assert {(k.to_user_string(), r.partition_key) for r in result.run_requests for k in r.asset_selection} == {
        ("eager_down", "2024-01-05"),
        ("eager_pair", "2024-01-05"),
    }


@pytest.mark.parametrize("rescan_ids", [0, -5, 2.5, "1000", True])
def test_a_bad_rescan_window_is_refused_when_the_sensor_is_defined(rescan_ids):
    with pytest.raises(SensorConfigError) as refused:
        eager_partitions_sensor("key:eager_down", rescan_ids=rescan_ids)
    message = str(refused.value)
    assert f"rescan_ids={rescan_ids!r}" in message and "at least 1" in message and "No sensor was defined" in message
