"""Small assets shared by the storage tests."""

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from partition_assets.partitions import daily
from partition_assets.spark import SparkResource

DAYS = daily("2024-01-01")
ROWS_PER_DAY = 3


@dg.asset(partitions_def=DAYS, backfill_policy=dg.BackfillPolicy.single_run())
def numbers(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    """ROWS_PER_DAY rows for each day of the run, in one Spark job."""
    keys = context.partition_keys
    day = F.element_at(F.array(*[F.lit(k) for k in keys]), (F.floor(F.col("id") / ROWS_PER_DAY) + 1).cast("int"))
    return spark.spark_session.range(len(keys) * ROWS_PER_DAY).select(F.col("id"), day.alias("ds"))
