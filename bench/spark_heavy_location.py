"""A Spark-heavy daily asset, as a code location for `bench/isolation_bench.py --asset
spark-heavy`: each partition of `heavy_daily` aggregates PARTITION_ASSETS_BENCH_HEAVY_ROWS
generated rows (default 400 million, `spark.range`), seeded by its day: several seconds of
executor CPU on 2 cores, and next to nothing else (no input, no table written; its result
is its materialization's metadata). So the Spark server, not Dagster or the lake, is the
bottleneck when production and a backfill both run it.

Not guaranteed: that its seconds match a given machine's; set the rows for that.
"""

import os

import dagster as dg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from partition_assets import definitions
from partition_assets.partitions import daily
from partition_assets.spark import SparkResource

ROWS_ENV = "PARTITION_ASSETS_BENCH_HEAVY_ROWS"
DEFAULT_ROWS = 400_000_000
DAYS = daily("2024-01-01", end="2024-12-31")


@dg.asset(partitions_def=DAYS)
def heavy_daily(context: dg.AssetExecutionContext, spark: SparkResource) -> dg.MaterializeResult:
    """The sum of a hash of every generated row with the day, modulo a prime."""
    rows = int(os.environ.get(ROWS_ENV, str(DEFAULT_ROWS)))
    total = heavy_sum(spark.spark_session, rows, context.partition_key)
    return dg.MaterializeResult(metadata={"rows": rows, "checksum": total})


def heavy_sum(session: SparkSession, rows: int, day: str) -> int:
    """The sum of a hash of each of `rows` generated rows with `day`, modulo a prime: one Spark job."""
    hashed = F.xxhash64("id", F.lit(int(day.replace("-", "")))) % 1_000_003
    return int(session.range(rows).select(F.sum(hashed)).first()[0])


defs = definitions(assets=[heavy_daily], module=__file__, git_versions=False)
