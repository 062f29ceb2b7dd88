"""A code location for the retract tests (partition_assets_tests/integration/test_retracting.py):
`events`, a Delta table of ROWS_PER_DAY rows a day, and `daily_counts`, derived from it day by
day. Both run over a range of days in one run. PARTITION_ASSETS_TEST_LAKE names the lake; the
tests load this file with the lake's path written into a copy (a module is imported once per
process, a file's text is its key: code_location.load_definitions).
"""

import os

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from partition_assets.backfill.planning.gate_rules import backfill_gate
from partition_assets.partitions import daily, mappings
from partition_assets.spark import SparkResource
from partition_assets.storage import SparkDeltaIOManager

DAYS = daily("2024-01-01", end="2024-01-11")  # end exclusive: ten days
ROWS_PER_DAY = 3
LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"


@dg.asset(
    partitions_def=DAYS,
    backfill_policy=dg.BackfillPolicy.single_run(),
    metadata=backfill_gate(row_change=0.5),  # a retract fails it, announcing each day going to zero rows
)
def events(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    days = context.partition_keys
    return spark.spark_session.createDataFrame(
        [(index, day) for day in days for index in range(ROWS_PER_DAY)], "event_id long, ds string"
    )


@dg.asset(
    partitions_def=DAYS,
    backfill_policy=dg.BackfillPolicy.single_run(),
    ins={"events": dg.AssetIn(partition_mapping=mappings.identity())},
)
def daily_counts(events: DataFrame) -> DataFrame:
    return events.groupBy("ds").agg(F.count("*").alias("events"))


lake = os.environ.get(LAKE_ENV, ".lake-retract-tests")
spark = SparkResource.from_env()
resources = {"spark": spark, "io_manager": SparkDeltaIOManager(root_uri=lake, spark=spark)}
defs = dg.Definitions(assets=[events, daily_counts], resources=resources)
