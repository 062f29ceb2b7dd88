"""Dagster's own asset backfill, run to its end in this process: the backfill record added to an
instance, then its daemon's iteration (`execute_backfill_iteration`) called until the backfill
is no longer requested, each iteration requesting what the runs before it made ready, as the
daemon does on its ticks. The instance's run launcher must execute each run as it is
submitted (`dg.instance_for_test` with a synchronous launcher), and the code location's assets
the in-process executor.

Not guaranteed: a backfill still requested after _MOST_ITERATIONS fails the caller's checks,
which read its status."""

import logging
import sys
import time
from collections.abc import Mapping
from typing import Any

import dagster as dg
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.test_utils import InProcessTestWorkspaceLoadTarget
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._daemon import backfill as daemon_backfill

from partition_assets.dagster_internals import AssetGraphSubset
from partition_assets_tests.support import REPO

BACKFILL_ID = "conformance"
# Iterations of Dagster's backfill daemon before a backfill that is not done fails the test.
_MOST_ITERATIONS = 30


def run_dagster_backfill(
    instance: dg.DagsterInstance, module: str, target: AssetGraphSubset, run_config: Mapping[str, Any] | None
) -> PartitionBackfill:
    """Dagster's asset backfill of `target` (with `run_config`) from code location `module`, in
    `instance`, run to its end; its record then."""
    instance.add_backfill(
        PartitionBackfill.from_asset_graph_subset(
            backfill_id=BACKFILL_ID,
            asset_graph_subset=target,
            backfill_timestamp=time.time(),
            tags={},
            dynamic_partitions_store=instance,
            title=None,
            description=None,
            run_config=dict(run_config) if run_config is not None else None,
        )
    )
    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(executable_path=sys.executable, module_name=module, working_directory=str(REPO))
    )
    with WorkspaceProcessContext(instance, InProcessTestWorkspaceLoadTarget(origin)) as context:
        for _ in range(_MOST_ITERATIONS):
            list(daemon_backfill.execute_backfill_iteration(context, logging.getLogger(__name__)))
            backfill = instance.get_backfill(BACKFILL_ID)
            assert backfill is not None
            if backfill.status != BulkActionStatus.REQUESTED:
                break
    return backfill
