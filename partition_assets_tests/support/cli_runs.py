"""`partition-assets` as a user runs it, for end-to-end tests and benchmarks: run to its end or
started in a session of its own, from the repository's root; reading what it printed and the
runs of the instance it ran against; a backfill killed with its processes, then resumed.

Not guaranteed: the commands' own timing (each is a fresh interpreter that imports Dagster).
"""

import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

import dagster as dg

from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets_tests.support import REPO
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.records import recorded_ids

CLI = [sys.executable, "-m", "partition_assets"]
# The console script `pip install` puts beside the interpreter: `partition-assets` as a user types it.
CONSOLE_SCRIPT = [str(Path(sys.executable).parent / "partition-assets")]

# An instance that launches each submitted run at once (the synchronous DefaultRunCoordinator;
# the repo's dagster.yaml queues runs for dagster-daemon) with Dagster's DefaultRunLauncher.
LAUNCHING_INSTANCE_YAML = """\
telemetry:
  enabled: false
run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
run_launcher:
  module: dagster
  class: DefaultRunLauncher
"""


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 600, program: Sequence[str] = CLI
) -> subprocess.CompletedProcess:
    """`partition-assets <args>` run to its end, its output captured as text; in `env` (the
    whole environment: this process's when None); as `program` (CONSOLE_SCRIPT: the console script)."""
    return subprocess.run(
        [*program, *args],
        cwd=REPO,
        env=dict(os.environ if env is None else env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    stdout: int | IO = subprocess.DEVNULL,
    stderr: int | IO = subprocess.DEVNULL,
    program: Sequence[str] = CLI,
) -> subprocess.Popen:
    """`partition-assets <args>` started in a session of its own, so that a test can kill it with
    every process it started (a lost machine); its output to `stdout` and `stderr` (PIPE: text);
    as `program` (CONSOLE_SCRIPT: the console script)."""
    return subprocess.Popen(
        [*program, *args],
        cwd=REPO,
        env=dict(os.environ if env is None else env),
        stdout=stdout,
        stderr=stderr,
        text=True,
        start_new_session=True,
    )


def backfill_cli(home: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`partition-assets backfill <args>` against the instance at `home` (its DAGSTER_HOME)."""
    return run_cli("backfill", *args, env={**os.environ, "DAGSTER_HOME": str(home)}, timeout=timeout)


def backfill_id(output: str) -> str:
    """The id of the backfill whose start line `output` holds."""
    found = re.search(r"backfill (\w+): \d+ nodes", output)
    assert found, output
    return found.group(1)


def ok(result: subprocess.CompletedProcess) -> str:
    """The stdout of a command that must have succeeded (its output shows when it did not)."""
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def runs_by_node(home: Path, backfill_id: str | None = None) -> dict[tuple[str, str], list[dg.DagsterRunStatus]]:
    """The statuses of the runs of each (asset, partition) in the instance at `home`: of one backfill, or of any."""
    tags = {BACKFILL_ID_TAG: backfill_id} if backfill_id else {}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        found: dict[tuple[str, str], list] = {}
        for run in instance.get_runs(dg.RunsFilter(tags=tags)):
            for asset in run.asset_selection or ():
                found.setdefault((asset.to_user_string(), run.tags["dagster/partition"]), []).append(run.status)
        return found


def kill_then_resume(home: Path, coordinator: subprocess.Popen, succeeded_first: int, nodes: int) -> str:
    """Kills `coordinator` with its process group (a lost machine) once `succeeded_first`
    node runs succeeded, resumes its backfill and checks that each of its `nodes` nodes
    then ran to success once, those that had succeeded never again; returns its id."""
    wait_for(
        lambda: sum(s.count(dg.DagsterRunStatus.SUCCESS) for s in runs_by_node(home).values()) >= succeeded_first, 300
    )
    os.killpg(coordinator.pid, signal.SIGKILL)
    coordinator.wait()
    (backfill_id,) = recorded_ids(home)
    before = runs_by_node(home, backfill_id)
    succeeded_before = {n for n, s in before.items() if dg.DagsterRunStatus.SUCCESS in s}
    assert succeeded_first <= len(succeeded_before) < nodes

    resumed = backfill_cli(home, "resume", backfill_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr

    after = runs_by_node(home, backfill_id)
    assert len(after) == nodes
    for node, statuses in after.items():
        assert Counter(statuses)[dg.DagsterRunStatus.SUCCESS] == 1, node  # ran to success once
        if node in succeeded_before:
            assert statuses == [dg.DagsterRunStatus.SUCCESS], node  # never ran again
    return backfill_id
