"""A backfill worker killed mid-run (issue 55, found by the soak: bench/soak/, seed 1): the
node it ran runs again on new workers, the backfill goes on, and the run it left is marked
canceled. Before, concurrent.futures' pool broke: every node in flight failed, and the next
launch raised BrokenProcessPool out of the coordinator, failing the backfill with a traceback."""

from datetime import UTC, datetime

import dagster as dg
import pytest

from partition_assets.backfill.model import NodeStatus
from partition_assets.backfill.planning.graph import build_graph
from partition_assets.backfill.planning.spec import TimeRange
from partition_assets.backfill.running.local_workers import DagsterNodeRunner
from partition_assets.backfill.running.loop import execute
from partition_assets.backfill.running.scheduling import Throttle
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets_tests.support.locations import worker_death_defs
from partition_assets_tests.support.locations.worker_death_defs import DYING_PARTITION, KILL_ENV, MARKERS_ENV

MODULE = "partition_assets_tests.support.locations.worker_death_defs"
JANUARY_1_TO_3 = TimeRange(datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 4, tzinfo=UTC))

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("victim", ["worker", "fork_server"])
def test_a_node_whose_worker_dies_mid_run_runs_again_and_the_backfill_goes_on(home, tmp_path, monkeypatch, victim):
    monkeypatch.setenv(KILL_ENV, victim)
    monkeypatch.setenv(MARKERS_ENV, str(tmp_path))
    asset_graph = worker_death_defs.defs.resolve_asset_graph()
    graph = build_graph(asset_graph, asset_graph.get_all_asset_keys(), JANUARY_1_TO_3)
    with (
        dg.DagsterInstance.get() as instance,
        DagsterNodeRunner(MODULE, 2, {BACKFILL_ID_TAG: "bf-death"}, instance) as runner,
    ):
        status = execute(graph, runner.launch, Throttle(max_parallel=2))
        runs = instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: "bf-death"}))

    assert (tmp_path / DYING_PARTITION).exists()  # it did die once
    assert set(status.values()) == {NodeStatus.SUCCEEDED}, status
    dying = [run.status for run in runs if run.tags.get("dagster/partition") == DYING_PARTITION and
             run.asset_selection == {dg.AssetKey("dies_once")}]  # fmt: skip
    assert sorted(s.value for s in dying) == ["CANCELED", "SUCCESS"], dying
    assert all(run.is_finished for run in runs)  # none left STARTED by a dead worker
