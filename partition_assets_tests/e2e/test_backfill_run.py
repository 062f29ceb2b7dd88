"""`partition-assets backfill` as a user runs it: plan, run, kill -9, resume, catch-up, tags."""

import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest
from PIL import Image

from partition_assets.backfill.model import NodeStatus
from partition_assets.cli import heatmap
from partition_assets.cli.heatmap import COLORS
from partition_assets.cli.main import main
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets_tests.support.cli_runs import backfill_cli, kill_then_resume, runs_by_node, start_cli
from partition_assets_tests.support.locations.engine_defs import FAILING_PARTITION
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.processes import session_members
from partition_assets_tests.support.records import recorded_ids

TARGET = ["-m", "partition_assets_tests.support.locations.engine_defs"]

pytestmark = pytest.mark.slow


def raw_days(start: str, end: str) -> tuple[str, ...]:
    """The location and selection of `raw` from `start` to `end`: a `backfill run`'s target."""
    return (*TARGET, "--select", "key:raw", "--start", start, "--end", end)


def start_raw_and_clean_backfill(home, last_day: str = "2024-01-08") -> subprocess.Popen:
    """`backfill run` of raw and clean from January 1 to `last_day` (8 days: 16 nodes), in its
    own session."""
    args = ["--select", "key:raw or key:clean", "--start", "2024-01-01", "--end", last_day, "--max-parallel", "2"]
    return start_cli("backfill", "run", *TARGET, *args, env={**os.environ, "DAGSTER_HOME": str(home)})


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
    done = backfill_cli(home, "plan", *TARGET, "--select", "key:raw+", "--start", "2024-01-01", "--end", "2024-01-31")
    assert done.returncode == 0, done.stderr
    assert "rolling" in done.stdout and "critical path" in done.stdout and "ETA" in done.stdout
    assert runs_by_node(home) == {}
    assert not (home / "partition_assets").exists()


def test_kill_minus_9_then_resume_runs_each_remaining_node_once(home):
    backfill_id = kill_then_resume(home, start_raw_and_clean_backfill(home), succeeded_first=5, nodes=16)
    png = home / "heatmap.png"
    status = backfill_cli(home, "status", backfill_id, "--png", str(png))
    assert "raw" in status.stdout and "8 succeeded" in status.stdout
    assert png_cells(png, rows=2, columns=8) == [[COLORS[NodeStatus.SUCCEEDED]] * 8] * 2


def test_catch_up_launches_only_missing_partitions(home):
    first = backfill_cli(home, "run", *raw_days("2024-01-01", "2024-01-03"))
    assert first.returncode == 0, first.stderr
    catch_up = backfill_cli(home, "run", *raw_days("2024-01-01", "2024-01-06"), "--catch-up")
    assert catch_up.returncode == 0, catch_up.stderr
    second_id = catch_up.stdout.split()[1].rstrip(":")  # "backfill <id>: N nodes"
    assert set(runs_by_node(home, second_id)) == {("raw", f"2024-01-0{d}") for d in (4, 5, 6)}
    page = home / "status.html"
    status = backfill_cli(home, "status", second_id, "--html", str(page))  # the days it left alone are not missing
    assert f"{'raw':<28} ▒▒▒███  3 current (skipped by --catch-up), 3 succeeded" in status.stdout.splitlines()
    assert '<td title="2024-01-01: current (skipped by --catch-up)"' in page.read_text()


def test_resume_of_a_catch_up_backfill_runs_only_the_nodes_it_has_not_done(home):
    """Issue 50, hole 8: resume passed only the succeeded nodes as done, so it ran again (and
    republished) the nodes its --catch-up start had left alone as current."""
    first = backfill_cli(home, "run", *raw_days("2024-01-01", "2024-01-03"))
    assert first.returncode == 0, first.stderr
    args = ("--select", "key:raw or key:flaky", "--start", "2024-01-01", "--end", "2024-01-05", "--catch-up")
    catch_up = backfill_cli(home, "run", *TARGET, *args)
    assert catch_up.returncode == 1, catch_up.stderr  # flaky fails on its FAILING_PARTITION
    backfill_id = catch_up.stdout.split()[1].rstrip(":")  # "backfill <id>: N nodes"
    before = runs_by_node(home, backfill_id)
    assert ("raw", "2024-01-04") in before and ("raw", "2024-01-03") not in before  # raw 1-3 current: skipped

    resumed = backfill_cli(home, "resume", backfill_id)

    assert resumed.returncode == 1, resumed.stderr  # flaky fails again
    after = runs_by_node(home, backfill_id)
    ran = {node for node, statuses in after.items() if len(statuses) > len(before.get(node, []))}
    assert ran == {("flaky", FAILING_PARTITION)}  # exactly the node not done: neither current nor succeeded


def test_cancel_stops_launching_and_cancels_runs_in_flight(home):
    # 62 nodes (~15 s): a `cancel` command starting under load still lands while it runs.
    coordinator = start_raw_and_clean_backfill(home, last_day="2024-01-31")
    wait_for(lambda: any(dg.DagsterRunStatus.SUCCESS in s for s in runs_by_node(home).values()), 300, step=0.2)
    (backfill_id,) = recorded_ids(home)
    canceled = backfill_cli(home, "cancel", backfill_id)
    assert canceled.returncode == 0, canceled.stderr
    coordinator.wait(timeout=120)

    runs = runs_by_node(home, backfill_id)
    statuses = [s for node_statuses in runs.values() for s in node_statuses]
    assert dg.DagsterRunStatus.STARTED not in statuses  # nothing left in flight
    assert Counter(statuses)[dg.DagsterRunStatus.SUCCESS] < 62  # launching stopped
    # Once no process of the backfill is left (its workers end after the coordinator), none can launch a run.
    wait_for(lambda: not session_members(coordinator.pid), 60)
    assert runs_by_node(home, backfill_id) == runs  # and nothing launched after the cancel
    assert "(canceled)" in backfill_cli(home, "status", backfill_id).stdout


def test_plan_downstream_adds_the_lineage_cascade_and_exact_trims_coarser_grains(home):
    cascade = backfill_cli(
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
    exact = backfill_cli(
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
    done = backfill_cli(
        home,
        "run",
        *raw_days("2024-01-01", "2024-01-04"),
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

    refused = backfill_cli(
        home,
        "run",
        *raw_days("2024-01-01", "2024-01-02"),
        "--asset-limit",
        "clean=1",
    )
    assert refused.returncode == 2 and "outside the backfill" in refused.stderr
    assert len(recorded_ids(home)) == 1  # nothing recorded


def test_a_tag_option_reaches_every_node_run(home):
    done = backfill_cli(
        home,
        "run",
        *raw_days("2024-01-01", "2024-01-02"),
        "--tag",
        "team=finance",
    )
    assert done.returncode == 0, done.stderr
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs(dg.RunsFilter(tags={"team": "finance"}))
        assert sorted(run.tags["dagster/partition"] for run in runs) == ["2024-01-01", "2024-01-02"]
        assert all(BACKFILL_ID_TAG in run.tags for run in runs)


def test_a_backfill_killed_by_kill_minus_9_gives_its_capacity_share_back_at_once(home, capsys):
    """Issue 39, hole 6: a backfill whose coordinator was killed stayed `running` and kept its share of the
    deployment's capacity (all 3 runs: the repo's dagster.yaml runs 4 at once, one kept in reserve; it had the higher
    priority), so a new backfill launched no node for 60 s, until the dead one was canceled. Only backfills whose
    coordinator is live claim a share."""
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    isolation = ["-m", "partition_assets_tests.support.locations.isolation_defs"]
    # A quarter of nodes (~15 s of runs): still running when it is killed.
    quarter = ["--select", "key:free", "--start", "2024-01-01", "--end", "2024-03-31", "--max-parallel", "3"]
    quarter += ["--priority", "1"]
    killed = start_cli("backfill", "run", *isolation, *quarter, env=env)
    wait_for(lambda: runs_by_node(home), 300, step=0.2, alive=[killed])  # its nodes run: it took its share
    os.killpg(killed.pid, signal.SIGKILL)  # the coordinator with its workers
    killed.wait(timeout=60)
    (killed_id,) = recorded_ids(home)

    other_days = ["--select", "key:pooled", "--start", "2024-01-01", "--end", "2024-01-02", "--max-parallel", "1"]
    newer = start_cli("backfill", "run", *isolation, *other_days, env=env)
    try:

        def launched_a_node() -> bool:
            """the newer backfill launched a node run"""
            return len(recorded_ids(home)) == 2 and bool(runs_by_node(home, recorded_ids(home)[1]))

        wait_for(launched_a_node, 30, step=0.2, alive=[newer])  # a command's start-up included
        assert newer.wait(timeout=120) == 0
    finally:
        if newer.poll() is None:
            os.killpg(newer.pid, signal.SIGKILL)

    capsys.readouterr()
    assert main(["backfill", "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    (killed_line,) = [line for line in listed if line.startswith(killed_id)]
    assert " running " in killed_line and "no share: no live coordinator" in killed_line, listed
    assert "share 3 runs" not in killed_line, listed
