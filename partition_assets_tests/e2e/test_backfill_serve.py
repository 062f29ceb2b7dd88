"""`partition-assets backfill serve`: the instance's backfill commands run as forks of a
process that has Dagster and the engine imported, with the same output, exit code and
Ctrl-C as in a process of their own; a command it cannot run as that process would is
refused and runs in its own process."""

import os
import signal
import subprocess
from pathlib import Path

import dagster as dg
import pytest

import partition_assets.processes.command_socket
from partition_assets_tests.support.cli_runs import (
    CONSOLE_SCRIPT,
    backfill_cli,
    backfill_id,
    ok,
    run_cli,
    runs_by_node,
    start_cli,
)
from partition_assets_tests.support.command_servers import command_server
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.processes import session_members

pytestmark = pytest.mark.slow

TARGET = ["-m", "partition_assets_tests.support.locations.engine_defs"]
RAW_AND_CLEAN = ["--select", "key:raw or key:clean", "--max-parallel", "2"]
NOT_TAKEN = "the command server did not take this command"


def days(first: str, last: str) -> list[str]:
    return ["--start", first, "--end", last]


def test_a_backfill_run_by_the_server_is_the_one_its_own_process_runs(home):
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    unknown_asset = ["run", *TARGET, "--select", "key:nope", *days("2024-01-01", "2024-01-02")]
    alone = backfill_cli(home, *unknown_asset)
    with command_server(env) as server:
        served_error = backfill_cli(home, *unknown_asset)
        served = backfill_cli(home, "run", *TARGET, *RAW_AND_CLEAN, *days("2024-01-01", "2024-01-02"))
        assert len(server.forks()) == 2, server.lines
    # A refused input: the same message, exit code 2, nothing run.
    assert (served_error.returncode, served_error.stdout, served_error.stderr) == (
        alone.returncode,
        alone.stdout,
        alone.stderr,
    )
    assert alone.returncode == 2 and "nope" in alone.stderr
    # A backfill: run to its end, printed on the command's output.
    output = ok(served)
    assert NOT_TAKEN not in served.stderr
    identifier = backfill_id(output)
    assert f"backfill {identifier}: 4 succeeded" in output
    assert runs_by_node(home, identifier) == {
        (asset, day): [dg.DagsterRunStatus.SUCCESS]
        for asset in ("raw", "clean")
        for day in ("2024-01-01", "2024-01-02")
    }


def test_the_console_scripts_command_is_served_by_the_console_scripts_server(home):
    # Both put the working folder on the import path before the client sends its path
    # (partition_assets/__main__.py): the server's had it first and the client's not at all,
    # and every such command was refused ("the command's sys_path is not the server's").
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    with command_server(env, program=CONSOLE_SCRIPT) as server:
        listed = run_cli("backfill", "list", env=env, program=CONSOLE_SCRIPT)
        assert NOT_TAKEN not in listed.stderr
        assert listed.returncode == 0 and len(server.forks()) == 1, listed.stderr


def test_ctrl_c_interrupts_a_served_backfill_as_it_interrupts_one_in_its_own_process(home):
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    with command_server(env) as server:
        command = start_cli(
            "backfill", "run", *TARGET, *RAW_AND_CLEAN, *days("2024-01-01", "2024-01-20"),
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        wait_for(lambda: any(dg.DagsterRunStatus.SUCCESS in s for s in runs_by_node(home).values()), 120)
        (fork,) = server.forks()
        command.send_signal(signal.SIGINT)
        _, stderr = command.communicate(timeout=60)
        # Ended by SIGINT after a KeyboardInterrupt, as Python ends; the fork and its workers with it.
        assert command.returncode == -signal.SIGINT, stderr
        assert "KeyboardInterrupt" in stderr
        wait_for(lambda: not session_members(fork), 30)
        assert server.process.poll() is None  # the server serves on
    assert 0 < sum(s.count(dg.DagsterRunStatus.SUCCESS) for s in runs_by_node(home).values()) < 40


def test_a_command_the_server_would_run_otherwise_runs_in_its_own_process(home, tmp_path):
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    module = Path(partition_assets.processes.command_socket.__file__)
    mtime = module.stat().st_mtime_ns
    with command_server(env) as server:
        # A second server for the same instance is refused.
        second = backfill_cli(home, "serve")
        assert second.returncode == 2 and "already serves the instance" in second.stderr
        # Another import path: the server's imports are not the command's.
        other_path = run_cli(
            "backfill",
            "list",
            env={**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))},
        )
        assert other_path.returncode == 0, other_path.stderr
        assert f"{NOT_TAKEN} (the command's sys_path is not the server's)" in other_path.stderr, (
            server.lines,
            server.process.poll(),
        )
        # A code root: imported by a new interpreter, which a fork of the server is not.
        code_root = backfill_cli(home, "status", "b1", "--code-root", str(tmp_path / "absent"))
        assert f"{NOT_TAKEN} (a command on another code root runs in an interpreter of its own)" in code_root.stderr
        assert code_root.returncode == 2 and "no such folder" in code_root.stderr
        assert len(server.forks()) == 1
        # A module the server imported changed: it would run old code, so it stops.
        try:
            os.utime(module, ns=(mtime + 10**9, mtime + 10**9))
            stale = backfill_cli(home, "list")
        finally:
            os.utime(module, ns=(mtime, mtime))
        assert stale.returncode == 0, stale.stderr
        assert f"{NOT_TAKEN} ({module} changed since the server started; it stopped)" in stale.stderr
        assert server.process.wait(30) == 0
        assert len(server.forks()) == 1
    # With no server, a command runs in its own process, and says nothing of it.
    alone = backfill_cli(home, "list")
    assert alone.returncode == 0 and NOT_TAKEN not in alone.stderr


def test_a_server_without_an_instance_is_refused_with_the_fix():
    env = {name: value for name, value in os.environ.items() if name != "DAGSTER_HOME"}
    refused = run_cli("backfill", "serve", env=env)
    assert refused.returncode == 2
    assert "DAGSTER_HOME is not set" in refused.stderr and "export DAGSTER_HOME=" in refused.stderr
    assert "serving" not in refused.stdout
