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
from PIL import Image

from partition_assets.backfill.running.loop import NodeStatus
from partition_assets.cli import heatmap
from partition_assets.cli.heatmap import COLORS
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets_tests.polling import wait_for

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
        [*CLI, *args],
        cwd=REPO,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=600,
        **kwargs,
    )


def start_raw_and_clean_backfill(home, last_day: str = "2024-01-08") -> subprocess.Popen:
    """`backfill run` of raw and clean from January 1 to `last_day` (8 days: 16 nodes), in its
    own process group."""
    args = [
        "run",
        *TARGET,
        "--select",
        "key:raw or key:clean",
        "--start",
        "2024-01-01",
        "--end",
        last_day,
        "--max-parallel",
        "2",
    ]
    return subprocess.Popen(
        [*CLI, *args],
        cwd=REPO,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def runs_by_node(home, backfill_id=None) -> dict[tuple[str, str], list[dg.DagsterRunStatus]]:
    tags = {BACKFILL_ID_TAG: backfill_id} if backfill_id else {}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        found: dict[tuple[str, str], list] = {}
        for run in instance.get_runs(dg.RunsFilter(tags=tags)):
            for asset in run.asset_selection or ():
                found.setdefault((asset.to_user_string(), run.tags["dagster/partition"]), []).append(run.status)
        return found


def kill_then_resume(home, coordinator: subprocess.Popen, succeeded_first: int, nodes: int) -> str:
    """Kills `coordinator` with its process group (a lost machine) once `succeeded_first`
    node runs succeeded, resumes its backfill and checks that each of its `nodes` nodes
    then ran to success once, those that had succeeded never again; returns its id."""
    wait_for(
        lambda: sum(s.count(dg.DagsterRunStatus.SUCCESS) for s in runs_by_node(home).values()) >= succeeded_first, 300
    )
    os.killpg(coordinator.pid, signal.SIGKILL)
    coordinator.wait()
    backfill_id = next((home / "partition_assets" / "backfills").glob("*.json")).stem
    before = runs_by_node(home, backfill_id)
    succeeded_before = {n for n, s in before.items() if dg.DagsterRunStatus.SUCCESS in s}
    assert succeeded_first <= len(succeeded_before) < nodes

    resumed = cli(home, "resume", backfill_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr

    after = runs_by_node(home, backfill_id)
    assert len(after) == nodes
    for node, statuses in after.items():
        assert Counter(statuses)[dg.DagsterRunStatus.SUCCESS] == 1, node  # ran to success once
        if node in succeeded_before:
            assert statuses == [dg.DagsterRunStatus.SUCCESS], node  # never ran again
    return backfill_id


def png_cells(path: Path, rows: int, columns: int) -> list[list[str]]:
    """The colour at the centre of each heatmap cell, as #rrggbb."""
    image = Image.open(path).convert("RGB")
    cell = heatmap._CELL_WIDTH
    return [
        [
            "#%02x%02x%02x"
            % image.getpixel(
                (
                    heatmap._LABEL_WIDTH + c * cell + cell // 2 - 1,
                    4 + r * heatmap._ROW_HEIGHT + heatmap._ROW_HEIGHT // 2,
                )
            )
            for c in range(columns)
        ]
        for r in range(1, rows + 1)
    ]


def test_plan_launches_nothing(home):
    done = cli(home, "plan", *TARGET, "--select", "key:raw+", "--start", "2024-01-01", "--end", "2024-01-31")
    assert done.returncode == 0, done.stderr
    assert "rolling" in done.stdout and "critical path" in done.stdout and "ETA" in done.stdout
    assert runs_by_node(home) == {}
    assert not (home / "partition_assets").exists()


def test_kill_minus_9_then_resume_runs_each_remaining_node_once(home):
    backfill_id = kill_then_resume(home, start_raw_and_clean_backfill(home), succeeded_first=5, nodes=16)
    png = home / "heatmap.png"
    status = cli(home, "status", backfill_id, "--png", str(png))
    assert "raw" in status.stdout and "8 succeeded" in status.stdout
    assert png_cells(png, rows=2, columns=8) == [[COLORS[NodeStatus.SUCCEEDED]] * 8] * 2


def test_catch_up_launches_only_missing_partitions(home):
    first = cli(home, "run", *TARGET, "--select", "key:raw", "--start", "2024-01-01", "--end", "2024-01-03")
    assert first.returncode == 0, first.stderr
    catch_up = cli(
        home, "run", *TARGET, "--select", "key:raw", "--start", "2024-01-01", "--end", "2024-01-06", "--catch-up"
    )
    assert catch_up.returncode == 0, catch_up.stderr
    second_id = catch_up.stdout.split()[1].rstrip(":")  # "backfill <id>: N nodes"
    assert set(runs_by_node(home, second_id)) == {("raw", f"2024-01-0{d}") for d in (4, 5, 6)}


def test_cancel_stops_launching_and_cancels_runs_in_flight(home):
    # 62 nodes (~15 s): a `cancel` command starting under load still lands while it runs.
    coordinator = start_raw_and_clean_backfill(home, last_day="2024-01-31")
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
    assert Counter(statuses)[dg.DagsterRunStatus.SUCCESS] < 62  # launching stopped
    time.sleep(2)
    assert runs_by_node(home, backfill_id) == runs  # and nothing launched after the cancel
    assert "(canceled)" in cli(home, "status", backfill_id).stdout


def test_plan_downstream_adds_the_lineage_cascade_and_exact_trims_coarser_grains(home):
    cascade = cli(
        home, "plan", *TARGET, "--select", "key:clean", "--start", "2024-01-10", "--end", "2024-01-10", "--downstream"
    )
    assert cascade.returncode == 0, cascade.stderr
    nodes = {
        line.split()[0]: int(line.split()[1])
        for line in cascade.stdout.splitlines()[1:]
        if line.split() and line.split()[0] in {"clean", "rolling", "month", "raw"}
    }
    assert nodes == {"clean": 1, "rolling": 3, "month": 1}  # a 3-day window reaches 3 days; raw is upstream
    assert "ledger" in cascade.stdout and "total" in cascade.stdout
    exact = cli(
        home,
        "plan",
        *TARGET,
        "--select",
        "key:clean or key:month",
        "--start",
        "2024-01-10",
        "--end",
        "2024-01-12",
        "--exact",
    )
    assert exact.returncode == 0, exact.stderr
    assert [line.split()[:2] for line in exact.stdout.splitlines()[1:3]] == [["clean", "3"], ["month", "0"]]


def test_an_asset_limit_serializes_that_asset_and_bad_limits_are_refused(home):
    done = cli(
        home,
        "run",
        *TARGET,
        "--select",
        "key:raw",
        "--start",
        "2024-01-01",
        "--end",
        "2024-01-04",
        "--max-parallel",
        "2",
        "--asset-limit",
        "raw=1",
    )
    assert done.returncode == 0, done.stderr
    with dg.DagsterInstance.from_config(str(home)) as instance:
        node_runs = [r for r in instance.get_run_records() if r.dagster_run.asset_selection]  # not the publish run
        spans = sorted((r.start_time, r.end_time) for r in node_runs)
    assert len(spans) == 4
    assert all(earlier[1] <= later[0] for earlier, later in zip(spans, spans[1:]))  # never two at once

    refused = cli(
        home,
        "run",
        *TARGET,
        "--select",
        "key:raw",
        "--start",
        "2024-01-01",
        "--end",
        "2024-01-02",
        "--asset-limit",
        "clean=1",
    )
    assert refused.returncode == 2 and "outside the backfill" in refused.stderr
    assert len(list((home / "partition_assets" / "backfills").glob("*.json"))) == 1  # nothing recorded
