"""partitioned_schedule's ticks (evaluated as in partition_assets_tests/unit/test_schedule.py) with
the requested runs executed for real: Spark, Delta tables through the IO manager, a real
Dagster instance."""

import threading

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from partition_assets.automation import SCHEDULE_TAG, SKIPPED_TICKS_TAG, TICK_TAG, partitioned_schedule
from partition_assets.spark import SparkResource
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.readers import delta_with_delta_rs
from partition_assets_tests.unit.test_schedule import (
    DAYS,
    MONDAY,
    TUESDAY,
    WEDNESDAY,
    WEEKDAYS_6AM,
    _days,
    _evaluate,
    _partitions,
)

ROWS_PER_DAY = 2


release_gated_run = threading.Event()


def _rows(spark: SparkResource, keys: list[str], source: str) -> DataFrame:
    frames = [
        spark.spark_session.range(ROWS_PER_DAY).select(
            F.col("id"), F.lit(key).alias("ds"), F.lit(source).alias("source")
        )
        for key in keys
    ]
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


@dg.asset(partitions_def=DAYS, backfill_policy=dg.BackfillPolicy.single_run())
def ranged(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    """A range-capable asset: every day of its run in one frame."""
    return _rows(spark, context.partition_keys, context.run.tags[TICK_TAG])


@dg.asset(partitions_def=DAYS)
def per_day(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    return _rows(spark, [context.partition_key], context.run.tags[TICK_TAG])


@dg.asset(partitions_def=DAYS, backfill_policy=dg.BackfillPolicy.single_run())
def gated(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    """Waits until the test releases it: a run that is still in flight at the next tick."""
    assert release_gated_run.wait(timeout=120), "the test never released the run"
    return _rows(spark, context.partition_keys, context.run.tags[TICK_TAG])


def _execute(run_assets, assets, data) -> list[dg.ExecuteInProcessResult]:
    """Runs each request of a tick as the daemon would launch it: its assets, partition and tags."""
    results = []
    for request in data.run_requests:
        result = run_assets(
            assets,
            request.asset_selection,
            partition_key=request.partition_key,
            tags=request.tags,
            raise_on_error=True,
        )
        results.append(result)
    return results


def _table(lake, name: str) -> dict[str, set[str]]:
    """Each day's sources (the tick that wrote it) in the asset's Delta table, via delta-rs."""
    frame = delta_with_delta_rs(lake / name)
    assert (frame.groupby("ds").size() == ROWS_PER_DAY).all()
    return {ds: set(group["source"]) for ds, group in frame.groupby("ds")}


def test_a_monday_tick_runs_for_real_one_range_run_and_runs_per_partition(run_assets, spark_resource, instance, lake):
    assets = [ranged, per_day]
    spark = {"spark": spark_resource}
    ranges = partitioned_schedule("key:ranged", WEEKDAYS_6AM, lookback=3, collect_gaps=True, name="ranges")
    singles = partitioned_schedule("key:per_day", WEEKDAYS_6AM, lookback=3, collect_gaps=True, name="singles")
    range_tick, single_tick = (_evaluate(assets, s, instance, MONDAY, spark) for s in (ranges, singles))
    assert len(range_tick.run_requests) == 1 and len(single_tick.run_requests) == 4
    runs = _execute(run_assets, assets, range_tick) + _execute(run_assets, assets, single_tick)
    assert all(r.success for r in runs)
    written = {day: {MONDAY.isoformat()} for day in ["2024-02-29", *_days(1, 2, 3)]}
    assert _table(lake, "ranged") == written
    assert _table(lake, "per_day") == written
    # Then Wednesday: its lookback restates Sunday..Tuesday, Thursday and Friday stay as Monday wrote them.
    _execute(run_assets, assets, _evaluate(assets, ranges, instance, WEDNESDAY, spark))
    restated = {day: {WEDNESDAY.isoformat()} for day in _days(2, 3, 4, 5)}
    assert _table(lake, "ranged") == {
        "2024-02-29": {MONDAY.isoformat()},
        "2024-03-01": {MONDAY.isoformat()},
        **restated,
    }


def test_a_tick_skips_while_a_run_of_the_schedule_is_in_flight_and_the_next_one_collects_it(
    run_assets, spark_resource, instance, lake
):
    """Monday's run is still running at Tuesday's tick: Tuesday skips rather than write the
    same partitions beside it; Wednesday, with Monday's run done, also requests what
    Tuesday would have (Monday's partition), so no partition is lost."""
    assets, spark = [gated], {"spark": spark_resource}
    schedule = partitioned_schedule("key:gated", WEEKDAYS_6AM, name="serial")
    monday = _evaluate(assets, schedule, instance, MONDAY, spark)
    assert _partitions(monday) == _days(3)
    release_gated_run.clear()
    in_flight = threading.Thread(target=_execute, args=(run_assets, assets, monday))
    in_flight.start()
    try:
        runs = wait_for(lambda: instance.get_runs(dg.RunsFilter(tags={SCHEDULE_TAG: "serial"})), timeout=60)
        tuesday = _evaluate(assets, schedule, instance, TUESDAY, spark)
        assert tuesday.run_requests == []
        assert f"run {runs[0].run_id}" in (tuesday.skip_message or "")
    finally:
        release_gated_run.set()
        in_flight.join()
    monday_run = instance.get_run_by_id(runs[0].run_id)
    assert monday_run.status == dg.DagsterRunStatus.SUCCESS
    assert monday_run.tags[SKIPPED_TICKS_TAG] == TUESDAY.isoformat()
    wednesday = _evaluate(assets, schedule, instance, WEDNESDAY, spark)
    # Tuesday's partition (Monday) and Wednesday's (Tuesday), in one range run.
    assert _partitions(wednesday) == ["2024-03-04...2024-03-05"]
    _execute(run_assets, assets, wednesday)
    assert _table(lake, "gated") == {
        "2024-03-03": {MONDAY.isoformat()},
        "2024-03-04": {WEDNESDAY.isoformat()},
        "2024-03-05": {WEDNESDAY.isoformat()},
    }


def test_leases_alone_let_an_earlier_ticks_late_run_overwrite_a_later_restatement(
    run_assets, spark_resource, instance, lake
):
    """Why the schedule serializes its runs: a lease covers one write, not a run, so when
    Monday's run (slow) writes after Wednesday's, both succeed and the days they share
    hold Monday's older restatement. A tick that skips while a run is in flight (above)
    never lets two runs of the schedule overlap."""
    assets, spark = [ranged], {"spark": spark_resource}
    schedule = partitioned_schedule("key:ranged", WEEKDAYS_6AM, lookback=3, name="unserialized")
    monday, wednesday = (_evaluate(assets, schedule, instance, tick, spark) for tick in (MONDAY, WEDNESDAY))
    assert _partitions(monday) == ["2024-02-29...2024-03-03"]
    assert _partitions(wednesday) == ["2024-03-02...2024-03-05"]
    _execute(run_assets, assets, wednesday)
    _execute(run_assets, assets, monday)  # the earlier tick's run finishing last
    table = _table(lake, "ranged")
    assert table["2024-03-02"] == table["2024-03-03"] == {MONDAY.isoformat()}
    assert table["2024-03-05"] == {WEDNESDAY.isoformat()}
