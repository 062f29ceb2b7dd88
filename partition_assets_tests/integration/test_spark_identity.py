"""A Spark Connect server already on the port is used only when this project started it
(spark/connect_server.py `foreign_server`): another checkout's server (another state folder),
or any other listener, is refused and named before anything runs on it."""

import socket

import pytest

from partition_assets.cli.main import main
from partition_assets.errors import SparkConnectServerError
from partition_assets.spark import LocalConnectServer


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
