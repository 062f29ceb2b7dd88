"""A code location for the safe-backfill tests: two Delta tables and a third fed by them.

`orders` is generated from its partition key; PARTITION_ASSETS_TEST_FACTOR scales its
amounts (a stand-in for a code fix that changes history). `revenue` sums them per day
and declares a validation gate. Every backfill event goes to the JSON-lines file
named by PARTITION_ASSETS_TEST_EVENTS (the notification hook under test).
"""

import json
import os
import time
from pathlib import Path

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from partition_assets.automation import sparse_backfill_job
from partition_assets.backfill.planning.gate_rules import Budget, backfill_gate
from partition_assets.backfill.publishing.notify import HOOK_RESOURCE_KEY, BackfillEvent
from partition_assets.partitions import daily, mappings
from partition_assets.spark import SparkResource
from partition_assets.storage import SparkDeltaIOManager

DAYS = daily("2024-01-01", end="2024-01-31")
FACTOR_ENV = "PARTITION_ASSETS_TEST_FACTOR"
SLOW_ENV = "PARTITION_ASSETS_TEST_SLOW_SECONDS"  # a pause in every node: time to look at a running backfill
EVENTS_ENV = "PARTITION_ASSETS_TEST_EVENTS"
REVENUE_CEILING_ENV = "PARTITION_ASSETS_TEST_REVENUE_CEILING"  # the blocking check's limit (none when unset)
LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"
ORDERS_PER_DAY = 6


def orders_frame(spark, day: str, factor: float) -> DataFrame:
    """The orders of `day`: ORDERS_PER_DAY rows whose amounts are scaled by `factor`."""
    return spark.range(ORDERS_PER_DAY).select(
        F.concat(F.lit(day), F.lit("-"), F.col("id").cast("string")).alias("order_id"),
        ((F.col("id") + 1) * F.lit(factor)).cast("double").alias("amount"),
        F.lit(day).alias("ds"),
    )


@dg.asset(
    partitions_def=DAYS,
    metadata=backfill_gate(row_change=0.5, keys=["order_id"]),
)
def orders(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    time.sleep(float(os.environ.get(SLOW_ENV, "0")))
    return orders_frame(spark.spark_session, context.partition_key, float(os.environ.get(FACTOR_ENV, "1")))


@dg.asset(
    partitions_def=DAYS,
    ins={"orders": dg.AssetIn(partition_mapping=mappings.identity())},
    metadata=backfill_gate(measures={"revenue": Budget(relative=0.5)}),
)
def revenue(context: dg.AssetExecutionContext, orders: DataFrame) -> DataFrame:
    time.sleep(float(os.environ.get(SLOW_ENV, "0")))
    return orders.groupBy("ds").agg(F.sum("amount").alias("revenue"), F.count("*").alias("orders"))


@dg.asset(
    partitions_def=DAYS,
    ins={"revenue": dg.AssetIn(partition_mapping=mappings.identity())},
)
def revenue_report(context: dg.AssetExecutionContext, revenue: DataFrame) -> DataFrame:
    return revenue.select("ds", (F.col("revenue") / F.col("orders")).alias("average_order"))


@dg.asset_check(asset=revenue, blocking=True)
def revenue_below_ceiling(revenue: DataFrame) -> dg.AssetCheckResult:
    """Fails when a day's revenue exceeds PARTITION_ASSETS_TEST_REVENUE_CEILING."""
    ceiling = float(os.environ.get(REVENUE_CEILING_ENV, "inf"))
    top = revenue.agg(F.max("revenue")).first()[0] or 0.0
    return dg.AssetCheckResult(passed=top <= ceiling, metadata={"max_revenue": top})


def record_event(event: BackfillEvent) -> None:
    """Appends `event` to the file PARTITION_ASSETS_TEST_EVENTS names (when set)."""
    path = os.environ.get(EVENTS_ENV)
    if path:
        with Path(path).open("a") as out:
            out.write(json.dumps({"kind": event.kind, "backfill_id": event.backfill_id}) + "\n")


spark = SparkResource.from_env()
defs = dg.Definitions(
    assets=[orders, revenue, revenue_report],
    asset_checks=[revenue_below_ceiling],
    resources={
        "spark": spark,
        "io_manager": SparkDeltaIOManager(root_uri=os.environ.get(LAKE_ENV, ".lake-safe-tests"), spark=spark),
        HOOK_RESOURCE_KEY: record_event,
    },
)


def backfill_job() -> dg.JobDefinition:
    """The engine's coordinator job over this code location (reconstructable by name, as a
    run worker rebuilds it)."""
    return sparse_backfill_job("partition_assets_tests.support.locations.safe_defs")
