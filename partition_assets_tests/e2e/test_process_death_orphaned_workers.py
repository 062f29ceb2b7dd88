"""A `partition-assets backfill run` killed with SIGKILL takes its fork server and workers
with it (partition_assets/processes/process_death.py): none lives on to finish its run in flight and
write after the backfill was canceled or resumed."""

import contextlib
import os
import signal
from pathlib import Path

import dagster as dg
import pytest

from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets_tests.support.cli_runs import start_cli
from partition_assets_tests.support.instances import instance_env
from partition_assets_tests.support.locations.ui_engine_defs import RELEASE_DIR_ENV
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.processes import alive, session_descendants

pytestmark = pytest.mark.slow

HELD_BACKFILL = [
    "run",
    "-m",
    "partition_assets_tests.support.locations.ui_engine_defs",
    "--select",
    "key:held",
    "--start",
    "2024-01-01",
    "--end",
    "2024-01-02",
    "--max-parallel",
    "2",
]
# How long the processes of a killed coordinator may take to end: its workers end at once,
# its fork server once it has torn down its modules (1-3 s on a busy machine).
GONE_WITHIN_SECONDS = 30


def runs_of_held(home: Path, backfill_id: str | None = None) -> list[dg.DagsterRun]:
    tags = {BACKFILL_ID_TAG: backfill_id} if backfill_id else {}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return list(instance.get_runs(dg.RunsFilter(tags=tags)))


def test_a_coordinator_killed_with_sigkill_takes_its_fork_server_and_workers_with_it(tmp_path):
    home, release = tmp_path / "home", tmp_path / "release"
    release.mkdir()
    # `held` waits for a file in `release`, created only once the coordinator is dead: a
    # worker that outlived it would then finish its run.
    env = {**os.environ, **instance_env(home), RELEASE_DIR_ENV: str(release)}
    # Its storage created before the command starts: this test's polls and the command
    # creating the same SQLite storage at once stamp its schema version twice (alembic).
    runs_of_held(home)
    coordinator = start_cli("backfill", *HELD_BACKFILL, env=env)
    processes: dict[int, str] = {}
    try:
        in_flight = wait_for(
            lambda: [r for r in runs_of_held(home) if r.status == dg.DagsterRunStatus.STARTED], timeout=180
        )
        processes = session_descendants(coordinator.pid)
        # Its fork server (a fork of it) and the 2 workers it forked, at least (and multiprocessing's
        # resource tracker).
        assert len(processes) >= 3, alive(processes)

        coordinator.send_signal(signal.SIGKILL)
        assert coordinator.wait(timeout=60) == -signal.SIGKILL
        with contextlib.suppress(TimeoutError):  # the assertion below names the survivors
            wait_for(lambda: not alive(processes), timeout=GONE_WITHIN_SECONDS)
        survivors = alive(processes)
        assert not survivors, f"outlived their coordinator by {GONE_WITHIN_SECONDS} s: {survivors}"

        # No process of the backfill is left to write: its runs in flight never succeed.
        (release / "all").touch()
        backfill_id = in_flight[0].tags[BACKFILL_ID_TAG]
        assert [r.status for r in runs_of_held(home, backfill_id)].count(dg.DagsterRunStatus.SUCCESS) == 0
    finally:
        if coordinator.poll() is None:
            coordinator.kill()
            coordinator.wait()
        for pid in alive(processes):  # what the test started and outlived it (the hole, when open)
            os.kill(pid, signal.SIGKILL)
