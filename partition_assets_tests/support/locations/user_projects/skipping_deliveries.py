"""Daily deliveries in a Delta table (delta_deliveries.py: a staged backfill holds them back
until it publishes) that yield nothing on even days (`output_required=False`), and a daily
summary in the same lake that reads them."""

import dagster as dg

from partition_assets.spark import SparkResource
from partition_assets_tests.support.locations.user_projects.delta_deliveries import DAYS, deliveries_project


@dg.asset(partitions_def=DAYS, output_required=False)
def deliveries(context: dg.AssetExecutionContext, spark: SparkResource):
    """The day's deliveries; none on even days."""
    if int(context.partition_key[-2:]) % 2:
        yield dg.Output(spark.spark_session.createDataFrame([(1, context.partition_key)], "id long, ds string"))


defs = deliveries_project(deliveries)
