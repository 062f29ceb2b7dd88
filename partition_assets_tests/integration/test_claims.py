"""Backfills never starve production (issue 24), with real node runs in local worker
processes and the repo's dagster.yaml instance: the launch gate (backfill/running/claims.py)
caps them by the deployment's capacity and Dagster's pool limits, shrinks them while a
production run is in progress and grows them back after; workers run niced."""

import time
import uuid
from datetime import UTC, datetime

import dagster as dg
import yaml

from partition_assets.backfill.model import BackfillStatus, NodeResult, NodeStatus
from partition_assets.backfill.planning.graph import build_graph
from partition_assets.backfill.planning.spec import BackfillSpec, TimeRange
from partition_assets.backfill.running.claims import LaunchGate, asset_pools, capacity_of
from partition_assets.backfill.running.local_workers import WORKER_NICENESS, DagsterNodeRunner
from partition_assets.backfill.running.loop import execute
from partition_assets.backfill.running.scheduling import Throttle
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.run_tags import BACKFILL_ID_TAG, DAGSTER_BACKFILL_TAG
from partition_assets_tests.support.locations import isolation_defs
from partition_assets_tests.support.records import record_at

MODULE = "partition_assets_tests.support.locations.isolation_defs"
BACKFILL = "bf-iso"
FIRST_12_DAYS = TimeRange(datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 13, tzinfo=UTC))


def most_at_once(results: list[NodeResult]) -> int:
    """The most runs of `results` in progress at one instant."""
    edges = sorted([(r.started, 1) for r in results] + [(r.ended, -1) for r in results], key=lambda e: (e[0], e[1]))
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def test_local_node_runs_honour_the_capacity_and_pool_limits_and_yield_to_production_then_grow_back(home):
    config = yaml.safe_load((home / "dagster.yaml").read_text())
    config["partition_assets"]["backfills"] = {"max_runs": 3, "max_runs_under_production": 1}
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    asset_graph = isolation_defs.defs.resolve_asset_graph()
    pools = asset_pools(asset_graph)
    spec = BackfillSpec(module=MODULE, selection="key:free or key:pooled", max_parallel=4)
    with (
        dg.DagsterInstance.get() as instance,
        DagsterNodeRunner(MODULE, 4, {BACKFILL_ID_TAG: BACKFILL, DAGSTER_BACKFILL_TAG: BACKFILL}, instance) as runner,
    ):
        instance.event_log_storage.set_concurrency_slots(isolation_defs.POOL, 3)
        record = record_at(BackfillStore(instance), BACKFILL, BackfillStatus.RUNNING, spec)

        def backfill(asset: str, on_result=lambda result: None) -> list[NodeResult]:
            graph = build_graph(asset_graph, [dg.AssetKey(asset)], FIRST_12_DAYS)
            results: list[NodeResult] = []

            def seen(result: NodeResult) -> None:
                results.append(result)
                on_result(result)

            gate = LaunchGate(instance, record, capacity_of(instance), pools)  # each backfill decides afresh
            status = execute(graph, runner.launch, Throttle(4), on_result=seen, allowance=gate.allowance, pools=pools)
            assert set(status.values()) == {NodeStatus.SUCCEEDED}
            return results

        # A pool of 3 slots: backfills keep its last one free, whatever their cap of 3 runs.
        assert most_at_once(backfill("pooled")) == 2

        # A production run in progress: one backfill run at a time, until it ends.
        production = instance.add_run(
            dg.DagsterRun(job_name="__ASSET_JOB", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.STARTED)
        )
        finished: list[NodeResult] = []
        production_ended: list[float] = []

        def end_production_after_four(result: NodeResult) -> None:
            finished.append(result)
            if len(finished) == 4:
                instance.report_run_canceled(production)
                production_ended.append(time.time())

        results = backfill("free", end_production_after_four)
        during = [result for result in results if result.started < production_ended[0]]
        after = [result for result in results if result.started >= production_ended[0]]
        assert len(during) >= 4 and most_at_once(during) == 1
        assert most_at_once(after) == 3  # grown back to the cap, under the queue's 4 less the reserve
        niceness = {
            event.asset_materialization.metadata["niceness"].value
            for event in instance.get_event_records(
                dg.EventRecordsFilter(dg.DagsterEventType.ASSET_MATERIALIZATION, asset_key=dg.AssetKey("free"))
            )
            if event.asset_materialization is not None
        }
        assert niceness and all(value >= WORKER_NICENESS for value in niceness)
