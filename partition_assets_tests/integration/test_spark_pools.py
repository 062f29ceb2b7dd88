"""Spark isolation (issue 24): the shared Spark Connect server runs the FAIR scheduler, and
each run's Spark jobs land in the pool of its kind (spark/scheduler_pools.py), as a task
of the job reads it back."""

import dagster as dg
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from partition_assets.run_tags import DAGSTER_BACKFILL_TAG
from partition_assets.spark import SparkResource
from partition_assets.spark.scheduler_pools import BACKFILL_POOL, PRODUCTION_POOL


@dg.asset
def pool_probe(context: dg.AssetExecutionContext, spark: SparkResource) -> None:
    """Runs one Spark job and records the scheduler pool its task ran in."""

    def pool_of_task(_: int) -> str:  # nested: pickled by value, as the server cannot import tests
        from pyspark import TaskContext  # on the server's Python worker

        return str(TaskContext.get().getLocalProperty("spark.scheduler.pool"))

    session = spark.spark_session
    found = session.range(1).select(F.udf(pool_of_task, StringType())("id")).first()[0]
    context.add_output_metadata({"pool": found, "mode": session.conf.get("spark.scheduler.mode")})


def test_a_backfill_runs_spark_jobs_in_the_backfill_pool_and_production_in_its_own(spark_resource, instance):
    pools = {}
    for kind, tags in (("production", {}), ("backfill", {DAGSTER_BACKFILL_TAG: "bf-pools"})):
        result = dg.materialize([pool_probe], resources={"spark": spark_resource}, instance=instance, tags=tags)
        metadata = result.asset_materializations_for_node("pool_probe")[0].metadata
        pools[kind] = (metadata["pool"].value, metadata["mode"].value)
    assert pools == {"production": (PRODUCTION_POOL, "FAIR"), "backfill": (BACKFILL_POOL, "FAIR")}
