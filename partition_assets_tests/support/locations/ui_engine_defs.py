"""The example code location plus three assets for the webserver engine tests: `held`, whose
runs wait until the test releases them (so a backfill is deterministically running when
the test cancels it), `quick`, which does nothing, and `adjusted`, gated, whose amounts
scale by the number in the file `factor` of the release folder (a stand-in for a code fix
that changes history: its backfill's gate fails when the factor moves them too far)."""

import os
import time
from pathlib import Path

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from partition_assets.backfill.dagster_ui.gate_asset_checks import gate_checks
from partition_assets.backfill.planning.gate_rules import Budget, backfill_gate
from partition_assets.example import definitions as example
from partition_assets.partitions import daily
from partition_assets.spark import SparkResource

DAYS = daily("2024-01-01")
# A folder the test names; a file `<partition>` (or `all`) in it releases held's runs of that partition.
RELEASE_DIR_ENV = "PARTITION_ASSETS_TEST_RELEASE_DIR"
HOLD_LIMIT_SECONDS = 300
FACTOR_FILE = "factor"
ADJUSTED_ROWS = 3


@dg.asset(partitions_def=DAYS)
def held(context: dg.AssetExecutionContext) -> None:
    """Returns once its partition is released (at most HOLD_LIMIT_SECONDS, then fails)."""
    folder = Path(os.environ[RELEASE_DIR_ENV])
    deadline = time.monotonic() + HOLD_LIMIT_SECONDS
    while not (folder / context.partition_key).exists() and not (folder / "all").exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"held[{context.partition_key}] was not released within {HOLD_LIMIT_SECONDS} s")
        time.sleep(0.1)


@dg.asset(partitions_def=DAYS)
def quick() -> None:
    """Nothing to do: a backfill of it costs only the engine's bookkeeping."""


def adjusted_factor() -> float:
    """The number in the release folder's `factor` file (1 without one)."""
    path = Path(os.environ[RELEASE_DIR_ENV]) / FACTOR_FILE
    return float(path.read_text()) if path.exists() else 1.0


@dg.asset(partitions_def=DAYS, metadata=backfill_gate(measures={"amount": Budget(relative=0.1)}))
def adjusted(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    """ADJUSTED_ROWS amounts a day, 1, 2, 3 times the factor."""
    return spark.spark_session.range(ADJUSTED_ROWS).select(
        ((F.col("id") + 1) * F.lit(adjusted_factor())).alias("amount"), F.lit(context.partition_key).alias("ds")
    )


defs = dg.Definitions.merge(
    example.defs,
    dg.Definitions(assets=[held, quick, adjusted], asset_checks=gate_checks([adjusted], name="adjusted_gate")),
)
