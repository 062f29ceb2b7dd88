"""`backfill run --runs-via launcher`, its coordinator stopped or handed on: kill -9 + resume
runs each remaining launched node once; cancel terminates the launched runs in flight and
stops launching; with the repo's QueuedRunCoordinator and no daemon, queued runs wait with a
warning and cancel dequeues them; --detach hands the coordinator to the run launcher. (The
other run-launcher tests: test_launcher.py.)"""

import os
import re
import shutil
import subprocess
from collections import Counter

import dagster as dg
import pytest

from partition_assets.dagster_instance.lease_proof import proven_backfill
from partition_assets.run_tags import BACKFILL_ID_TAG, IN_FLIGHT_STATUSES
from partition_assets_tests.support import REPO
from partition_assets_tests.support.cli_runs import backfill_cli, kill_then_resume, runs_by_node, start_cli
from partition_assets_tests.support.instances import also_on_postgres
from partition_assets_tests.support.launched_runs import (
    GRPC_INFO_TAG,
    TARGET,
    assert_launched_by_the_launcher,
    launching_home,
    node_runs,
)
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.processes import session_members
from partition_assets_tests.support.records import recorded_backfill, recorded_ids

pytestmark = pytest.mark.slow

EIGHT_NODES = ["--select", "key:raw or key:clean", "--start", "2024-01-01", "--end", "2024-01-04"]


@pytest.fixture
def home(home):
    """The shared DAGSTER_HOME (also this process's, to read the backfill records; on PostgreSQL
    for tests marked also_on_postgres("home")), its instance launching each run at once."""
    return launching_home(home)


def launched_backfill(home, *args: str) -> subprocess.Popen:
    """`backfill run --runs-via launcher` in its own session; its stderr goes to `home`/stderr.log."""
    return start_cli(
        *["backfill", "run", *TARGET, *args, "--runs-via", "launcher", "--max-parallel", "2"],
        env={**os.environ, "DAGSTER_HOME": str(home)},
        stderr=(home / "stderr.log").open("w"),
    )


def recorded_id(home) -> str:
    return recorded_ids(home)[0]


def successes(home) -> int:
    return sum(statuses.count(dg.DagsterRunStatus.SUCCESS) for statuses in runs_by_node(home).values())


def test_kill_minus_9_then_resume_runs_each_remaining_launched_node_once(home):
    # The kill takes the coordinator's code server and run workers with it.
    backfill = kill_then_resume(home, launched_backfill(home, *EIGHT_NODES), succeeded_first=2, nodes=8)
    for node, statuses in runs_by_node(home, backfill).items():  # the runs the kill cut short: canceled
        assert set(statuses) <= {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.CANCELED}, node
    assert_launched_by_the_launcher(home, backfill)


def test_cancel_terminates_launched_runs_in_flight_and_stops_launching(home):
    coordinator = launched_backfill(home, *EIGHT_NODES)
    wait_for(lambda: successes(home) >= 1, timeout=300, step=0.2)
    backfill = recorded_id(home)
    canceled = backfill_cli(home, "cancel", backfill)
    assert canceled.returncode == 0, canceled.stderr
    coordinator.wait(timeout=180)

    runs = runs_by_node(home, backfill)
    statuses = Counter(s for node_statuses in runs.values() for s in node_statuses)
    assert not set(statuses) & set(IN_FLIGHT_STATUSES), statuses  # nothing left in flight
    assert statuses[dg.DagsterRunStatus.SUCCESS] < 8  # launching stopped
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for run in node_runs(home, backfill):
            if run.status != dg.DagsterRunStatus.SUCCESS:
                # Terminated through the launcher. One canceled before its run worker started
                # ends FAILURE: Dagster fails a worker that starts on a CANCELING run.
                canceling = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.RUN_CANCELING)
                assert canceling.records, run.run_id
    # Once no process of the backfill is left (its code server and run workers end after the
    # coordinator), none can launch a run.
    wait_for(lambda: not session_members(coordinator.pid), 60)
    assert runs_by_node(home, backfill) == runs  # and nothing launched after the cancel
    assert "(canceled)" in backfill_cli(home, "status", backfill).stdout


def test_without_a_daemon_queued_runs_wait_with_a_warning_and_cancel_dequeues_them(home):
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")  # the QueuedRunCoordinator, and no daemon here
    coordinator = launched_backfill(home, *EIGHT_NODES)
    wait_for(lambda: sum(map(len, runs_by_node(home).values())) >= 2, timeout=300, step=0.2)
    backfill = recorded_id(home)
    assert backfill_cli(home, "cancel", backfill).returncode == 0
    coordinator.wait(timeout=180)

    assert "no dagster-daemon has dequeued any lately" in (home / "stderr.log").read_text()
    runs = node_runs(home, backfill)
    assert len(runs) == 2  # the throttle's two slots, held by queued runs
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for run in runs:
            assert run.status == dg.DagsterRunStatus.CANCELED
            assert instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.RUN_ENQUEUED).records
            assert not instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.RUN_STARTING).records


@also_on_postgres("home")
def test_run_detach_hands_the_coordinator_to_the_run_launcher_as_a_run_of_the_engine_job(home):
    """`backfill run --detach` returns at once, naming the backfill and its coordinator run; the
    DefaultRunLauncher runs that engine job run in a process of its own, which records, runs
    and publishes the backfill (its node runs tagged with its id)."""
    detached = backfill_cli(
        home,
        "run",
        "-m",
        "partition_assets_tests.support.locations.automation_defs",
        "--select",
        "group:jobs",
        "--start",
        "2024-01-01",
        "--end",
        "2024-01-02",
        "--detach",
    )
    assert detached.returncode == 0, detached.stdout + detached.stderr
    handed = re.search(r"backfill (\S+) handed to the run launcher: coordinator run (\S+);", detached.stdout)
    assert handed, detached.stdout
    backfill, run_id = handed.groups()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        run = wait_for(lambda: (r := instance.get_run_by_id(run_id)) is not None and r.is_finished and r, 300, 0.5)
        assert (run.status, run.job_name, run.tags[BACKFILL_ID_TAG]) == (
            dg.DagsterRunStatus.SUCCESS,
            "sparse_backfill",
            backfill,
        )
        assert GRPC_INFO_TAG in run.tags  # launched by the run launcher, not executed by the command
        node_runs = [r for r in instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill})) if r.asset_selection]
        assert node_runs and all(r.status == dg.DagsterRunStatus.SUCCESS for r in node_runs)
        # The lease proof reached the launched runs (a tag bound to the id the runner gave each run).
        assert all(proven_backfill(instance, r.run_id, r.tags) == backfill for r in node_runs)
    assert recorded_backfill(home, backfill).status == "published"
