"""What a sensor reads of the code location that serves it."""

import dagster as dg

from partition_assets.dagster_internals import AssetGraph


def sensor_asset_graph(context: dg.SensorEvaluationContext) -> AssetGraph:
    """The asset graph of the sensor's code location (Dagster always gives a sensor its repository)."""
    repository = context.repository_def
    assert repository is not None, "a sensor is evaluated inside its code location"
    return repository.asset_graph
