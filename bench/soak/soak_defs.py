"""The soak's code location (`partition-assets backfill run -f bench/soak/soak_defs.py`): lanes
of the bench DAG's mappings (bench/engine_dag.py) as a bench/dag_shapes.py shape, each lane

    src{i} (daily) ──rolling 3 days──> roll{i}
                   ──identity──> total{i} <──previous day── total{i}   (self-dependent)
                   ──fan-in──> month{i} (monthly)

over $SOAK_DAYS days from 2024-01-01, $SOAK_LANES lanes. Lane 0's assets are Delta tables
(SparkDeltaIOManager under $SOAK_LAKE) whose rows are computed from the partition key and
$SOAK_GENERATION alone (`expected_rows`), so the soak knows what every table must hold; the
stored nodes sleep STORED_SECONDS first; the
other lanes sleep $SOAK_SIDE_SECONDS (SIDE_LANE_SECONDS unless set) per node and store nothing (they make the DAG large
without a Spark write per node).

Not guaranteed: lanes past the first exercise the scheduler and Dagster's records only.
"""

import os
import time
import zlib
from datetime import date, timedelta

import dagster as dg

from bench.dag_shapes import START, AssetShape, Edge, Shape, definitions

DAYS_ENV, LANES_ENV, GENERATION_ENV, LAKE_ENV = "SOAK_DAYS", "SOAK_LANES", "SOAK_GENERATION", "SOAK_LAKE"
SIDE_SECONDS_ENV = "SOAK_SIDE_SECONDS"
# Simulated work of a stored node before its Spark write: node runs in flight long enough to be hit.
STORED_SECONDS = 1.0
SIDE_LANE_SECONDS = 0.05  # seconds: a long soak sets more (its length follows its node runs')
STORED_LANE = 0
ROLLING_DAYS = 3
# The two tables the soak's library readers join on the day.
JOINED = ("src0", "total0")


def lane(index: int) -> tuple[AssetShape, ...]:
    """One lane's assets (parents first); each run covers one partition (Dagster's default policy)."""
    src, total = f"src{index}", f"total{index}"
    seconds = float(os.environ.get(SIDE_SECONDS_ENV, SIDE_LANE_SECONDS))
    return (
        AssetShape(src, "daily", (), seconds, False),
        AssetShape(f"roll{index}", "daily", (Edge(src, "rolling", ROLLING_DAYS),), seconds, False),
        AssetShape(total, "daily", (Edge(src, "identity"), Edge(total, "previous")), seconds, False),
        AssetShape(f"month{index}", "monthly", (Edge(src, "by_window"),), seconds, False),
    )


def shape(days: int, lanes: int) -> Shape:
    return Shape(0, days, ("soak",) * lanes, "default", tuple(a for i in range(lanes) for a in lane(i)))


def stored_assets() -> tuple[str, ...]:
    return tuple(asset.name for asset in lane(STORED_LANE))


def last_day(days: int) -> str:
    return (date.fromisoformat(START) + timedelta(days=days - 1)).isoformat()


def expected_rows(asset: str, partition: str, generation: str) -> list[dict[str, object]]:
    """The rows `asset` stores for `partition` when written in `generation`."""
    value = zlib.crc32(f"{asset}/{partition}/{generation}".encode()) % 1000
    return [{"ds": partition, "gen": generation, "value": value}]


def _stored_body(asset: AssetShape, context: dg.AssetExecutionContext):
    time.sleep(STORED_SECONDS * len(context.partition_keys))
    generation = os.environ.get(GENERATION_ENV, "1")
    rows = [row for key in context.partition_keys for row in expected_rows(asset.name, key, generation)]
    spark = context.resources.spark.spark_session
    return spark.createDataFrame([(r["ds"], r["gen"], r["value"]) for r in rows], "ds string, gen string, value long")


def soak_definitions() -> dg.Definitions:
    from partition_assets.spark import SparkResource
    from partition_assets.storage import SparkDeltaIOManager

    spark = SparkResource.from_env()
    the_shape = shape(int(os.environ.get(DAYS_ENV, "6")), int(os.environ.get(LANES_ENV, "1")))
    return definitions(
        the_shape,
        bodies=dict.fromkeys(stored_assets(), _stored_body),
        resources={
            "spark": spark,
            "io_manager": SparkDeltaIOManager(root_uri=os.environ.get(LAKE_ENV, ".lake-soak"), spark=spark),
        },
    )


defs = soak_definitions()
