"""A code location for schema-changing backfills: `payments`, three daily partitions whose
schema PARTITION_ASSETS_TEST_PAYMENTS_SCHEMA picks, and `payments_total`, fed by it.

- "v1" (the default): `amount` double;
- "decimal": `amount` decimal(18,6), the same values;
- "split": `amount` split into `net` and `tax` (declared: they sum to it); "bad_split" doubles the tax.

`payments` declares its column schema (what `backfill plan` compares with the table), its
schema change and a gate on the sum of `amount` (compared through the split). `payments_total`
reads the day's payments as the backfill sees them: net + tax once split.
"""

import os

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from partition_assets.backfill.planning.gate_rules import Budget, backfill_gate
from partition_assets.partitions import daily, mappings
from partition_assets.spark import SparkResource
from partition_assets.storage import SparkDeltaIOManager, declare_schema_change

DAYS = daily("2024-01-01", end="2024-01-04")
SCHEMA_ENV = "PARTITION_ASSETS_TEST_PAYMENTS_SCHEMA"
LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"
PAYMENTS_PER_DAY = 4
SCHEMA = os.environ.get(SCHEMA_ENV, "v1")
_COLUMNS = {
    "v1": [("payment_id", "string"), ("amount", "double")],
    "decimal": [("payment_id", "string"), ("amount", "decimal(18,6)")],
    "split": [("payment_id", "string"), ("net", "double"), ("tax", "double")],
}


def payment_amounts(day: str) -> list[float]:
    """The day's amounts: 1.25, 2.5, ... (exact in binary and in decimal(18,6))."""
    return [(i + 1) * 1.25 * int(day[-2:]) for i in range(PAYMENTS_PER_DAY)]


@dg.asset(
    partitions_def=DAYS,
    metadata={
        **declare_schema_change(split={"amount": ["net", "tax"]}),
        **backfill_gate(measures={"amount": Budget(relative=0.001)}),
        "dagster/column_schema": dg.TableSchema(
            columns=[dg.TableColumn(name, type) for name, type in _COLUMNS[SCHEMA.removeprefix("bad_")]]
        ),
    },
)
def payments(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    day = context.partition_key
    rows = [(f"{day}-{i}", amount, day) for i, amount in enumerate(payment_amounts(day))]
    frame = spark.spark_session.createDataFrame(rows, "payment_id string, amount double, ds string")
    if SCHEMA == "decimal":
        return frame.withColumn("amount", F.col("amount").cast("decimal(18,6)"))
    if SCHEMA in ("split", "bad_split"):
        tax = F.col("amount") * (0.4 if SCHEMA == "bad_split" else 0.2)
        return frame.select("payment_id", (F.col("amount") * 0.8).alias("net"), tax.alias("tax"), "ds")
    return frame


@dg.asset(partitions_def=DAYS, ins={"payments": dg.AssetIn(partition_mapping=mappings.identity())})
def payments_total(payments: DataFrame) -> DataFrame:
    amount = F.col("amount") if "amount" in payments.columns else F.col("net") + F.col("tax")
    return payments.groupBy("ds").agg(F.sum(amount.cast("double")).alias("total"))


spark = SparkResource.from_env()
defs = dg.Definitions(
    assets=[payments, payments_total],
    resources={
        "spark": spark,
        "io_manager": SparkDeltaIOManager(root_uri=os.environ.get(LAKE_ENV, ".lake-schema-tests"), spark=spark),
    },
)
