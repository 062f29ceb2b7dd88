"""dagster-deltalake interoperability, both directions, on real Spark, Delta and Dagster:
its pyarrow IO manager reads a table SparkDeltaIOManager wrote, and SparkDeltaIOManager
reads a table it wrote, each filtered to exactly the mapped partitions.

One lake root serves both IO managers. The shared conventions (README "Reading tables
with dagster-deltalake"): asset metadata `partition_expr` names the partition column for
both, a time partition column is a date (dagster-deltalake filters time partitions on
date or timestamp columns), and a table lives at `<root>/<schema>/<table>`: a two-part
asset key, or metadata `schema` for a one-part key.
"""

import datetime

import dagster as dg
import pyarrow as pa
import pytest
from dagster_deltalake import DeltaLakePyarrowIOManager, LocalConfig
from deltalake import DeltaTable
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from partition_assets.partitions import daily, mappings
from partition_assets.run_tags import range_tags
from partition_assets.spark import SparkResource
from partition_assets.storage import DeltaFormat, PartitionScope, SparkDeltaIOManager, WriteOptions, partition_columns
from partition_assets_tests.support.results import failure_message

DAYS = daily("2024-03-01", end="2024-03-06")
FIRST_THREE_DAYS = ["2024-03-01", "2024-03-02", "2024-03-03"]


def rows_for(day: str) -> list[str]:
    """The ids stored for a day: one more each day, so that a read names its days."""
    return [f"{day}/{i}" for i in range(FIRST_THREE_DAYS.index(day) + 1)]


def day_of(context: dg.AssetExecutionContext) -> datetime.date:
    return context.partition_time_window.start.date()


@pytest.fixture
def materialize(spark_resource, lake, instance):
    def run(assets, selection, partition_key=None, tags=None):
        return dg.materialize(
            assets,
            selection=selection,
            partition_key=partition_key,
            tags=tags or {},
            instance=instance,
            raise_on_error=False,
            resources={
                "spark": spark_resource,
                "io_manager": SparkDeltaIOManager(root_uri=str(lake), spark=spark_resource),
                "arrow": DeltaLakePyarrowIOManager(root_uri=str(lake), storage_options=LocalConfig()),
            },
        )

    return run


# Spark writes (SparkDeltaIOManager), dagster-deltalake reads.


@dg.asset(
    key_prefix="sales",
    partitions_def=DAYS,
    backfill_policy=dg.BackfillPolicy.single_run(),
    metadata={"partition_expr": "ds"},
)
def orders(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    rows = [(order, day) for day in context.partition_keys for order in rows_for(day)]
    frame = spark.spark_session.createDataFrame(rows, "order string, ds string")
    return frame.withColumn("ds", F.to_date("ds"))  # a date: what dagster-deltalake filters on


@dg.asset(
    key_prefix="sales",
    partitions_def=DAYS,
    io_manager_key="arrow",
    metadata={"partition_expr": "ds"},
    ins={"orders": dg.AssetIn(key_prefix="sales", input_manager_key="arrow")},
)
def orders_read_by_arrow(context: dg.AssetExecutionContext, orders: pa.Table) -> pa.Table:
    return pa.table(
        {
            "orders_read": [",".join(sorted(orders["order"].to_pylist()))],
            "days_read": [",".join(sorted({str(day) for day in orders["ds"].to_pylist()}))],
            "ds": pa.array([day_of(context)], pa.date32()),
        }
    )


def test_dagster_deltalake_reads_a_table_spark_wrote_filtered_to_its_partition(materialize, lake):
    assert materialize([orders], ["sales/orders"], tags=range_tags("2024-03-01", "2024-03-03")).success
    written = DeltaTable(str(lake / "sales" / "orders"))
    assert written.metadata().partition_columns == ["ds"]
    assert pa.schema(written.schema().to_arrow()).field("ds").type == pa.date32()

    for day in ("2024-03-02", "2024-03-03"):
        result = materialize([orders, orders_read_by_arrow], ["sales/orders_read_by_arrow"], partition_key=day)
        assert result.success

    read = DeltaTable(str(lake / "sales" / "orders_read_by_arrow")).to_pyarrow_table().sort_by("ds").to_pylist()
    assert read == [
        {"orders_read": ",".join(rows_for("2024-03-02")), "days_read": "2024-03-02", "ds": datetime.date(2024, 3, 2)},
        {"orders_read": ",".join(rows_for("2024-03-03")), "days_read": "2024-03-03", "ds": datetime.date(2024, 3, 3)},
    ]


# dagster-deltalake writes, Spark reads (SparkDeltaIOManager as the input manager).


@dg.asset(partitions_def=DAYS, io_manager_key="arrow", metadata={"partition_expr": "ds", "schema": "public"})
def visits(context: dg.AssetExecutionContext) -> pa.Table:
    day = context.partition_key
    return pa.table({"visit": rows_for(day), "ds": pa.array([day_of(context)] * len(rows_for(day)), pa.date32())})


@dg.asset(
    partitions_def=DAYS,
    ins={"visits": dg.AssetIn(input_manager_key="io_manager", partition_mapping=mappings.rolling_window(2))},
)
def visits_read_by_spark(context: dg.AssetExecutionContext, visits: DataFrame) -> DataFrame:
    return visits.agg(
        F.concat_ws(",", F.sort_array(F.collect_list("visit"))).alias("visits_read"),
        F.concat_ws(",", F.sort_array(F.collect_set(F.date_format("ds", "yyyy-MM-dd")))).alias("days_read"),
    ).withColumn("ds", F.lit(context.partition_key))


def test_spark_reads_a_table_dagster_deltalake_wrote_filtered_to_its_mapped_partitions(materialize, lake):
    for day in FIRST_THREE_DAYS:
        assert materialize([visits], ["visits"], partition_key=day).success
    assert DeltaTable(str(lake / "public" / "visits")).metadata().partition_columns == ["ds"]

    result = materialize([visits, visits_read_by_spark], ["visits_read_by_spark"], partition_key="2024-03-03")

    assert result.success
    read = DeltaTable(str(lake / "visits_read_by_spark")).to_pyarrow_table().to_pylist()
    assert read == [
        {
            "visits_read": ",".join(rows_for("2024-03-02") + rows_for("2024-03-03")),
            "days_read": "2024-03-02,2024-03-03",
            "ds": "2024-03-03",
        }
    ]


@dg.asset(partitions_def=daily("20240301", end="20240306", fmt="%Y%m%d"))
def compact_days(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    return spark.spark_session.range(1).withColumn("ds", F.lit(day_of(context)))


def test_a_date_partition_column_needs_keys_that_are_iso_dates(materialize, lake):
    result = materialize([compact_days], ["compact_days"], partition_key="20240302")

    assert not result.success
    assert "keys ['20240302'] are not yyyy-MM-dd dates" in failure_message(result)
    assert not (lake / "compact_days" / "_delta_log").exists()


def test_one_metadata_entry_names_the_partition_column_and_folder_for_both_io_managers(spark_resource):
    """Pure logic: dagster-deltalake's `partition_expr` and `schema`, read by our IO manager."""
    regions = dg.StaticPartitionsDefinition(["emea", "apac"])
    by_region = dg.MultiPartitionsDefinition({"ds": DAYS, "region": regions})
    assert partition_columns(DAYS, {"partition_expr": "day"}) == ("day",)
    assert partition_columns(by_region, {"partition_expr": {"ds": "day", "region": "area"}}) == ("day", "area")
    # Our own names win where both are given.
    assert partition_columns(DAYS, {"partition_expr": "day", "partition_column": "ds"}) == ("ds",)

    io_manager = SparkDeltaIOManager(root_uri="/lake/", spark=spark_resource)
    assert io_manager.table_uri(dg.AssetKey("visits")) == "/lake/visits"
    assert io_manager.table_uri(dg.AssetKey(["sales", "orders"])) == "/lake/sales/orders"
    assert io_manager.table_uri(dg.AssetKey("visits"), {"schema": "public"}) == "/lake/public/visits"
    assert io_manager.table_uri(dg.AssetKey(["sales", "orders"]), {"schema": "crm"}) == "/lake/crm/orders"


def test_a_date_partitioned_table_stages_overlays_and_publishes_like_a_string_one(spark, lake):
    """What a staged backfill does to a table with a date partition column, at the format level."""
    table_uri = str(lake / "dated")
    delta = DeltaFormat()

    def frame(day: str, version: str) -> DataFrame:
        rows = [(f"{version}:{row}", day) for row in rows_for(day)]
        return spark.createDataFrame(rows, "id string, ds string").withColumn("ds", F.to_date("ds"))

    def scope(*days: str) -> PartitionScope:
        return PartitionScope.for_keys(DAYS, days, ("ds",))

    for day in FIRST_THREE_DAYS:
        delta.write(frame(day, "old"), table_uri, scope(day))
    delta.write(frame("2024-03-03", "old"), table_uri, scope("2024-03-03"))  # replaces, never duplicates
    delta.stage(frame("2024-03-02", "new"), table_uri, scope("2024-03-02"), WriteOptions(), "bf1")

    overlay = delta.read_overlay(spark, table_uri, scope("2024-03-01", "2024-03-02"), "bf1")
    assert sorted(row.id for row in overlay.collect()) == ["new:2024-03-02/0", "new:2024-03-02/1", "old:2024-03-01/0"]
    assert delta.missing_partitions(table_uri, scope("2024-03-02", "2024-03-04")) == {("2024-03-04",)}

    delta.publish_staged(table_uri, "bf1", None, {})
    published = DeltaTable(table_uri).to_pyarrow_table().sort_by("id").to_pylist()
    assert [(row["id"], str(row["ds"])) for row in published] == [
        ("new:2024-03-02/0", "2024-03-02"),
        ("new:2024-03-02/1", "2024-03-02"),
        ("old:2024-03-01/0", "2024-03-01"),
        *[(f"old:{id_}", "2024-03-03") for id_ in rows_for("2024-03-03")],
    ]
