"""The command server and its clients trust only each other: a client sends nothing to a
listener that is not the instance's server and never signals a pid it is told; a served
command runs with its client's umask, nice level and limits; a client that says nothing
holds no other client back. Real clients (`python -m partition_assets`) against the probe
server (partition_assets_tests/support/probe_server.py: the library's `serve`, without
Dagster's start-up) or a listener of this test's process."""

import json
import os
import resource
import signal
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from partition_assets.processes.command_socket import STANDARD_FDS, replies, send_request, socket_address
from partition_assets_tests.support import REPO
from partition_assets_tests.support.cli_runs import CLI
from partition_assets_tests.support.command_servers import command_server
from partition_assets_tests.support.polling import wait_for

NOT_TAKEN = "the command server did not take this command"
SECRET = "AKIA-not-for-impostors"


class Impostor:
    """A listener at `address` in this test's process, not the instance's server: as the
    audit's impostor, it answers a connection at once naming `named_pid` as the command's
    process, and keeps what the client sends (bytes and descriptors) until the client
    closes or the block ends."""

    def __init__(self, address: str, named_pid: int):
        self.address = address
        self.named_pid = named_pid
        self.received = b""
        self.fds: list[int] = []
        self.ended = False
        self.connection: socket.socket | None = None

    def __enter__(self) -> "Impostor":
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(self.address)
        self.listener.listen()
        self.serving = threading.Thread(target=self._serve, daemon=True)
        self.serving.start()
        return self

    def _serve(self) -> None:
        self.connection, _ = self.listener.accept()
        try:
            self.connection.sendall(json.dumps({"pid": self.named_pid}).encode() + b"\n")
            while chunk := socket.recv_fds(self.connection, 1 << 16, len(STANDARD_FDS)):
                data, fds, _, _ = chunk
                if not data and not fds:
                    break
                self.received += data
                self.fds += fds
        except OSError:
            pass  # the client closed first
        self.ended = True

    def __exit__(self, *exc) -> None:
        if self.connection is not None:
            self.connection.shutdown(socket.SHUT_RDWR)  # a client still waiting for an answer gets none
        self.listener.close()
        self.serving.join(5)
        if self.connection is not None:
            self.connection.close()
        for fd in self.fds:
            os.close(fd)
        if os.path.exists(self.address):
            os.unlink(self.address)


def test_a_command_sends_nothing_to_a_listener_that_is_not_the_instance_server(tmp_path):
    """The audit: a listener bound the instance's socket before any server; `backfill approve
    ... --by ana` sent it its environment and streams, and forwarded a SIGTERM to the pid it
    named. Here the listener is of this user, but not the process the server recorded."""
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "AWS_SECRET_ACCESS_KEY": SECRET}
    victim = subprocess.Popen(["sleep", "600"])
    client = None
    try:
        with Impostor(socket_address(str(tmp_path)), named_pid=victim.pid) as impostor:
            client = subprocess.Popen(
                [*CLI, "backfill", "approve", "b1", "--by", "ana"],
                cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            wait_for(lambda: impostor.ended or impostor.received, 60)
            client.send_signal(signal.SIGTERM)  # Ctrl-C's cousin: a client that trusted the answer forwards it
            wait_for(lambda: victim.poll() is not None or client.poll() is not None, 60)
            received, fds = impostor.received, list(impostor.fds)
        _, stderr = client.communicate(timeout=60)
        assert (received, fds) == (b"", []), "the client sent its request (environment, streams) to the impostor"
        assert victim.poll() is None, "the client signalled the pid the impostor named"
        assert f"{NOT_TAKEN} (its socket {socket_address(str(tmp_path))} is held by process {os.getpid()}" in stderr
        assert "not by the instance's server (none recorded its pid)" in stderr
    finally:
        for process in (victim, client):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()


@pytest.mark.skipif(os.getuid() != 0, reason="makes a listener of another user (nobody)")
def test_a_command_sends_nothing_to_a_listener_of_another_user(tmp_path):
    """A socket of another user cannot be bound in this user's socket folder; one put there
    (a link made by root, say) is still refused by its peer's user id."""
    scratch = tmp_path / "scratch"
    scratch.mkdir(mode=0o777)
    scratch.chmod(0o777)
    code = (
        "import os, socket; os.setgid(65534); os.setuid(65534); s = socket.socket(socket.AF_UNIX);"
        "s.bind('impostor.sock'); s.listen(); print('listening', flush=True); input()"
    )  # becomes nobody before it listens: its socket's credentials are nobody's
    impostor = subprocess.Popen(
        [sys.executable, "-c", code], cwd=scratch, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )  # bound in its working folder: tmp_path is longer than a socket path may be
    address = socket_address(str(tmp_path))
    try:
        assert impostor.stdout.readline() == "listening\n"
        os.symlink(scratch / "impostor.sock", address)
        client = subprocess.Popen(
            [*CLI, "backfill", "approve", "b1", "--by", "ana"],
            cwd=REPO, env={**os.environ, "DAGSTER_HOME": str(tmp_path)}, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        said = client.stderr.readline()  # then it runs the command itself: not this test's concern
        client.kill()
        client.communicate()
    finally:
        impostor.kill()
        impostor.wait()
        Path(address).unlink(missing_ok=True)
    assert f"{NOT_TAKEN} (its socket {address} is held by user 65534, not by this user (0)" in said


@pytest.fixture(scope="module")
def probe_server(tmp_path_factory):
    home = tmp_path_factory.mktemp("probe-home")
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    with command_server(env, probe=True) as server:
        yield env, server


def served_probe(env: dict[str, str], written: Path, **settings) -> subprocess.CompletedProcess:
    """`partition-assets backfill probe WRITTEN`, which only the probe server runs."""
    return subprocess.run(
        [*CLI, "backfill", "probe", str(written)], cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
        **settings,
    )  # fmt: skip


def lower_priority_and_open_files() -> None:
    os.nice(4)
    resource.setrlimit(resource.RLIMIT_NOFILE, (512, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def test_a_served_command_runs_with_its_clients_umask_nice_level_and_limits(probe_server, tmp_path):
    """The audit: a file written by a served command got the server's 0644 where the shell's
    umask said 0600, and the command ran without the client's nice level or limits."""
    env, server = probe_server
    forks = len(server.forks())
    written = tmp_path / "written"
    served = served_probe(env, written, umask=0o077, preexec_fn=lower_priority_and_open_files)
    assert served.returncode == 0, served.stderr
    assert len(server.forks()) == forks + 1, server.lines  # served, not run in the client's process
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    niced = min(os.getpriority(os.PRIO_PROCESS, 0) + 4, 19)  # the server's is this process's
    assert served.stdout.splitlines() == [f"nice {niced}", "nofile 512"]


def test_a_silent_client_holds_no_other_client_back(probe_server, tmp_path):
    """Reasoned from the code: a client that connects and says nothing held the server's
    only loop for 10 s, every other command waiting behind it."""
    env, server = probe_server
    with socket.socket(socket.AF_UNIX) as silent:
        silent.connect(socket_address(env["DAGSTER_HOME"]))
        served = served_probe(env, tmp_path / "written")
        assert served.returncode == 0, served.stderr
        silent.setblocking(False)
        with pytest.raises(BlockingIOError):  # still connected: not dropped to serve the other one
            silent.recv(1)


def test_a_request_without_the_clients_umask_is_refused_and_runs_nothing(probe_server, tmp_path):
    """A foreign umask never applies: a request that does not carry its client's (an older
    client, say) is refused with the reason, and the server's fork runs nothing."""
    env, server = probe_server
    written = tmp_path / "written"
    request = {
        "argv": ["backfill", "probe", str(written)],
        "argv0": CLI[-1],
        "cwd": str(REPO),
        "env": env,
        "sys_path": sys.path,
        "executable": sys.executable,
    }
    with socket.socket(socket.AF_UNIX) as client:
        client.connect(socket_address(env["DAGSTER_HOME"]))
        send_request(client, request)
        (reply,) = replies(client)
    assert "the server could not read the request: a request is a JSON object of" in reply["refused"]
    assert "'umask'" in reply["refused"]
    assert not written.exists()
