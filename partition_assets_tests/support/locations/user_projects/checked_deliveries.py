"""Daily deliveries in a Delta table (SparkDeltaIOManager: a staged backfill holds them back
until it publishes, then records their materializations), judged by three asset checks as
Dagster users write them: a blocking one, a partitioned one and a warning that always fails.
PARTITION_ASSETS_TEST_LAKE names the lake."""

import os

import dagster as dg
from pyspark.sql import DataFrame

from partition_assets.partitions import daily
from partition_assets.spark import SparkResource
from partition_assets.storage import SparkDeltaIOManager

DAYS = daily("2024-01-01")
LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"


@dg.asset(partitions_def=DAYS)
def deliveries(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    return spark.spark_session.createDataFrame([(1, context.partition_key)], "id long, ds string")


@dg.asset_check(asset=deliveries, blocking=True)
def deliveries_arrived() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True)


@dg.asset_check(asset=deliveries, partitions_def=DAYS)
def deliveries_of_the_day(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True, metadata={"day": context.partition_key})


@dg.asset_check(asset=deliveries)
def no_returns() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.WARN)


spark = SparkResource.from_env()
defs = dg.Definitions(
    assets=[deliveries],
    asset_checks=[deliveries_arrived, deliveries_of_the_day, no_returns],
    resources={"spark": spark, "io_manager": SparkDeltaIOManager(root_uri=os.environ[LAKE_ENV], spark=spark)},
)
