"""A code location whose tables are in the snapshot format (support/snapshot_format.py), a
format that is not Delta, picked the way a user picks one: its IO manager
(`SparkSnapshotIOManager`) names it. Two daily assets, each backfilled in one run:
`readings` tags each day's row with the word in the file `tag` of its instance's folder (read
as it runs: a test changes it between backfills), and
`tagged_days` reads `readings` (as the run's backfill sees it) and keeps its rows.
PARTITION_ASSETS_TEST_LAKE names the lake.
"""

import os
from pathlib import Path

import dagster as dg
from pyspark.sql import DataFrame

from partition_assets.partitions import daily
from partition_assets.spark import SparkResource
from partition_assets_tests.support.snapshot_format import SparkSnapshotIOManager

DAYS = daily("2024-01-01", end="2024-01-31")
LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"
TAG_FILE = "tag"
RANGE_RUN = dg.BackfillPolicy.single_run()  # one run per asset, however many days


@dg.asset(partitions_def=DAYS, backfill_policy=RANGE_RUN)
def readings(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    """One row per day: the day (`ds`) and the tag of the run that made it."""
    tag = (Path(context.instance.root_directory) / TAG_FILE).read_text().strip()
    rows = [(day, tag) for day in context.partition_keys]
    return spark.spark_session.createDataFrame(rows, "ds string, tag string")


@dg.asset(partitions_def=DAYS, backfill_policy=RANGE_RUN)
def tagged_days(readings: DataFrame) -> DataFrame:
    """The rows of `readings` it read."""
    return readings.select("ds", "tag")


spark = SparkResource.from_env()
defs = dg.Definitions(
    assets=[readings, tagged_days],
    resources={
        "spark": spark,
        "io_manager": SparkSnapshotIOManager(root_uri=os.environ.get(LAKE_ENV, ".lake-snapshot-tests"), spark=spark),
    },
)
