"""`partition-assets backfill run` starts its workers' fork server before importing Dagster,
preloading the runner and the `-m` code location; other commands start none
(partition_assets/processes/fork_server.py)."""

import subprocess
import sys
import textwrap

import pytest

from tests.support import REPO

# Starts the fork server as the command line would, then prints each child process's
# command line and whether Dagster was imported by then.
SCRIPT = textwrap.dedent(
    """
    import os, subprocess, sys
    from partition_assets.processes.fork_server import start_for_command
    start_for_command(sys.argv[1:])
    children = subprocess.run(["pgrep", "-P", str(os.getpid())], capture_output=True, text=True).stdout.split()
    for child in children:
        with open(f"/proc/{child}/cmdline", "rb") as cmdline:
            print("child:", cmdline.read().decode().replace("\\0", " "))
    print("dagster imported" if "dagster" in sys.modules else "dagster not imported")
    """
)


def _children_and_imports(*argv: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *argv], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.splitlines()


def test_backfill_run_starts_a_fork_server_preloading_the_runner_and_the_module_before_dagster():
    lines = _children_and_imports("backfill", "run", "-m", "partition_assets.example", "--select", "key:events")
    # (multiprocessing's resource tracker starts beside it)
    (child,) = [line for line in lines if line.startswith("child:") and "multiprocessing.forkserver" in line]
    assert "'partition_assets.backfill.running.local_workers', 'partition_assets.example'" in child
    assert lines[-1] == "dagster not imported"


@pytest.mark.parametrize(
    "argv",
    [
        ("backfill", "run", "-m", "partition_assets.example", "--runs-via", "launcher"),
        ("backfill", "status", "abc123"),
        ("deploys",),
    ],
)
def test_commands_without_local_workers_start_no_fork_server(argv):
    lines = _children_and_imports(*argv)
    assert not [line for line in lines if line.startswith("child:")]
