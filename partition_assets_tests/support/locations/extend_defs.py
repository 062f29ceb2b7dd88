"""A code location for the tests of stored plans and `backfill extend`
(partition_assets_tests/integration/test_stored_plan.py, test_backfill_extend.py): two daily
assets that store nothing (`-> None`: their materializations are all a staged backfill
publishes), whose runs fail on the days the file `failing_days` lists, and wait while the file
`held_days` lists theirs, both one day a line in the folder of the instance the run belongs to,
read as each run goes (a test changes them between runs). `stored_days`, a Delta table under
the lake PARTITION_ASSETS_TEST_LAKE names, is never run: a backfill of it leases partitions
of a table (storage/leases.py) without Spark.
"""

import os
import tempfile
import time
from pathlib import Path

import dagster as dg
from pyspark.sql import DataFrame

from partition_assets.partitions import daily, mappings
from partition_assets.spark import SparkResource
from partition_assets.storage import SparkDeltaIOManager

DAYS = daily("2024-01-01")
FAILING_DAYS = "failing_days"
HELD_DAYS = "held_days"
LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"
_HELD_AT_MOST_SECONDS = 120.0


class ListedDayError(Exception):
    """A run of a day that `failing_days` lists: the user's code failing."""


def _listed(context: dg.AssetExecutionContext, name: str) -> bool:
    path = Path(context.instance.root_directory) / name
    return path.exists() and context.partition_key in path.read_text().split()


def _work(context: dg.AssetExecutionContext) -> None:
    waited = time.monotonic()
    while _listed(context, HELD_DAYS) and time.monotonic() - waited < _HELD_AT_MOST_SECONDS:
        time.sleep(0.05)
    if _listed(context, FAILING_DAYS):
        raise ListedDayError(f"{context.partition_key} is listed in {FAILING_DAYS}")


@dg.asset(partitions_def=DAYS)
def source(context: dg.AssetExecutionContext) -> None:
    _work(context)


@dg.asset(partitions_def=DAYS, deps=[dg.AssetDep(source, partition_mapping=mappings.identity())])
def report(context: dg.AssetExecutionContext) -> None:
    _work(context)


@dg.asset(partitions_def=DAYS, io_manager_key="delta_io_manager")
def stored_days(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    """A day's row, as a Delta table (never run by the tests: they lease its partitions)."""
    return spark.spark_session.createDataFrame([(context.partition_key,)], "ds string")


spark = SparkResource.from_env()
defs = dg.Definitions(
    assets=[source, report, stored_days],
    resources={
        "spark": spark,
        "delta_io_manager": SparkDeltaIOManager(
            root_uri=os.environ.get(LAKE_ENV) or str(Path(tempfile.gettempdir()) / "extend_defs_lake"), spark=spark
        ),
    },
)
