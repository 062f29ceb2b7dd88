"""Issue 41, point 5: a failing partition does not fail its range, under the engine's own
batching (`--batching engine`). A staged backfill of a range-capable asset, one day of which
fails, runs through the real coordinator, workers and instance: 8 of its days start as one
range run, which fails; the engine runs the range again in halves down to the failing day, so
7 of the 8 end succeeded and 1 failed; `backfill_status` names that day, and nothing is
published: no publish run, no materialization. The asset stores nothing, so that no run waits
for Spark: a staged backfill's materializations are recorded only by its publish, so the
instance shows whether it published."""

import dagster as dg

from partition_assets import backfill_status
from partition_assets.backfill.dagster_ui.view import WEBSERVER
from partition_assets.backfill.model import BackfillStatus, Batching, NodeStatus
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.planning.instance_state import graph_of
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing.dagster_events import PUBLISH_RUN_TAG
from partition_assets.backfill.running.coordinator import BackfillRun
from partition_assets.backfill.state.record import BackfillRecord, node_states
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.run_tags import BACKFILL_ID_TAG, PARTITION_TAG, RANGE_END_TAG, RANGE_START_TAG
from partition_assets_tests.support.locations.range_failure_defs import FAILING_DAY

CODE_LOCATION = "partition_assets_tests.support.locations.range_failure_defs"
RANGE = [f"2024-01-{day:02d}" for day in range(2, 10)]


def _run(instance: dg.DagsterInstance, backfill_id: str, **spec_fields) -> tuple[BackfillGraph, dict]:
    # The engine's own batching (`--batching engine`): under the asset's single_run() policy, as
    # Dagster runs it, the range is one run that fails whole (conformance/test_backfill_policy.py).
    spec = BackfillSpec(
        module=CODE_LOCATION, selection="key:daily_counts", max_parallel=1, batching=Batching.engine, **spec_fields
    )
    record = BackfillRecord(spec, id=backfill_id, store=BackfillStore(instance))
    graph = graph_of(spec, instance)
    return graph, BackfillRun(instance, record, graph, set(), dagster_view=WEBSERVER).run()


def _days(run: dg.DagsterRun) -> tuple[str, str]:
    """The first and last day a node run covered."""
    if RANGE_START_TAG in run.tags:
        return run.tags[RANGE_START_TAG], run.tags[RANGE_END_TAG]
    return run.tags[PARTITION_TAG], run.tags[PARTITION_TAG]


def test_a_failing_day_fails_alone_its_range_runs_again_in_halves_and_a_staged_backfill_publishes_nothing(home):
    daily_counts = dg.AssetKey("daily_counts")
    with dg.DagsterInstance.get() as instance:
        # 01-01 runs alone (how long a day takes is unknown until a run tells), then the 8 days
        # left as one range: with one slot, they would wait anyway.
        graph, statuses = _run(instance, "halves", start="2024-01-01", end=RANGE[-1])

        failing = {node for node, status in statuses.items() if status != NodeStatus.SUCCEEDED}
        assert {(node.partition, statuses[node]) for node in failing} == {(FAILING_DAY, NodeStatus.FAILED)}
        tagged = reversed(instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: "halves"})))  # oldest first
        runs = [run for run in tagged if run.asset_selection]  # node runs, not the run recording their failure
        ranges = {_days(run): run.status == dg.DagsterRunStatus.SUCCESS for run in runs}
        # The range, then each failed range in halves, once: 8 days -> 4 + 4 -> 2 + 2 -> 1 + 1.
        assert _days(runs[1]) == (RANGE[0], RANGE[-1])
        assert ranges == {
            ("2024-01-01", "2024-01-01"): True,
            ("2024-01-02", "2024-01-09"): False,
            ("2024-01-02", "2024-01-05"): True,
            ("2024-01-06", "2024-01-09"): False,
            ("2024-01-06", "2024-01-07"): False,
            ("2024-01-08", "2024-01-09"): True,
            ("2024-01-06", "2024-01-06"): True,
            ("2024-01-07", "2024-01-07"): False,
        }
        assert len(runs) == len(ranges)
        # The record's node states, from each node's latest run: 7 staged, 1 failed.
        states = {node.partition: state for node, (state, _) in node_states(instance, "halves", graph).items()}
        assert states == {
            day: NodeStatus.FAILED if day == FAILING_DAY else NodeStatus.SUCCEEDED for day in ["2024-01-01", *RANGE]
        }
        assert BackfillStore(instance).load("halves").status == BackfillStatus.FAILED
        # Staged, with a failed node: nothing published, nothing materialized.
        assert not instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: "halves", PUBLISH_RUN_TAG: "true"}))
        assert instance.get_materialized_partitions(daily_counts) == set()

    with dg.DagsterInstance.get() as instance:
        assert f"failed: daily_counts {FAILING_DAY}" in backfill_status(instance, "halves").failed_lines
