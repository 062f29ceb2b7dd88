"""The Delta flavour's full contract: concurrency, schema, scoping of every kind, time travel."""

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from partition_assets.partitions import daily, hourly, mappings, multi, static
from partition_assets.run_tags import range_tags
from partition_assets.spark import SparkResource
from partition_assets.storage import (
    DeltaFormat,
    PartitionScope,
    WriteOptions,
    replace_partitions,
)
from partition_assets.storage.delta import write as delta_write
from partition_assets.storage.delta.commit import commit
from partition_assets.storage.write_staging import StagedWrite, partitioned_frame, stage_dataframe
from partition_assets_tests.support.results import failure_message

DAYS = daily("2024-01-01")


def write_day(spark, table_uri: str, day: str, rows: int, tag: str):
    scope = PartitionScope.for_keys(DAYS, [day], ("ds",))
    frame = spark.range(rows).select(F.col("id"), F.lit(tag).alias("writer"))
    return DeltaFormat().write(frame, table_uri, scope)


def test_eight_concurrent_writers_to_eight_partitions_all_commit(spark, lake):
    uri = str(lake / "t")
    days = [f"2024-01-0{d}" for d in range(1, 9)]
    # Staging runs on Spark; the commits race, starting from a table that does not exist.
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda d: write_day(spark, uri, d, 5, d), days))
    table = DeltaTable(uri)
    frame = table.to_pandas()
    assert sorted(frame.ds.unique()) == days
    assert all((frame.ds == frame.writer).values)
    assert len(frame) == 8 * 5
    assert sorted(r.version for r in results) == list(range(8))
    assert table.version() == 7


def test_first_writes_racing_to_create_the_table_each_report_the_version_they_committed(lake):
    # delta-rs's own commit retry once let a create that lost the race land as version 1
    # while the write reported 0 (the version a materialization records and pins read).
    # Five races of six writers, each on a table of its own: a lost race shows in most.
    for race in range(5):
        template = StagedWrite(str(lake / f"t{race}"), "unused", pa.schema([("x", pa.int64())]), (), ())
        start_together = threading.Barrier(6)

        def first_write(_, template=template, start_together=start_together) -> int:
            start_together.wait()
            version, _removed = commit(None, template, [], None, {}, False, lambda current: None)
            return version

        with ThreadPoolExecutor(6) as pool:
            versions = sorted(pool.map(first_write, range(6)))
        assert versions == list(range(6)), f"race {race}"
        assert DeltaTable(template.table_uri).version() == 5


def test_concurrent_writers_to_one_partition_leave_one_whole_version(spark, lake):
    uri = str(lake / "t")
    write_day(spark, uri, "2024-01-01", 3, "before")
    with ThreadPoolExecutor(6) as pool:
        list(pool.map(lambda n: write_day(spark, uri, "2024-01-01", 10 + n, f"w{n}"), range(6)))
    frame = DeltaTable(uri).to_pandas()
    writers = frame.writer.unique()
    assert len(writers) == 1  # never a mix
    winner = int(writers[0][1:])
    assert len(frame) == 10 + winner
    assert DeltaTable(uri).version() == 6


def test_a_first_write_that_finds_the_table_created_meanwhile_still_lands(spark, lake, monkeypatch):
    uri = str(lake / "t")
    write_day(spark, uri, "2024-01-01", 3, "2024-01-01")
    open_table = delta_write.open_table
    looks = [None]  # the second writer looked before the first one created the table
    monkeypatch.setattr(
        delta_write, "open_table", lambda *args, **kw: looks.pop() if looks else open_table(*args, **kw)
    )
    assert write_day(spark, uri, "2024-01-02", 4, "2024-01-02").version == 1
    frame = DeltaTable(uri).to_pandas()
    assert (frame.ds == frame.writer).all()
    assert frame.groupby("ds").size().to_dict() == {"2024-01-01": 3, "2024-01-02": 4}


@pytest.fixture
def evolve(run_assets):
    def run(build_frame, day, metadata=None):
        @dg.asset(name="target", partitions_def=DAYS, metadata=metadata or {})
        def target(spark: SparkResource) -> DataFrame:
            return build_frame(spark.spark_session)

        return run_assets([target], ["target"], partition_key=day)

    return run


def base(spark):
    return spark.range(2).select(F.col("id"), F.lit("x").alias("name"))


def test_an_added_column_evolves_the_schema_when_allowed(lake, evolve):
    assert evolve(base, "2024-01-01").success
    wider = evolve(
        lambda s: base(s).withColumn("score", F.lit(1.5)),
        "2024-01-02",
        metadata={"allow_new_columns": True},
    )
    assert wider.success
    frame = DeltaTable(str(lake / "target")).to_pandas().sort_values(["ds", "id"])
    assert list(frame.columns) == ["id", "name", "ds", "score"]
    assert frame[frame.ds == "2024-01-01"].score.isna().all()
    assert (frame[frame.ds == "2024-01-02"].score == 1.5).all()


@pytest.mark.parametrize(
    ("build_frame", "expected"),
    [
        (lambda s: base(s).withColumn("score", F.lit(1.5)), "allow_new_columns=True"),
        (lambda s: base(s).drop("name"), "lacks column(s) ['name']"),
        (lambda s: base(s).withColumn("id", F.col("id").cast("string")), "id: int64 -> string"),
        (lambda s: base(s).withColumn("name", F.lit(1)), "name:"),
    ],
)
def test_schema_drift_fails_clearly_and_writes_nothing(lake, evolve, build_frame, expected):
    assert evolve(base, "2024-01-01").success
    before = DeltaTable(str(lake / "target"))
    failed = evolve(build_frame, "2024-01-01")
    assert not failed.success
    assert expected in failure_message(failed)
    after = DeltaTable(str(lake / "target"))
    assert after.version() == before.version()
    assert after.schema() == before.schema()
    assert not list((lake / "target" / "_staging").glob("*"))


BERLIN_HOURS = hourly("2024-10-27-00:00", end="2024-10-28-00:00", tz="Europe/Berlin")
REGIONS = static(["amer", "apac", "emea"])
BY_REGION = multi(ds=DAYS, region=REGIONS)


@dg.asset(partitions_def=BERLIN_HOURS, backfill_policy=dg.BackfillPolicy.single_run())
def berlin_hours(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    keys = context.partition_keys
    return spark.spark_session.createDataFrame([(k, i) for i, k in enumerate(keys)], "ds string, n long")


@dg.asset(partitions_def=BY_REGION)
def by_region(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    key = context.partition_key.keys_by_dimension
    return spark.spark_session.range(2).withColumn("tag", F.lit(f"{key['ds']}/{key['region']}"))


@dg.asset(
    partitions_def=DAYS,
    ins={"by_region": dg.AssetIn(partition_mapping=mappings.to_dimension("ds"))},
)
def regions_of_day(by_region: DataFrame) -> DataFrame:
    return by_region.groupBy().agg(F.concat_ws(",", F.array_sort(F.collect_set("region"))).alias("regions"))


def test_hourly_keys_in_a_dst_timezone_are_stored_as_key_strings(lake, run_assets):
    assert run_assets([berlin_hours], ["berlin_hours"], tags=range_tags("2024-10-27-00:00", "2024-10-27-23:00")).success
    frame = DeltaTable(str(lake / "berlin_hours")).to_pandas()
    assert len(frame) == 25 == frame.ds.nunique()
    assert {"2024-10-27-02:00", "2024-10-27-02:00+0100"} <= set(frame.ds)
    assert pa.schema(DeltaTable(str(lake / "berlin_hours")).schema().to_arrow()).field("ds").type in (
        pa.string(),
        pa.large_string(),
        pa.string_view(),
    )
    # Re-running the repeated hour replaces only that hour.
    assert run_assets([berlin_hours], ["berlin_hours"], partition_key="2024-10-27-02:00+0100").success
    again = DeltaTable(str(lake / "berlin_hours")).to_pandas()
    assert len(again) == 25
    assert again[again.ds == "2024-10-27-02:00"].n.tolist() == [2]


def test_multi_partition_keys_use_one_column_per_dimension(lake, run_assets):
    for key in ("2024-01-01|emea", "2024-01-01|apac", "2024-01-02|emea"):
        assert run_assets([by_region], ["by_region"], partition_key=key).success
    table = DeltaTable(str(lake / "by_region"))
    assert table.metadata().partition_columns == ["ds", "region"]
    frame = table.to_pandas()
    assert set(zip(frame.ds, frame.region)) == {("2024-01-01", "emea"), ("2024-01-01", "apac"), ("2024-01-02", "emea")}
    assert (frame.tag == frame.ds + "/" + frame.region).all()
    assert run_assets([by_region, regions_of_day], ["regions_of_day"], partition_key="2024-01-01").success
    assert DeltaTable(str(lake / "regions_of_day")).to_pandas().regions.tolist() == ["apac,emea"]


@dg.asset(partitions_def=DAYS)
def counter(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    run_number = len(context.instance.get_runs())
    return spark.spark_session.range(1).select(F.lit(run_number).alias("run_number"))


# input_manager_key makes Dagster offer the IO manager's input config (InputOptions) in run config.
@dg.asset(partitions_def=DAYS, ins={"counter": dg.AssetIn(input_manager_key="io_manager")})
def counter_copy(counter: DataFrame) -> DataFrame:
    return counter


@dg.asset(partitions_def=DAYS, ins={"counter": dg.AssetIn(metadata={"partitions": "all"})})
def all_counters(counter: DataFrame) -> DataFrame:
    return counter.select(F.count("*").alias("partitions_read"))


def test_an_input_pinned_to_a_version_reads_that_version(lake, run_assets):
    assert run_assets([counter], ["counter"], partition_key="2024-01-01").success  # version 0
    assert run_assets([counter], ["counter"], partition_key="2024-01-01").success  # version 1
    pinned = {"ops": {"counter_copy": {"inputs": {"counter": {"version": 0}}}}}
    assert run_assets([counter, counter_copy], ["counter_copy"], partition_key="2024-01-01", run_config=pinned).success
    at_version_0 = DeltaTable(str(lake / "counter"), version=0).to_pandas().run_number.tolist()
    assert at_version_0 != DeltaTable(str(lake / "counter")).to_pandas().run_number.tolist()
    assert DeltaTable(str(lake / "counter_copy")).to_pandas().run_number.tolist() == at_version_0
    history = DeltaTable(str(lake / "counter")).history()
    first_commit = min(h["timestamp"] for h in history)
    as_of = {"ops": {"counter_copy": {"inputs": {"counter": {"timestamp": _iso(first_commit + 1)}}}}}
    assert run_assets([counter, counter_copy], ["counter_copy"], partition_key="2024-01-01", run_config=as_of).success
    assert DeltaTable(str(lake / "counter_copy")).to_pandas().run_number.tolist() == at_version_0


def _iso(millis: int) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(millis / 1000, tz=UTC).isoformat()


def test_an_all_partitions_input_ignores_the_mapping(lake, run_assets):
    for day in ("2024-01-01", "2024-01-02", "2024-01-03"):
        assert run_assets([counter], ["counter"], partition_key=day).success
    assert run_assets([counter, all_counters], ["all_counters"], partition_key="2024-01-02").success
    assert DeltaTable(str(lake / "all_counters")).to_pandas().partitions_read.tolist() == [3]


def test_materialization_metadata_records_version_rows_and_files(lake, run_assets, instance):
    assert run_assets([by_region], ["by_region"], partition_key="2024-01-01|emea").success
    assert run_assets([by_region], ["by_region"], partition_key="2024-01-01|emea").success
    event = instance.get_latest_materialization_event(dg.AssetKey("by_region"))
    metadata = {k: v.value for k, v in event.asset_materialization.metadata.items()}
    table = DeltaTable(str(lake / "by_region"))
    assert metadata["delta_version"] == table.version() == 1
    assert metadata["rows"] == 2
    assert metadata["rows_by_partition"] == {"2024-01-01/emea": 2}
    assert metadata["files_added"] == len(table.file_uris())
    assert metadata["files_removed"] >= 1


def orders_asset(rows: list[tuple[int, str]], merge_keys=("order_id",), ds_of=None):
    @dg.asset(name="orders", partitions_def=DAYS, metadata={"merge_keys": list(merge_keys)})
    def orders(spark: SparkResource) -> DataFrame:
        frame = spark.spark_session.createDataFrame(rows, "order_id long, status string")
        return frame if ds_of is None else frame.withColumn("ds", F.lit(ds_of))

    return orders


def stored_orders(lake) -> dict[tuple[str, int], str]:
    frame = DeltaTable(str(lake / "orders")).to_pandas()
    return {(r.ds, r.order_id): r.status for r in frame.itertuples()}


def test_merge_upserts_on_keys_within_the_run_partition(lake, run_assets):
    assert run_assets(
        [orders_asset([(1, "new"), (2, "new"), (3, "new")])], ["orders"], partition_key="2024-01-01"
    ).success
    assert run_assets([orders_asset([(3, "new")])], ["orders"], partition_key="2024-01-02").success
    assert run_assets(
        [orders_asset([(2, "paid"), (3, "paid"), (4, "new")])], ["orders"], partition_key="2024-01-01"
    ).success
    assert stored_orders(lake) == {
        ("2024-01-01", 1): "new",
        ("2024-01-01", 2): "paid",
        ("2024-01-01", 3): "paid",
        ("2024-01-01", 4): "new",
        ("2024-01-02", 3): "new",  # the same key in another partition is not touched
    }
    assert DeltaTable(str(lake / "orders")).version() == 2


def test_an_unknown_merge_key_is_refused(lake, run_assets):
    assert run_assets([orders_asset([(1, "new")])], ["orders"], partition_key="2024-01-01").success
    failed = run_assets([orders_asset([(1, "paid")], merge_keys=("id",))], ["orders"], partition_key="2024-01-01")
    assert not failed.success
    assert "merge key(s) ['id']" in failure_message(failed)
    assert stored_orders(lake) == {("2024-01-01", 1): "new"}


def test_a_merge_refuses_to_commit_over_a_concurrent_write(spark, lake, monkeypatch):
    from partition_assets.errors import ConcurrentPartitionWriteError

    uri = str(lake / "t")
    write_day(spark, uri, "2024-01-01", 3, "first")
    scope = PartitionScope.for_keys(DAYS, ["2024-01-01"], ("ds",))
    incoming = spark.range(2).select(F.col("id"), F.lit("merged").alias("writer"))
    move_into_layout = delta_write.move_into_layout
    merging = True

    def move_after_a_concurrent_write(staged):
        nonlocal merging
        move_into_layout(staged)
        if merging:  # every merge attempt: a write lands between the merge's read and commit
            merging = False
            write_day(spark, uri, "2024-01-01", 5, "concurrent")
            merging = True

    monkeypatch.setattr(delta_write, "move_into_layout", move_after_a_concurrent_write)
    with pytest.raises(ConcurrentPartitionWriteError):
        DeltaFormat().write(incoming, uri, scope, WriteOptions(merge_keys=("id",)))
    assert set(DeltaTable(uri).to_pandas().writer) == {"concurrent"}


def test_several_staged_writes_publish_in_one_commit(spark, lake):
    """The shape write-audit-publish needs: stage each partition, then one commit for all."""
    uri = str(lake / "t")
    write_day(spark, uri, "2024-01-01", 2, "old")
    write_day(spark, uri, "2024-01-02", 2, "old")
    version = DeltaTable(uri).version()
    staged = []
    for day in ("2024-01-01", "2024-01-02"):
        scope = PartitionScope.for_keys(DAYS, [day], ("ds",))
        frame = spark.range(4).select(F.col("id"), F.lit("audited").alias("writer"))
        staged.append(stage_dataframe(frame, uri, scope))
    assert set(DeltaTable(uri).to_pandas().writer) == {"old"}  # staged, not visible
    both = PartitionScope.for_keys(DAYS, ["2024-01-01", "2024-01-02"], ("ds",))
    assert replace_partitions(staged, both).version == version + 1
    frame = DeltaTable(uri).to_pandas()
    assert set(frame.writer) == {"audited"} and len(frame) == 8


def test_a_write_of_several_multi_partition_keys_replaces_exactly_them(spark, lake):
    uri = str(lake / "m")
    keys = [f"{d}|{r}" for d in ("2024-01-01", "2024-01-02") for r in ("amer", "emea")]
    every = PartitionScope.for_keys(BY_REGION, keys, ("ds", "region"))
    rows = [(d, r, "old") for d, r in every.rows]
    DeltaFormat().write(spark.createDataFrame(rows, "ds string, region string, tag string"), uri, every)

    two = PartitionScope.for_keys(BY_REGION, ["2024-01-01|emea", "2024-01-02|amer"], ("ds", "region"))
    new_rows = [("2024-01-01", "emea", "new"), ("2024-01-02", "amer", "new")]
    DeltaFormat().write(spark.createDataFrame(new_rows, "ds string, region string, tag string"), uri, two)

    frame = DeltaTable(uri).to_pandas()
    assert {(r.ds, r.region): r.tag for r in frame.itertuples()} == {
        ("2024-01-01", "amer"): "old",
        ("2024-01-01", "emea"): "new",
        ("2024-01-02", "amer"): "new",
        ("2024-01-02", "emea"): "old",
    }


@pytest.mark.parametrize(
    ("columns", "keys"),
    [
        ("region string, ds string, tag string", ["2024-01-01|emea", "2024-01-02|amer"]),  # both there, reordered
        ("tag string, id bigint", ["2024-01-01|emea"]),  # both added, one partition
        ("region string, tag string", ["2024-01-02|amer"]),  # one added
        ("ds date, region string, tag string", ["2024-01-01|amer"]),  # a date partition column
        (None, None),  # no scope: the frame as it is
    ],
)
def test_the_schema_derived_for_a_partitioned_frame_is_the_one_spark_analyzes(spark, columns, keys):
    """stage_dataframe writes with the schema partitioned_frame derives without asking Spark
    again: column for column it is what Spark analyzes for the frame (types and nullability)."""
    scope = PartitionScope.for_keys(BY_REGION, keys, ("ds", "region")) if keys else None
    frame = spark.createDataFrame([], columns or "id bigint, tag string")
    partitioned, schema = partitioned_frame(frame, scope)
    assert schema == partitioned.schema
    assert schema.names[-2:] == (["ds", "region"] if scope else ["id", "tag"])


@dg.asset(ins={"counter": dg.AssetIn()})
def all_runs(counter: DataFrame) -> DataFrame:
    """Not partitioned: reads every partition of its partitioned upstream."""
    return counter.select(F.count("*").alias("partitions_read"))


def test_a_non_partitioned_downstream_reads_all_partitions(lake, run_assets):
    for day in ("2024-01-01", "2024-01-02", "2024-01-03"):
        assert run_assets([counter], ["counter"], partition_key=day).success
    assert run_assets([counter, all_runs], ["all_runs"]).success
    assert DeltaTable(str(lake / "all_runs")).to_pandas().partitions_read.tolist() == [3]


def test_a_changed_partitioning_is_refused(lake, run_assets):
    @dg.asset(name="target", partitions_def=DAYS)
    def daily_target(spark: SparkResource) -> DataFrame:
        return spark.spark_session.range(2)

    @dg.asset(name="target", partitions_def=REGIONS)
    def regional_target(spark: SparkResource) -> DataFrame:
        return spark.spark_session.range(2)

    assert run_assets([daily_target], ["target"], partition_key="2024-01-01").success
    failed = run_assets([regional_target], ["target"], partition_key="emea")
    assert not failed.success
    assert "partitioned by ['ds'] but this write by ['partition']" in failure_message(failed)
