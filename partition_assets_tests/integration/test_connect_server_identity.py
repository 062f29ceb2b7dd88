"""The local Spark Connect server as a backfill meets it: one already on the port is used only
when this project started it (spark/connect_server.py `foreign_server`), another checkout's
server (another state folder) or any other listener is refused and named before anything runs
on it; one that is not running is started before the first node, with its time said
(backfill/running/spark_start.py)."""

import os
import re
import socket
import subprocess
import textwrap
import threading

import pytest

from partition_assets.cli.main import main
from partition_assets.errors import SparkConnectServerError
from partition_assets.processes.identity import ProcessIdentity
from partition_assets.spark import LocalConnectServer
from partition_assets.spark.resource import spark_conf_from_env
from partition_assets_tests.support.cli_runs import run_cli
from partition_assets_tests.support.webserver import free_port

# A user's project on the one-call wiring: its asset builds a Spark frame, stored as a Delta table.
SPARK_PROJECT = """
import dagster as dg
import partition_assets as pa
from partition_assets.spark import SparkResource


@dg.asset(partitions_def=pa.daily("2024-01-01"))
def numbers(context: dg.AssetExecutionContext, spark: SparkResource):
    return spark.spark_session.createDataFrame([(1, context.partition_key)], "n long, ds string")


defs = pa.definitions(assets=[numbers], module=__file__)
"""


def test_another_checkouts_server_on_the_port_is_refused_not_reused(spark_resource, tmp_path):
    """The session's server, started from its own state folder, is another checkout's for a
    project whose state folder is elsewhere: the same port, not the same server."""
    ours = spark_resource.local_server()
    assert ours.ensure_running() == ours.url  # the session's own: used
    other_checkout = LocalConnectServer(port=ours.port, state_dir=tmp_path / "other_checkout" / ".state")
    with pytest.raises(SparkConnectServerError) as refused:
        other_checkout.ensure_running()
    message = str(refused.value)
    assert f"port {ours.port} holds a Spark Connect server this project did not start" in message
    assert f"PARTITION_ASSETS_SPARK_REMOTE={ours.url}" in message and "nothing ran on it" in message
    assert not other_checkout.pid_path.exists()  # it started nothing
    assert ours.ensure_running() == ours.url  # and the session's server is untouched


def _listener_and_server_of_its_port(tmp_path):
    """A socket listening on a free port, and a local server of that port (its state folder made)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    server = LocalConnectServer(
        port=listener.getsockname()[1], driver_memory="1g", conf=spark_conf_from_env(), state_dir=tmp_path / "spark"
    )
    server.state_dir.mkdir()
    return listener, server


def test_a_server_that_dies_as_a_run_checks_it_is_started_again_not_taken_for_another(tmp_path):
    """Issue 55, found by the soak (bench/soak/, seed 7): the Spark server killed between a node
    run's look at its port (listening) and at its state files (its process gone) failed that
    node with `port ... holds a Spark Connect server this project did not start`, naming ways
    out for a foreign server that was not there. Here the port's listener closes once probed,
    before the check reads the state folder: its identity file is a pipe, written only then."""
    listener, server = _listener_and_server_of_its_port(tmp_path)
    os.mkfifo(server.identity_path)

    def die_once_probed() -> None:
        probe, _ = listener.accept()
        listener.close()  # nothing listens on the port from now on
        probe.recv(1)  # the probe closes first: no TIME_WAIT left on the port the server binds next
        probe.close()
        server.identity_path.write_text("{}")  # then the check reads it: no server recorded

    dying = threading.Thread(target=die_once_probed, daemon=True)
    dying.start()
    try:
        assert server.ensure_running() == server.url
        assert server.foreign_server() is None  # a server of its own, started anew
    finally:
        server.stop()


def test_a_server_killed_a_moment_ago_whose_port_still_listens_is_started_again_not_taken_for_another(tmp_path):
    """Issue 55, found by the soak (seed 22): a Spark server killed with SIGKILL is gone from
    /proc a moment before its last thread exits and its port closes; `ensure_running` in that
    moment took it for another project's server and failed. Here the recorded server's process
    has exited while its port listens on, closing two seconds later."""
    listener, server = _listener_and_server_of_its_port(tmp_path)
    killed = subprocess.Popen(["sleep", "60"])
    server.record_server(ProcessIdentity.of_pid(killed.pid))
    server.record_identity("the killed server's token")
    killed.kill()
    killed.wait()
    threading.Timer(2.0, listener.close).start()  # its last thread exits: the port closes
    try:
        assert server.ensure_running() == server.url
        assert server.foreign_server() is None  # a server of its own, started anew
    finally:
        server.stop()


def test_a_listener_that_is_no_server_of_ours_is_refused_by_spark_start(tmp_path, monkeypatch, capsys):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        monkeypatch.setenv("PARTITION_ASSETS_SPARK_CONNECT_PORT", str(port))
        monkeypatch.setenv("PARTITION_ASSETS_STATE_DIR", str(tmp_path / "state"))
        assert main(["spark", "start"]) == 2
    refusal = capsys.readouterr().err.strip().splitlines()[-1]
    assert refusal.startswith(
        f"partition-assets spark: port {port} holds a Spark Connect server this project did not"
    ), refusal
    assert f"{tmp_path / 'state'} records no server of its own on port {port}" in refusal


@pytest.mark.slow
def test_a_backfill_starts_the_server_its_nodes_need_first_and_says_how_long_it_took(home, tmp_path, monkeypatch):
    """The server's start (22 s in the trial) was silent, inside the first node's run."""
    project = tmp_path / "spark_project.py"
    project.write_text(textwrap.dedent(SPARK_PROJECT))
    server = LocalConnectServer(port=free_port(), state_dir=tmp_path / "state")
    monkeypatch.setenv("PARTITION_ASSETS_SPARK_CONNECT_PORT", str(server.port))
    monkeypatch.setenv("PARTITION_ASSETS_STATE_DIR", str(server.state_dir))
    monkeypatch.setenv("PARTITION_ASSETS_LAKE", str(tmp_path / "lake"))
    argv = ["backfill", "run", "-f", str(project), "--select", "key:numbers", "--start", "2024-01-01"]
    try:
        first = run_cli(*argv, "--end", "2024-01-01")  # a process of its own: no Spark session left in this one
        assert first.returncode == 0, first.stderr
        lines = first.stdout.splitlines()
        assert lines[1] == f"spark: starting the local Spark Connect server at {server.url} (log: {server.log_path})"
        assert re.fullmatch(r"spark: server ready in \d+\.\d s", lines[2]), lines
        assert lines[3].startswith("[1/1] numbers") and lines[3].endswith(")") and " ok " in lines[3], lines
        # Running, it says nothing the next time.
        again = run_cli(*argv, "--end", "2024-01-02")
        assert again.returncode == 0 and not any(line.startswith("spark:") for line in again.stdout.splitlines())
    finally:
        server.stop()
