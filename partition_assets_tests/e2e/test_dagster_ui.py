"""Engine backfills as Dagster backfills, against a real instance of the repo's dagster.yaml
(the seam in Dagster they rely on is pinned in partition_assets_tests/integration/test_dagster_internals.py): a
launch through `instance.add_backfill` (what the webserver's mutation calls) run by a
detached coordinator, resumed after that coordinator is killed, and one the engine cannot
run exactly handed back to Dagster's daemon."""

import logging
import os
import signal
import subprocess
import sys
import time

import dagster as dg
import pytest
from dagster._core.execution.asset_backfill import AssetBackfillStatus
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.test_utils import InProcessTestWorkspaceLoadTarget
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._daemon import backfill as daemon_backfill

from partition_assets.backfill.dagster_ui.adoption import adopted_plan
from partition_assets.backfill.dagster_ui.mirror import DagsterBackfillMirror
from partition_assets.backfill.planning.graph import plan
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.code_location import load_definitions
from partition_assets.dagster_instance.daemon_filter import DAGSTER, ENGINE_TAG, SPARSE
from partition_assets.errors import BackfillPlanError
from partition_assets.instance.engine_instance import PARENT_BACKFILL_TAG
from partition_assets.run_tags import BACKFILL_ID_TAG, DAGSTER_BACKFILL_TAG
from partition_assets_tests.support import REPO
from partition_assets_tests.support.cli_runs import run_cli
from partition_assets_tests.support.instances import add_to_config
from partition_assets_tests.support.polling import wait_for

ENGINE_DEFS = "partition_assets_tests.support.locations.engine_defs"

pytestmark = pytest.mark.slow


@pytest.fixture
def home(home):
    """The shared DAGSTER_HOME, its engine taking the UI backfills of engine_defs."""
    add_to_config(home, partition_assets={"engine_modules": [ENGINE_DEFS]})
    return home


def ui_backfill(instance: dg.DagsterInstance, assets: list[str], partitions: list[str], **tags: str) -> str:
    """Adds an asset backfill as the webserver's `launchPartitionBackfill` does; returns its id."""
    backfill_id = f"t{time.monotonic_ns() % 10**7:07d}"
    instance.add_backfill(
        PartitionBackfill.from_asset_partitions(
            backfill_id=backfill_id,
            asset_graph=load_definitions(ENGINE_DEFS).resolve_asset_graph(),
            partition_names=partitions,
            asset_selection=[dg.AssetKey(a) for a in assets],
            backfill_timestamp=time.time(),
            tags=tags,
            dynamic_partitions_store=instance,
            all_partitions=False,
            title=None,
            description=None,
            run_config=None,
        )
    )
    return backfill_id


def wait_for_status(instance, backfill_id: str, timeout: float = 240) -> PartitionBackfill:
    def finished():
        """the backfill to finish"""
        backfill = instance.get_backfill(backfill_id)
        return backfill if backfill.status not in (BulkActionStatus.REQUESTED, BulkActionStatus.CANCELING) else None

    return wait_for(finished, timeout)


def counts(instance, backfill: PartitionBackfill) -> dict[str, tuple[int, int, int]]:
    """Per asset: (materialized, failed, in progress), as the Backfills page shows them."""
    asset_graph = load_definitions(ENGINE_DEFS).resolve_asset_graph()
    statuses = backfill.get_asset_backfill_data(asset_graph).get_backfill_status_per_asset_key(asset_graph)
    return {
        s.asset_key.to_user_string(): tuple(
            s.partitions_counts_by_status[k]
            for k in (AssetBackfillStatus.MATERIALIZED, AssetBackfillStatus.FAILED, AssetBackfillStatus.IN_PROGRESS)
        )
        for s in statuses
    }


# -- the seam, pinned ---------------------------------------------------------------------


def test_the_backfill_daemon_runs_stock_backfills_and_never_sees_engine_ones(home):
    """One iteration of Dagster's own backfill daemon over two backfills of the same
    partitions: it requests runs for the one marked `dagster`, and leaves the engine's alone."""
    with dg.DagsterInstance.get() as instance:
        engine = ui_backfill(instance, ["raw"], ["2024-01-01"], **{ENGINE_TAG: SPARSE})
        stock = ui_backfill(instance, ["raw"], ["2024-01-01"], **{ENGINE_TAG: DAGSTER})
        before = instance.get_backfill(engine)
        origin = InProcessCodeLocationOrigin(
            LoadableTargetOrigin(executable_path=sys.executable, module_name=ENGINE_DEFS, working_directory=str(REPO))
        )
        with WorkspaceProcessContext(instance, InProcessTestWorkspaceLoadTarget(origin)) as context:
            list(daemon_backfill.execute_backfill_iteration(context, logging.getLogger("test")))
        assert instance.get_runs(dg.RunsFilter(tags={DAGSTER_BACKFILL_TAG: stock}))
        assert not instance.get_runs(dg.RunsFilter(tags={DAGSTER_BACKFILL_TAG: engine}))
        assert instance.get_backfill(engine) == before
        # Everyone else (the Backfills page, sensors) lists both.
        assert {engine, stock} <= {b.backfill_id for b in instance.get_backfills()}


def test_a_cancel_clicked_in_the_ui_cancels_the_engine_backfill(home):
    """The Backfills page's *Cancel* writes CANCELING; the mirror sets the engine record's
    status (what its coordinator reads) and, when the coordinator stops, writes CANCELED."""
    with dg.DagsterInstance.get() as instance:
        spec = BackfillSpec(module=ENGINE_DEFS, selection="key:raw", start="2024-01-01", end="2024-01-02")
        store = BackfillStore(instance)
        record = BackfillRecord(spec, store=store)
        record.save()
        asset_graph = load_definitions(ENGINE_DEFS).resolve_asset_graph()
        with DagsterBackfillMirror(record, plan(asset_graph, spec), asset_graph, instance, done=()):
            instance.update_backfill(instance.get_backfill(record.id).with_status(BulkActionStatus.CANCELING))
            wait_for(lambda: store.status(record.id) == "canceled", 10)
        assert instance.get_backfill(record.id).status == BulkActionStatus.CANCELED


# -- a UI launch, end to end --------------------------------------------------------------


def test_a_ui_launch_runs_on_the_engine_and_resumes_after_its_coordinator_is_killed(home):
    with dg.DagsterInstance.get() as instance:
        days = [f"2024-01-{d:02d}" for d in range(1, 9)]
        backfill_id = ui_backfill(instance, ["raw", "clean"], days)
        assert instance.get_backfill(backfill_id).tags[ENGINE_TAG] == SPARSE
        # The coordinator the launch started: its log names it; kill it mid-way.
        wait_for(lambda: len(instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))) >= 2, 240)
        coordinator = _coordinator_pid(backfill_id)
        os.killpg(coordinator, signal.SIGKILL)
        assert instance.get_backfill(backfill_id).status == BulkActionStatus.REQUESTED  # nobody finished it

        resumed = run_cli("backfill", "resume", backfill_id)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        backfill = wait_for_status(instance, backfill_id)
        assert backfill.status == BulkActionStatus.COMPLETED_SUCCESS
        assert counts(instance, backfill) == {"raw": (8, 0, 0), "clean": (8, 0, 0)}
        runs = instance.get_runs(dg.RunsFilter(tags={DAGSTER_BACKFILL_TAG: backfill_id}))
        succeeded = {
            (r.asset_selection and next(iter(r.asset_selection)).to_user_string(), r.tags["dagster/partition"])
            for r in runs
            if r.status == dg.DagsterRunStatus.SUCCESS
        }
        assert succeeded == {(a, d) for a in ("raw", "clean") for d in days}


def test_the_uis_re_execute_of_an_engine_backfill_runs_on_the_engine(home):
    """*Re-execute* copies its parent's tags, `partition_assets/engine=sparse` included."""
    with dg.DagsterInstance.get() as instance:
        backfill_id = ui_backfill(
            instance, ["raw"], ["2024-02-01", "2024-02-02"], **{ENGINE_TAG: SPARSE, PARENT_BACKFILL_TAG: "parent"}
        )
        backfill = wait_for_status(instance, backfill_id)
        assert backfill.status == BulkActionStatus.COMPLETED_SUCCESS
        assert counts(instance, backfill) == {"raw": (2, 0, 0)}
        runs = instance.get_runs(dg.RunsFilter(tags={DAGSTER_BACKFILL_TAG: backfill_id}))
        assert sorted(r.tags["dagster/partition"] for r in runs) == ["2024-02-01", "2024-02-02"]


def _coordinator_pid(backfill_id: str) -> int:
    """The detached `backfill adopt <id>` process (its own session: its pid is its group)."""
    found = subprocess.run(
        ["pgrep", "-f", f"partition_assets backfill adopt {backfill_id}"], capture_output=True, text=True
    )
    pids = [int(p) for p in found.stdout.split()]
    assert len(pids) == 1, found
    return pids[0]


def test_a_target_no_spec_states_goes_back_to_dagsters_daemon(home):
    """Days 1 and 3 without day 2: no time range plans exactly that."""
    with dg.DagsterInstance.get() as instance:
        backfill_id = ui_backfill(instance, ["raw"], ["2024-01-01", "2024-01-03"], **{ENGINE_TAG: SPARSE})
        with pytest.raises(BackfillPlanError, match="misses 0 of it"):
            adopted_plan(instance.get_backfill(backfill_id), [ENGINE_DEFS], instance)
        adopted = run_cli("backfill", "adopt", backfill_id)
        assert adopted.returncode == 0, adopted.stderr
        assert "handed back to Dagster's daemon" in adopted.stdout
        backfill = instance.get_backfill(backfill_id)
        assert backfill.tags[ENGINE_TAG] == DAGSTER and backfill.status == BulkActionStatus.REQUESTED
        assert not instance.get_runs(dg.RunsFilter(tags={DAGSTER_BACKFILL_TAG: backfill_id}))


def test_a_ui_launch_whose_engine_code_location_does_not_load_fails_with_the_reason(home):
    """Not handed back (a typo in `engine_modules` would send every backfill to the daemon
    unseen), not left in progress: failed, with the error the UI shows; nothing ran."""
    add_to_config(home, partition_assets={"engine_modules": ["partition_assets_tests.support.no_such_location"]})
    with dg.DagsterInstance.get() as instance:
        backfill_id = ui_backfill(instance, ["raw"], ["2024-01-01"])
        backfill = wait_for_status(instance, backfill_id)
        assert backfill.status == BulkActionStatus.FAILED
        assert (
            "no module 'partition_assets_tests.support.no_such_location' on the import path" in backfill.error.message
        )
        assert not instance.get_runs(dg.RunsFilter(tags={DAGSTER_BACKFILL_TAG: backfill_id}))


def test_a_cli_backfill_is_a_dagster_backfill_with_its_failures(home):
    """raw and flaky over 5 days: flaky fails on day 4; the Dagster backfill says so."""
    ran = run_cli(
        *["backfill", "run", "-m", ENGINE_DEFS, "--select", "key:raw or key:flaky or key:after_flaky"],
        *["--start", "2024-01-01", "--end", "2024-01-05", "--max-parallel", "2"],
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    backfill_id = ran.stdout.split("backfill ", 1)[1].split(":", 1)[0]
    with dg.DagsterInstance.get() as instance:
        backfill = instance.get_backfill(backfill_id)
        assert backfill.status == BulkActionStatus.COMPLETED_FAILED
        assert backfill.tags[ENGINE_TAG] == SPARSE
        # after_flaky reads 2 days of flaky: days 4 and 5 are blocked behind the failure.
        assert counts(instance, backfill) == {"raw": (5, 0, 0), "flaky": (4, 1, 0), "after_flaky": (3, 2, 0)}
        runs = instance.get_runs(dg.RunsFilter(tags={DAGSTER_BACKFILL_TAG: backfill_id}))
        assert len(runs) == 5 + 5 + 3 and all(r.tags[BACKFILL_ID_TAG] == backfill_id for r in runs)
