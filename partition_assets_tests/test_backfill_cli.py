"""`partition-assets backfill` as a user runs it: plan, run, kill -9, resume, catch-up."""

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest

from partition_assets.backfill.state import BACKFILL_ID_TAG

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "partition_assets", "backfill"]
TARGET = ["-m", "partition_assets_tests.engine_defs"]

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    return home


def cli(home, *args, **kwargs):
    return subprocess.run(
        [*CLI, *args], cwd=REPO, env={**os.environ, "DAGSTER_HOME": str(home)},
        capture_output=True, text=True, timeout=600, **kwargs,
    )


def start_sixteen_node_backfill(home) -> subprocess.Popen:
    """`backfill run` of raw and clean over 8 days, in its own process group."""
    args = ["run", *TARGET, "--select", "key:raw or key:clean", "--start", "2024-01-01", "--end", "2024-01-08",
            "--max-parallel", "2"]
    return subprocess.Popen(
        [*CLI, *args], cwd=REPO, env={**os.environ, "DAGSTER_HOME": str(home)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )


def runs_by_node(home, backfill_id=None) -> dict[tuple[str, str], list[dg.DagsterRunStatus]]:
    tags = {BACKFILL_ID_TAG: backfill_id} if backfill_id else {}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        found: dict[tuple[str, str], list] = {}
        for run in instance.get_runs(dg.RunsFilter(tags=tags)):
            for asset in run.asset_selection or ():
                found.setdefault((asset.to_user_string(), run.tags["dagster/partition"]), []).append(run.status)
        return found


def test_plan_launches_nothing(home):
    done = cli(home, "plan", *TARGET, "--select", "key:raw+", "--start", "2024-01-01", "--end", "2024-01-31")
    assert done.returncode == 0, done.stderr
    assert "rolling" in done.stdout and "critical path" in done.stdout and "ETA" in done.stdout
    assert runs_by_node(home) == {}
    assert not (home / "partition_assets").exists()


def test_kill_minus_9_then_resume_runs_each_remaining_node_once(home):
    coordinator = start_sixteen_node_backfill(home)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        finished = sum(
            statuses.count(dg.DagsterRunStatus.SUCCESS) for statuses in runs_by_node(home).values()
        )
        if finished >= 5:
            break
        time.sleep(0.2)
    os.killpg(coordinator.pid, signal.SIGKILL)  # the coordinator and its workers, like a lost machine
    coordinator.wait()
    backfill_id = next((home / "partition_assets" / "backfills").glob("*.json")).stem
    before = runs_by_node(home, backfill_id)
    succeeded_before = {n for n, s in before.items() if dg.DagsterRunStatus.SUCCESS in s}
    assert 5 <= len(succeeded_before) < 16

    resumed = cli(home, "resume", backfill_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr

    after = runs_by_node(home, backfill_id)
    assert len(after) == 16
    for node, statuses in after.items():
        assert Counter(statuses)[dg.DagsterRunStatus.SUCCESS] == 1, node  # ran to success once
        if node in succeeded_before:
            assert statuses == [dg.DagsterRunStatus.SUCCESS], node  # never ran again
    status = cli(home, "status", backfill_id)
    assert "raw" in status.stdout and "8 succeeded" in status.stdout


def test_catch_up_launches_only_missing_partitions(home):
    first = cli(home, "run", *TARGET, "--select", "key:raw", "--start", "2024-01-01", "--end", "2024-01-03")
    assert first.returncode == 0, first.stderr
    catch_up = cli(home, "run", *TARGET, "--select", "key:raw", "--start", "2024-01-01", "--end", "2024-01-06",
                   "--catch-up")
    assert catch_up.returncode == 0, catch_up.stderr
    second_id = catch_up.stdout.split()[1].rstrip(":")  # "backfill <id>: N nodes"
    assert set(runs_by_node(home, second_id)) == {("raw", f"2024-01-0{d}") for d in (4, 5, 6)}


def test_cancel_stops_launching_and_cancels_runs_in_flight(home):
    coordinator = start_sixteen_node_backfill(home)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not any(
        dg.DagsterRunStatus.SUCCESS in s for s in runs_by_node(home).values()
    ):
        time.sleep(0.2)
    backfill_id = next((home / "partition_assets" / "backfills").glob("*.json")).stem
    canceled = cli(home, "cancel", backfill_id)
    assert canceled.returncode == 0, canceled.stderr
    coordinator.wait(timeout=120)

    runs = runs_by_node(home, backfill_id)
    statuses = [s for node_statuses in runs.values() for s in node_statuses]
    assert dg.DagsterRunStatus.STARTED not in statuses  # nothing left in flight
    assert Counter(statuses)[dg.DagsterRunStatus.SUCCESS] < 16  # launching stopped
    time.sleep(2)
    assert runs_by_node(home, backfill_id) == runs  # and nothing launched after the cancel
    assert "(canceled)" in cli(home, "status", backfill_id).stdout
