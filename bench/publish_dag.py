"""The engine benchmark's 5-asset DAG (bench/engine_dag.py) with real Delta tables:
each node sleeps its 0.5-1 s of simulated work, reads its inputs through the IO
manager and writes a small frame, so staging, the overlay, the gate and the publish
commits all take part.

ENGINE_DAG_BACKFILL_POLICY chooses the policy as in engine_dag (`none`: Dagster's
default, one partition per run). PUBLISH_BENCH_LAKE is the lake's folder.
"""

import os
import time

import dagster as dg
from engine_dag import DAYS, POLICY, work_seconds
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from partition_assets.partitions import mappings, monthly
from partition_assets.spark import SparkResource
from partition_assets.storage import SparkDeltaIOManager

ROWS_PER_PARTITION = 50


def _work(context: dg.AssetExecutionContext) -> None:
    asset = context.asset_key.to_user_string()
    time.sleep(sum(work_seconds(asset, key) for key in context.partition_keys))


def _rows(spark: SparkResource, keys: list[str], value: F.Column | None = None) -> DataFrame:
    """ROWS_PER_PARTITION rows for each partition key."""
    days = spark.spark_session.createDataFrame([(key,) for key in keys], "ds string")
    frame = days.crossJoin(spark.spark_session.range(ROWS_PER_PARTITION))
    return frame.select("id", (value if value is not None else F.col("id")).cast("double").alias("value"), "ds")


@dg.asset(partitions_def=DAYS, backfill_policy=POLICY)
def raw(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    _work(context)
    return _rows(spark, context.partition_keys)


@dg.asset(partitions_def=DAYS, backfill_policy=POLICY, ins={"raw": dg.AssetIn(partition_mapping=mappings.identity())})
def clean(context: dg.AssetExecutionContext, raw: DataFrame) -> DataFrame:
    _work(context)
    return raw.withColumn("value", F.col("value") * 2)


@dg.asset(
    partitions_def=DAYS,
    backfill_policy=POLICY,
    ins={"clean": dg.AssetIn(partition_mapping=mappings.rolling_window(7))},
)
def rolling_7d(context: dg.AssetExecutionContext, clean: DataFrame, spark: SparkResource) -> DataFrame:
    _work(context)
    total = clean.agg(F.sum("value")).first()[0] or 0.0
    return _rows(spark, context.partition_keys, F.lit(total))


@dg.asset(
    partitions_def=DAYS,
    backfill_policy=POLICY,
    ins={
        "clean": dg.AssetIn(partition_mapping=mappings.identity()),
        "previous": mappings.self_dependency("running_total"),
    },
)
def running_total(context: dg.AssetExecutionContext, clean: DataFrame, previous: DataFrame | None) -> DataFrame:
    _work(context)
    return clean.select("id", "value", "ds")


@dg.asset(
    partitions_def=monthly("2024-01-01"),
    backfill_policy=POLICY,
    ins={"clean": dg.AssetIn(partition_mapping=mappings.fan_in())},
)
def monthly_summary(context: dg.AssetExecutionContext, clean: DataFrame) -> DataFrame:
    _work(context)
    month = F.date_format(F.col("ds"), "yyyy-MM-01").alias("ds")
    return clean.groupBy("id", month).agg(F.sum("value").alias("value")).select("id", "value", "ds")


spark = SparkResource.from_env()
defs = dg.Definitions(
    assets=[raw, clean, rolling_7d, running_total, monthly_summary],
    resources={
        "spark": spark,
        "io_manager": SparkDeltaIOManager(
            root_uri=os.environ.get("PUBLISH_BENCH_LAKE", ".lake-publish-bench"), spark=spark
        ),
    },
)
