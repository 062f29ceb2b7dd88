"""A run that only carries an engine backfill's id tag (typed in the Launchpad, copied by
re-executing a node run, left on a run long after its backfill finished) is production's for
the backfills' capacity, duration estimates and Spark pools: only a node run's lease proof shows a backfill
(dagster_instance/lease_proof.py), against a real instance (the eager sensor's side of it:
test_eager.py)."""

import uuid
from datetime import UTC, datetime

import dagster as dg

from partition_assets.backfill.planning.graph import build_graph
from partition_assets.backfill.planning.run_config import ENGINE_JOB
from partition_assets.backfill.planning.spec import TimeRange
from partition_assets.backfill.running.claims import instance_load
from partition_assets.backfill.running.durations import recorded_seconds
from partition_assets.backfill.running.node_run_proofs import NodeRunProofs
from partition_assets.run_tags import BACKFILL_ID_TAG, DAGSTER_BACKFILL_TAG, node_run_tags
from partition_assets.spark.resource import scheduler_pool_of
from partition_assets.spark.scheduler_pools import BACKFILL_POOL, POOL_ENV, PRODUCTION_POOL
from partition_assets_tests.support.locations import automation_defs
from partition_assets_tests.support.node_runs import materialize_as

FIRST_10_DAYS = TimeRange(datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 11, tzinfo=UTC))


def started_run(instance: dg.DagsterInstance, tags: dict[str, str], job_name: str = "__ASSET_JOB", run_id=None) -> None:
    instance.add_run(
        dg.DagsterRun(
            job_name=job_name, run_id=run_id or str(uuid.uuid4()), tags=tags, status=dg.DagsterRunStatus.STARTED
        )
    )


def test_a_run_tagged_with_a_finished_backfill_s_id_counts_as_production_in_the_capacity(instance):
    """Issue 50 hole 9: a production run carrying the id tag of a long-finished backfill was
    not counted as production, so backfills did not yield to it."""
    node_tags = {BACKFILL_ID_TAG: "other", DAGSTER_BACKFILL_TAG: "other"}
    run_id, proved = NodeRunProofs(instance).proved(node_tags)
    started_run(instance, proved, run_id=run_id)  # a node run of another backfill
    started_run(instance, {BACKFILL_ID_TAG: "asking"}, job_name=ENGINE_JOB)  # a coordinator run
    started_run(instance, {BACKFILL_ID_TAG: "other"}, job_name="partition_assets_publish")  # its publish run
    assert instance_load(instance, {}, "asking", set()).production_runs == 0
    started_run(instance, {BACKFILL_ID_TAG: "finished"})  # production's, with a stale tag
    started_run(instance, node_tags)  # a node run's tags, copied without a proof for its id
    assert instance_load(instance, {}, "asking", set()).production_runs == 2


def test_duration_estimates_read_node_runs_only(instance):
    """Issue 50 hole 9: duration estimates took any successful run tagged with a backfill's id
    for a node run of it."""
    assert materialize_as([automation_defs.eager_down], instance, "2024-01-05", node_run_of="measured").success
    assert materialize_as([automation_defs.eager_up], instance, "2024-01-05", {BACKFILL_ID_TAG: "measured"}).success
    asset_graph = automation_defs.defs.resolve_asset_graph()
    graph = build_graph(asset_graph, [dg.AssetKey("eager_up"), dg.AssetKey("eager_down")], FIRST_10_DAYS)
    assert set(recorded_seconds(instance, graph)) == {dg.AssetKey("eager_down")}


def test_only_a_backfill_s_proven_node_runs_and_dagster_s_backfill_runs_join_the_spark_backfill_pool(
    instance, monkeypatch
):
    """Issue 50 (read in the code): the Spark resource put every run tagged `dagster/backfill`
    in the backfill pool, whose tasks production preempts; a node run's tags copied by a
    re-execution or typed in the Launchpad write as production, and now run as production."""
    monkeypatch.delenv(POOL_ENV, raising=False)  # not in a backfill's local worker
    node_tags = node_run_tags("pooled", staged=False)
    runs = {
        "node run": materialize_as([automation_defs.eager_up], instance, "2024-01-05", node_tags, node_run_of="pooled"),
        "tags copied": materialize_as([automation_defs.eager_up], instance, "2024-01-06", node_tags),
        "Dagster's backfill": materialize_as(
            [automation_defs.eager_up], instance, "2024-01-07", {DAGSTER_BACKFILL_TAG: "dagster-made"}
        ),
        "production": materialize_as([automation_defs.eager_up], instance, "2024-01-08"),
    }
    assert {name: scheduler_pool_of(instance, result.dagster_run) for name, result in runs.items()} == {
        "node run": BACKFILL_POOL,
        "tags copied": PRODUCTION_POOL,
        "Dagster's backfill": BACKFILL_POOL,
        "production": PRODUCTION_POOL,
    }
