"""The Parquet flavour: the same scoping and validation as Delta, and the weaker
atomicity its module documents, shown as it is."""

import signal
import subprocess
import sys

import dagster as dg
import pandas as pd
import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from partition_assets.errors import VacuumRetentionError
from partition_assets.partitions import daily, mappings
from partition_assets.run_tags import range_tags
from partition_assets.spark import SparkResource
from partition_assets.storage import ParquetFormat, SparkParquetIOManager, vacuum
from partition_assets.storage.failpoints import ENV
from partition_assets_tests.support import REPO
from partition_assets_tests.support.example_tables import EXAMPLE_ASSETS
from partition_assets_tests.support.locations.probe_assets import numbers
from partition_assets_tests.support.readers import (
    canonical,
    parquet_with_duckdb,
    parquet_with_pyarrow,
)
from partition_assets_tests.support.results import failure_message
from partition_assets_tests.support.retention import backdate

DAYS = daily("2024-01-01")


def read(lake, name) -> pd.DataFrame:
    """The table as a plain Hive-partitioned Parquet reader sees it (pyarrow, not Spark)."""
    return parquet_with_pyarrow(lake / name)


def files_of(lake, name) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (lake / name).glob("ds=*/*.parquet"):
        found.setdefault(path.parent.name.split("=", 1)[1], set()).add(path.name)
    return found


@pytest.fixture
def run_parquet(run_assets):
    def run(assets, selection, **kwargs):
        return run_assets(assets, selection, io_manager=SparkParquetIOManager, **kwargs)

    return run


def test_partition_scoped_writes_and_filtered_reads(lake, run_parquet):
    assert run_parquet(EXAMPLE_ASSETS, ["events"], tags=range_tags("2024-01-01-00:00", "2024-01-03-23:00")).success
    assert run_parquet(EXAMPLE_ASSETS, ["daily_orders"], tags=range_tags("2024-01-01", "2024-01-03")).success
    before = files_of(lake, "daily_orders")
    orders_before = read(lake, "daily_orders")

    assert run_parquet(EXAMPLE_ASSETS, ["daily_orders"], partition_key="2024-01-02").success

    after = files_of(lake, "daily_orders")
    assert after["2024-01-01"] == before["2024-01-01"] and after["2024-01-03"] == before["2024-01-03"]
    assert after["2024-01-02"].isdisjoint(before["2024-01-02"])
    key = ["ds", "region"]
    assert (
        read(lake, "daily_orders")
        .sort_values(key)
        .reset_index(drop=True)
        .equals(orders_before.sort_values(key).reset_index(drop=True))
    )
    events = read(lake, "events")
    day_two = events[events.ds.str.startswith("2024-01-02")]
    stored = read(lake, "daily_orders").set_index(key).loc["2024-01-02"]
    assert stored.orders.sum() == len(day_two)


def test_tables_read_the_same_through_duckdb_pyarrow_and_spark(lake, run_parquet, spark):
    assert run_parquet(EXAMPLE_ASSETS, ["events"], tags=range_tags("2024-01-01-00:00", "2024-01-01-05:00")).success
    for asset in ("countries", "regions"):
        first, last = ("br", "us") if asset == "countries" else ("amer", "emea")
        assert run_parquet(EXAMPLE_ASSETS, [asset], tags=range_tags(first, last)).success
    for asset in ("events", "countries", "regions"):
        table = lake / asset
        with_spark = ParquetFormat().read(spark, str(table), None).toPandas()
        assert canonical(parquet_with_duckdb(table)) == canonical(parquet_with_pyarrow(table))
        assert canonical(parquet_with_duckdb(table)) == canonical(with_spark)


@dg.asset(partitions_def=DAYS, ins={"numbers": dg.AssetIn(partition_mapping=mappings.rolling_window(3))})
def window(numbers: DataFrame) -> DataFrame:
    return numbers.groupBy().agg(F.concat_ws(",", F.array_sort(F.collect_set("ds"))).alias("days"))


@dg.asset(partitions_def=DAYS, ins={"numbers": dg.AssetIn(metadata={"version": 0})})
def pinned(numbers: DataFrame) -> DataFrame:
    return numbers


def test_rolling_window_reads_only_its_partitions(lake, run_parquet):
    assert run_parquet([numbers], ["numbers"], tags=range_tags("2024-01-01", "2024-01-10")).success
    assert run_parquet([numbers, window], ["window"], partition_key="2024-01-05").success
    assert read(lake, "window").days.tolist() == ["2024-01-03,2024-01-04,2024-01-05"]


def test_time_travel_is_refused_with_a_clear_error(lake, run_parquet):
    assert run_parquet([numbers], ["numbers"], partition_key="2024-01-05").success
    result = run_parquet([numbers, pinned], ["pinned"], partition_key="2024-01-05")
    assert not result.success
    assert "keeps no versions" in failure_message(result)


@pytest.mark.parametrize(
    ("build_frame", "expected"),
    [
        (lambda s: s.range(3).withColumn("ds", F.lit("2024-01-09")), "outside this run"),
        (lambda s: s.range(3).withColumn("id", F.col("id").cast("string")), "id: int64 -> string"),
        (lambda s: s.range(3).withColumn("extra", F.lit(1)), "allow_new_columns=True"),
        (lambda s: s.range(0), "no rows"),
    ],
)
def test_bad_output_changes_nothing(lake, run_parquet, build_frame, expected):
    def target_asset(build):
        @dg.asset(name="target", partitions_def=DAYS)
        def target(spark: SparkResource) -> DataFrame:
            return build(spark.spark_session)

        return target

    assert run_parquet([target_asset(lambda s: s.range(3))], ["target"], partition_key="2024-01-05").success
    before = read(lake, "target")
    failed = run_parquet([target_asset(build_frame)], ["target"], partition_key="2024-01-05")
    assert not failed.success
    assert expected in failure_message(failed)
    assert read(lake, "target").equals(before)
    assert not list((lake / "target" / "_staging").glob("*"))


def test_an_added_column_evolves_when_allowed(lake, run_parquet, spark):
    def target_asset(build, metadata):
        @dg.asset(name="target", partitions_def=DAYS, metadata=metadata)
        def target(spark: SparkResource) -> DataFrame:
            return build(spark.spark_session)

        return target

    assert run_parquet([target_asset(lambda s: s.range(2), {})], ["target"], partition_key="2024-01-01").success
    wider = target_asset(lambda s: s.range(2).withColumn("score", F.lit(2.5)), {"allow_new_columns": True})
    assert run_parquet([wider], ["target"], partition_key="2024-01-02").success
    frame = ParquetFormat().read(spark, str(lake / "target"), None).toPandas().sort_values(["ds", "id"])
    assert list(frame.columns) == ["id", "score", "ds"]
    assert frame[frame.ds == "2024-01-01"].score.isna().all()
    assert (frame[frame.ds == "2024-01-02"].score == 2.5).all()


WRITER = """
import sys
from pyspark.sql import functions as F
from partition_assets.partitions import daily
from partition_assets.spark import SparkResource
from partition_assets.storage import ParquetFormat, PartitionScope
spark = SparkResource.from_env().spark_session
keys = ["2024-01-01", "2024-01-02", "2024-01-03"]
scope = PartitionScope.for_keys(daily("2024-01-01"), keys, ("ds",))
frame = spark.range(30).select("id", F.lit(sys.argv[2]).alias("tag"),
    F.element_at(F.array(*[F.lit(k) for k in keys]), (F.col("id") % 3 + 1).cast("int")).alias("ds"))
ParquetFormat().write(frame, sys.argv[1], scope)
"""


def write(uri: str, tag: str, failpoint: str | None = None) -> int:
    import os

    env = {k: v for k, v in os.environ.items() if k != ENV}
    if failpoint:
        env[ENV] = failpoint
    return subprocess.run([sys.executable, "-c", WRITER, uri, tag], env=env, cwd=REPO).returncode


@pytest.mark.slow
def test_a_killed_publish_can_leave_a_mix_of_partitions_which_a_rerun_repairs(lake):
    uri = str(lake / "t")
    assert write(uri, "old") == 0
    # Killed after the first partition's swap: unlike Delta, readers now see a mix.
    assert write(uri, "new", failpoint="publishing") == -signal.SIGKILL
    mixed = read(lake, "t").groupby("ds").tag.agg(set).to_dict()
    assert mixed == {"2024-01-01": {"new"}, "2024-01-02": {"old"}, "2024-01-03": {"old"}}
    assert write(uri, "new") == 0
    repaired = read(lake, "t")
    assert len(repaired) == 30 and set(repaired.tag) == {"new"}


def test_merge_is_refused_for_parquet(lake, run_parquet):
    @dg.asset(name="orders", partitions_def=DAYS, metadata={"merge_keys": ["id"]})
    def orders(spark: SparkResource) -> DataFrame:
        return spark.spark_session.range(2)

    failed = run_parquet([orders], ["orders"], partition_key="2024-01-01")
    assert not failed.success
    assert "merge_keys need the Delta flavour" in failure_message(failed)
    assert not (lake / "orders").exists() or not list((lake / "orders").rglob("*.parquet"))


def test_vacuum_deletes_what_killed_writes_left(lake, run_parquet):
    assert run_parquet([numbers], ["numbers"], partition_key="2024-01-05").success
    before = read(lake, "numbers")
    leftovers = [lake / "numbers" / "_trash" / "a" / "ds=2024-01-04", lake / "numbers" / "_staging" / "b"]
    for folder in leftovers:
        folder.mkdir(parents=True)
        (folder / "part-0.parquet").write_bytes(b"")
        backdate(folder.parent, 2)  # past the retention, which is at least an hour
    table = str(lake / "numbers")
    with pytest.raises(VacuumRetentionError, match="retention 0.5 hours is refused"):
        ParquetFormat().vacuum(table, 0.5, dry_run=False)
    assert all(folder.exists() for folder in leftovers)
    vacuum(table, retention_hours=1)
    assert not any(folder.exists() for folder in leftovers)
    assert read(lake, "numbers").equals(before)
