"""The local Spark Connect server on a shared host (issue 21, hole 5): it listens on the
loopback only, its conf (S3 keys) stays off every command line, and `spark stop` never
signals a process its pid file names unless that process is the server.

The server tests share one server (one JVM start), with a state folder and Connect port of
the module's own, given through the environment the CLI reads; the stale pid file test has
its own. The test session's shared server is never touched.
"""

import contextlib
import dataclasses
import ipaddress
import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from partition_assets.cli.main import main
from partition_assets.processes.identity import ProcessIdentity
from partition_assets.spark import LocalConnectServer
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.webserver import free_port

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
SECRET_KEY = "spark.hadoop.fs.s3a.secret.key"
# Characters Java's properties syntax treats specially, so that the value must arrive escaped.
SECRET = "fake-s3-secret-7f3a9c = with:odd#chars!\\"


def own_server_at(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> LocalConnectServer:
    """The server `partition-assets spark ...` manages here: a state folder and port of the test's own."""
    port = free_port()
    monkeypatch.setenv("PARTITION_ASSETS_STATE_DIR", str(state_dir))
    monkeypatch.setenv("PARTITION_ASSETS_SPARK_CONNECT_PORT", str(port))
    return LocalConnectServer(port=port, state_dir=state_dir)


@pytest.fixture
def own_server(monkeypatch, tmp_path) -> LocalConnectServer:
    return own_server_at(tmp_path, monkeypatch)


@pytest.fixture(scope="module")
def started(tmp_path_factory) -> Iterator[LocalConnectServer]:
    """One server for the module, started as a user does: `partition-assets spark start` with
    the S3 key in PARTITION_ASSETS_SPARK_CONF, and the UI on."""
    conf = {SECRET_KEY: SECRET, "spark.driver.memory": "1g", "spark.ui.enabled": True, "spark.ui.port": free_port()}
    with pytest.MonkeyPatch.context() as monkeypatch:
        server = own_server_at(tmp_path_factory.mktemp("state"), monkeypatch)
        monkeypatch.setenv("PARTITION_ASSETS_SPARK_CONF", json.dumps(conf))
        try:
            assert main(["spark", "start"]) == 0
            yield server
        finally:
            main(["spark", "stop"])


@pytest.mark.slow
def test_every_port_the_server_listens_on_is_on_the_loopback(started):
    # The Connect port, the driver's RPC and block manager ports, the UI turned on above.
    sockets = listening_sockets(process_group(started.recorded_server().pid))
    assert (started.port, True) in {(port, address.is_loopback) for address, port in sockets}
    assert len(sockets) >= 4, sockets
    exposed = sorted(f"{address}:{port}" for address, port in sockets if not address.is_loopback)
    assert not exposed, f"the server listens beyond the loopback: {exposed}"


@pytest.mark.slow
def test_the_servers_conf_stays_off_command_lines_and_in_an_owner_only_file(started):
    # No process on the machine shows the secret in its command line (`ps` shows every user's)...
    shown = [arg for cmdline in all_command_lines() for arg in cmdline.split(b"\0") if b"fake-s3-secret" in arg]
    assert not shown, f"on a command line: {shown}"
    # ...yet the server holds it, read from a file only its owner can read, and sized its JVM by it.
    session = SparkSession.builder.remote(started.url).create()
    try:
        assert session.conf.get(SECRET_KEY) == SECRET
    finally:
        session.stop()
    assert b"-Xmx1g" in Path(f"/proc/{started.recorded_server().pid}/cmdline").read_bytes().split(b"\0")
    assert stat.S_IMODE(started.conf_path.stat().st_mode) == 0o600


@pytest.mark.slow
def test_stop_stops_the_server_it_started_and_removes_its_files(started, capsys):
    assert main(["spark", "stop"]) == 0
    assert f"stopped the Spark Connect server of port {started.port}" in capsys.readouterr().out
    assert not started.is_running()
    assert not started.pid_path.exists() and not started.conf_path.exists()


def test_stop_leaves_alone_a_process_a_stale_pid_file_names(own_server, capsys):
    # Another user's job, in a process group of its own with two members, whose pid the
    # kernel reused after the server died.
    other = subprocess.Popen(["sh", "-c", "sleep 300 & exec sleep 300"], start_new_session=True)
    try:
        members = wait_for_members(other.pid, 2)
        own_server.state_dir.mkdir(parents=True, exist_ok=True)
        own_server.pid_path.write_text(str(other.pid))

        assert main(["spark", "stop"]) == 0

        assert other.poll() is None and process_group(other.pid) == members, "stop signalled another process"
        message = capsys.readouterr().out
        assert f"named pid {other.pid}, which is not the Spark Connect server of port {own_server.port}" in message
        assert "sleep 300" in message and "not signalled" in message
        assert not own_server.pid_path.exists()
        # With the stale record gone, the next stop has nothing to say about it.
        assert main(["spark", "stop"]) == 0
        assert capsys.readouterr().out.strip() == "no server started by partition_assets was running"
    finally:
        with contextlib.suppress(ProcessLookupError):  # gone if stop did signal it
            os.killpg(other.pid, signal.SIGKILL)
        other.wait()


def test_stop_leaves_alone_a_process_that_took_the_recorded_servers_pid(own_server, capsys):
    # The recorded server ended and the kernel handed its pid to a process started since,
    # whose command line even names this port's server (another state folder's server, say):
    # only the start time recorded beside the pid tells them apart.
    server_like = [SERVER_CLASS, f"spark.connect.grpc.binding.port={own_server.port}"]
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)", *server_like], start_new_session=True
    )
    try:
        taken = ProcessIdentity.of_pid(other.pid)
        assert taken.started is not None
        own_server.state_dir.mkdir(parents=True, exist_ok=True)
        own_server.record_server(dataclasses.replace(taken, started=taken.started - 1))

        assert main(["spark", "stop"]) == 0

        assert other.poll() is None, "stop signalled another process"
        message = capsys.readouterr().out
        assert f"named pid {other.pid}, which no longer names the Spark Connect server" in message
        assert "not signalled" in message and not own_server.pid_path.exists()
    finally:
        other.kill()
        other.wait()


def process_group(pgid: int) -> set[int]:
    """The live processes of process group `pgid` (a server started with start_new_session)."""
    members = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":  # state, ppid, pgrp
            members.add(int(proc.name))
    return members


def wait_for_members(pgid: int, count: int) -> set[int]:
    def started() -> set[int]:
        """the process group has all its members"""
        members = process_group(pgid)
        return members if len(members) == count else set()

    return wait_for(started, timeout=30)


def listening_sockets(pids: set[int]) -> set[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """(address, port) of every listening TCP socket `pids` hold, from /proc/<pid>/net/tcp{,6}."""
    inodes = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue  # closed meanwhile
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    found = set()
    for pid in pids:
        for table in ("tcp", "tcp6"):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and inode in inodes:  # TCP_LISTEN
                    address, port = local.split(":")
                    found.add((kernel_address(address), int(port, 16)))
    return found


def kernel_address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address of /proc/net/tcp{,6}; an IPv4-mapped IPv6 one (a JVM's) as the IPv4 address."""
    # The kernel prints each 32-bit word of the address as an integer in host byte order.
    words = [int(text[i : i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, len(text), 8)]
    address = ipaddress.ip_address(b"".join(words))
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return mapped or address


def all_command_lines() -> list[bytes]:
    lines = []
    for proc in Path("/proc").iterdir():
        try:
            lines.append((proc / "cmdline").read_bytes())
        except OSError:
            continue  # not a process, or one that just exited
    return lines
