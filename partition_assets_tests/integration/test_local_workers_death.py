"""A backfill worker killed mid-run (issue 55, found by the soak: bench/soak/, seed 1): the
node it ran runs again on new workers, the backfill goes on, and the run it left is marked
canceled. Before, concurrent.futures' pool broke: every node in flight failed, and the next
launch raised BrokenProcessPool out of the coordinator, failing the backfill with a traceback."""

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg2
import pytest

from partition_assets.backfill.model import NodeStatus
from partition_assets.backfill.planning.graph import build_graph
from partition_assets.backfill.planning.spec import TimeRange
from partition_assets.backfill.running.local_workers import DagsterNodeRunner
from partition_assets.backfill.running.loop import execute
from partition_assets.backfill.running.scheduling import Throttle
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets_tests.support.cli_runs import ok, run_cli, start_cli
from partition_assets_tests.support.instances import instance_env, open_instance
from partition_assets_tests.support.locations import worker_death_defs
from partition_assets_tests.support.locations.worker_death_defs import DYING_PARTITION, KILL_ENV, MARKERS_ENV
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.postgres import PostgresServer
from partition_assets_tests.support.records import recorded_ids

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


# Postgres holds the first insert of a run of DYING_PARTITION for LATE_SECONDS before it
# commits it: the insert of a worker killed meanwhile lands after its death was seen.
LATE_SECONDS = 3
_SLOW_FIRST_INSERT = f"""
CREATE SEQUENCE slowed_once;
CREATE FUNCTION slow_first_insert() RETURNS trigger AS $$
BEGIN
  IF NEW.partition = '{DYING_PARTITION}' AND nextval('slowed_once') = 1 THEN
    PERFORM pg_sleep({LATE_SECONDS});
  END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER slow_first_insert BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION slow_first_insert();
"""


def test_a_run_its_dead_worker_created_after_its_death_was_seen_is_canceled(tmp_path):
    """Issue 55, found by the soak (bench/soak/, seed 23): node runs left NOT_STARTED for good.
    A database server finishes the statement of a client that died: the insert of a run whose
    worker was killed as it sent it lands after the coordinator saw the worker die and looked
    for the run (not there yet, so nothing to cancel). The run also lacks its tags (a second
    statement, never sent). Now the runner looks for it again when it closes, and marks it
    canceled. A server of its own: the trigger would slow the others."""
    with (
        PostgresServer() as server,
        open_instance(instance_env(tmp_path / "pg", server.create_database())) as instance,
        _slowed_first_run_insert() as database,
    ):
        killer = threading.Thread(target=_kill_when_a_run_insert_waits, args=(database, _fork_server_pid))
        killer.start()
        asset_graph = worker_death_defs.defs.resolve_asset_graph()
        graph = build_graph(asset_graph, {dg.AssetKey("raw")}, JANUARY_1_TO_3)
        with DagsterNodeRunner(MODULE, 1, {BACKFILL_ID_TAG: "bf-late"}, instance) as runner:
            status = execute(graph, runner.launch, Throttle(max_parallel=1), batch_chains=False)
            killer.join()
            # The dead worker's run, as the server commits it once its sleep ends.
            wait_for(lambda: len(_runs_of_the_dying_partition(instance)) == 2, timeout=30)
        dying = _runs_of_the_dying_partition(instance)
        everything = instance.get_runs()
        tagged = instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: "bf-late"}))

    assert set(status.values()) == {NodeStatus.SUCCEEDED}, status
    assert sorted(run.status.value for run in dying) == ["CANCELED", "SUCCESS"], dying
    assert all(run.is_finished for run in everything), [(r.run_id, r.status) for r in everything]
    assert len(tagged) == len(everything) - 1  # the dead worker's run: found by its id alone


def test_a_run_a_killed_coordinators_worker_created_after_the_kill_is_canceled_by_resume(tmp_path):
    """Issue 55, found by the soak (bench/soak/, seed 23): as above, with the coordinator killed
    (its workers with it) as a worker's insert of its run waits on the server. The run lands
    after the kill without its tags, where `resume` looked for its backfill's runs in flight
    (the instance's tag index), so it stayed NOT_STARTED. Now `resume` finds the backfill's runs
    in flight by their status and the tags of their record."""
    home = tmp_path / "pg"
    with (
        PostgresServer() as server,
        open_instance(instance_env(home, server.create_database())) as instance,
        _slowed_first_run_insert() as database,
    ):
        coordinator = start_cli(
            "backfill", "run", "-m", MODULE, "--select", "key:raw", "--start", "2024-01-01", "--end", "2024-01-03",
            "--max-parallel", "1", "--no-batch",
        )  # fmt: skip
        _kill_when_a_run_insert_waits(database, lambda: coordinator.pid, os.killpg)
        coordinator.wait(timeout=60)
        wait_for(lambda: _runs_of_the_dying_partition(instance), timeout=30)  # landed after the kill
        (backfill,) = recorded_ids(home)
        ok(run_cli("backfill", "resume", backfill))
        dying = _runs_of_the_dying_partition(instance)
        everything = instance.get_runs()

    assert sorted(run.status.value for run in dying) == ["CANCELED", "SUCCESS"], dying
    assert all(run.is_finished for run in everything), [(r.run_id, r.status) for r in everything]


@contextmanager
def _slowed_first_run_insert() -> Iterator[Any]:
    """A connection to the instance's database (open_instance's), where the first insert of a
    run of DYING_PARTITION now waits LATE_SECONDS on the server before it commits."""
    database = psycopg2.connect(os.environ["DAGSTER_PG_URL"].replace("+psycopg2", ""))
    database.autocommit = True
    with closing(database), database.cursor() as cursor:
        cursor.execute(_SLOW_FIRST_INSERT)
        yield database


def _runs_of_the_dying_partition(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    # Not by tag: the dead worker's run has none.
    return [run for run in instance.get_runs() if run.tags.get("dagster/partition") == DYING_PARTITION]


def _kill_when_a_run_insert_waits(database: Any, victim: Callable[[], int], kill: Callable = os.kill) -> None:
    """SIGKILLs `victim()` (with `kill`) once a worker's insert of its run is held by the
    server (`_SLOW_FIRST_INSERT`)."""
    with database.cursor() as cursor:
        wait_for(
            lambda: (
                cursor.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND query LIKE 'INSERT INTO runs%'"
                )
                or cursor.fetchone()
            ),
            timeout=120,
            step=0.02,
        )
    kill(victim(), signal.SIGKILL)


def _fork_server_pid() -> int:
    """multiprocessing's fork server, whose workers die with it: the child of this process that runs its main."""
    for children in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        for pid in children.read_text().split():
            if b"forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return int(pid)
    raise AssertionError("no fork server among this process's children")
