"""The seam in Dagster that engine backfills rely on, pinned, so that an upgrade changing it
fails here (engine backfills as Dagster backfills, run: tests/e2e/test_dagster_backfills.py)."""

import inspect

import dagster as dg
from dagster._core.definitions.assets.graph.asset_graph_subset import AssetGraphSubset
from dagster._core.execution.asset_backfill import AssetBackfillData
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.storage.tags import PARENT_BACKFILL_ID_TAG
from dagster._daemon import backfill as daemon_backfill
from dagster_graphql.implementation.execution import backfill as graphql_backfill

from partition_assets.instance.engine_instance import (
    BACKFILL_DAEMON_MODULE,
    PARENT_BACKFILL_TAG,
    EngineBackfillInstance,
)

ENGINE_DEFS = "tests.support.engine_defs"


def test_dagster_internals_the_engine_relies_on():
    """What partition_assets/instance/engine_instance.py and backfill/dagster_ui/mirror.py read and write in Dagster."""
    # The webserver's launch stores the backfill through the instance, and Cancel is a status write.
    assert "instance.add_backfill(backfill)" in inspect.getsource(graphql_backfill.create_and_launch_partition_backfill)
    assert "with_status(BulkActionStatus.CANCELING)" in inspect.getsource(graphql_backfill.cancel_partition_backfill)
    # Re-execute copies the parent's tags and adds this one.
    assert "PARENT_BACKFILL_ID_TAG: backfill.backfill_id" in inspect.getsource(
        graphql_backfill.retry_partition_backfill
    )
    assert PARENT_BACKFILL_ID_TAG == PARENT_BACKFILL_TAG
    # The daemon lists what it executes, cancels and fails through instance.get_backfills, from this module.
    assert daemon_backfill.__name__ == BACKFILL_DAEMON_MODULE
    iteration = inspect.getsource(daemon_backfill.execute_backfill_iteration)
    for status in ("REQUESTED", "CANCELING", "FAILING"):
        assert (
            f"instance.get_backfills(\n        filters=BulkActionsFilter(statuses=[BulkActionStatus.{status}])"
            in iteration
        )
    # The statuses and fields the mirror writes.
    assert {"REQUESTED", "CANCELING", "CANCELED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED"} <= {
        s.name for s in BulkActionStatus
    }
    assert {"status", "tags", "backfill_end_timestamp", "error", "asset_backfill_data"} <= set(
        PartitionBackfill._fields
    )
    assert {"target_subset", "requested_subset", "materialized_subset", "failed_and_downstream_subset"} <= set(
        AssetBackfillData._fields
    )
    assert callable(AssetGraphSubset.from_asset_partition_set)
    # instance_class: extra config keys reach the class's __init__.
    with dg.instance_for_test(
        overrides={
            "instance_class": {"module": "partition_assets.instance", "class": "EngineBackfillInstance"},
            "partition_assets": {"engine_modules": [ENGINE_DEFS]},
        }
    ) as instance:
        assert isinstance(instance, EngineBackfillInstance)
        assert instance.engine_modules == [ENGINE_DEFS]
