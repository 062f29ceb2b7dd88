"""The command server's protocol (processes/command_socket.py) and what its client and server
decide without a process: which commands go to a server, which requests it refuses, when
its code is stale. The server running commands: partition_assets_tests/e2e/test_backfill_serve.py."""

import os
import socket
import threading

import pytest

from partition_assets.errors import CommandSocketFolderError
from partition_assets.processes import command_server
from partition_assets.processes.command_client import run_on_server
from partition_assets.processes.command_socket import (
    STANDARD_FDS,
    ProtocolError,
    pid_file,
    receive_request,
    send_request,
    socket_address,
    socket_folder,
)


def same_file(fd: int, other: int) -> bool:
    first, second = os.fstat(fd), os.fstat(other)
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def test_a_request_arrives_whole_with_the_senders_standard_streams():
    sender, receiver = socket.socketpair(socket.AF_UNIX)
    with sender, receiver:
        request = a_request(env={"LARGE": "x" * 200_000})
        send_request(sender, request)  # larger than one socket buffer: the rest follows the first chunk
        received, fds = receive_request(receiver)
    try:
        assert received == request
        assert all(same_file(fd, standard) for fd, standard in zip(fds, STANDARD_FDS, strict=True))
    finally:
        for fd in fds:
            os.close(fd)


def a_request(**fields) -> dict:
    request = {
        "argv": ["backfill", "run"],
        "argv0": "partition-assets",
        "cwd": "/",
        "env": {"DAGSTER_HOME": "/home"},
        "sys_path": ["/repo"],
        "executable": "/venv/bin/python",
        "umask": 0o022,
        "nice": 0,
        "gid": 0,
        "groups": [0],
        "rlimits": {"RLIMIT_NOFILE": [1024, 4096]},
    }
    return {**request, **fields}


@pytest.mark.parametrize(
    "request_",
    [
        {"argv": ["backfill", "list"]},  # fields missing
        a_request(argv="backfill list"),
        a_request(env={"DAGSTER_HOME": 1}),
        {**a_request(), "extra": True},
        # A foreign umask never applies: a request without the client's, or with no mode, is refused.
        {field: value for field, value in a_request().items() if field != "umask"},
        a_request(umask=0o1000),
        a_request(umask=True),
        a_request(rlimits={"RLIMIT_NOPE": [1, 1]}),
        a_request(rlimits={"RLIMIT_NOFILE": [1024]}),
        a_request(groups=["wheel"]),
    ],
)
def test_a_malformed_request_is_refused_and_its_streams_closed(request_):
    sender, receiver = socket.socketpair(socket.AF_UNIX)
    with sender, receiver:
        send_request(sender, request_)
        before = set(os.listdir("/proc/self/fd"))
        with pytest.raises(ProtocolError, match="a request"):
            receive_request(receiver)
        assert set(os.listdir("/proc/self/fd")) <= before  # the three received descriptors were closed


def test_a_message_without_the_streams_is_refused():
    sender, receiver = socket.socketpair(socket.AF_UNIX)
    with sender, receiver:
        sender.sendall(b"\x00\x00\x00\x02{}")
        with pytest.raises(ProtocolError, match="descriptors"):
            receive_request(receiver)


@pytest.mark.parametrize(
    "argv",
    [["lint", "x.py"], ["backfill", "serve"], ["backfill", "standby"], ["backfill", "adopt", "b1"], []],
)
def test_commands_other_than_backfill_ones_never_go_to_a_server(argv, tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with listening(socket_address(str(tmp_path))) as connected:
        assert run_on_server(argv) is None
    assert connected == []


def test_without_a_listening_server_the_command_runs_in_its_own_process(tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    assert run_on_server(["backfill", "list"]) is None
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    assert run_on_server(["backfill", "list"]) is None  # nobody listens


def test_every_instance_folder_has_its_own_address_however_long(tmp_path):
    deep = tmp_path.joinpath(*["a-rather-long-folder-name"] * 12)
    assert socket_address(str(deep)) != socket_address(str(tmp_path))
    assert socket_address(str(tmp_path / "x" / "..")) == socket_address(str(tmp_path))
    with listening(socket_address(str(deep))):
        pass  # bound: the instance's path is hashed, its length does not count


def test_the_socket_folder_is_private_to_this_user_or_refused(tmp_path, monkeypatch):
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    folder = socket_folder()
    assert folder == runtime / "partition-assets"
    assert (folder.stat().st_mode & 0o777, folder.stat().st_uid) == (0o700, os.getuid())
    folder.chmod(0o755)  # another user could enter it
    with pytest.raises(CommandSocketFolderError, match="has mode 0755, which lets other users in.*Nothing was"):
        socket_folder()
    folder.rmdir()
    folder.symlink_to(tmp_path)  # a link could lead anywhere
    with pytest.raises(CommandSocketFolderError, match="is not a folder"):
        socket_folder()
    runtime.chmod(0o777)  # the runtime folder itself: the XDG spec's 0700
    with pytest.raises(CommandSocketFolderError, match="XDG_RUNTIME_DIR .* has mode 0777"):
        socket_folder()


def test_a_socket_path_longer_than_a_socket_may_have_is_refused(tmp_path, monkeypatch):
    runtime = tmp_path.joinpath("r" * 100)
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    with pytest.raises(CommandSocketFolderError, match=r"longer than a Unix socket path may be \(107 bytes\)"):
        socket_address(str(tmp_path))


def test_a_process_setting_the_server_cannot_take_refuses_the_command():
    def not_permitted(wanted):
        raise PermissionError(1, "Operation not permitted")

    command_server._take("nice level", 5, 5, not_permitted)  # the server's already: nothing to take
    with pytest.raises(command_server._Refused, match=r"the command's nice level -5 is not the server's 0, .*"):
        command_server._take("nice level", -5, 0, not_permitted)


def test_a_request_from_another_interpreter_or_import_path_is_refused():
    startup = {"executable": "/venv/bin/python", "sys_path": ["/repo", "/venv/site-packages"]}
    assert command_server._mismatch(dict(startup, argv=["backfill", "list"]), startup) is None
    assert "sys_path" in command_server._mismatch(dict(startup, sys_path=["/other"]), startup)
    assert "executable" in command_server._mismatch(dict(startup, executable="/usr/bin/python3"), startup)


def test_a_module_file_changed_since_the_server_started_is_named(tmp_path):
    module = tmp_path / "location.py"
    module.write_text("x = 1\n")
    mtimes = {str(module): os.stat(module).st_mtime_ns}
    assert command_server._changed_module(mtimes) is None
    os.utime(module, ns=(mtimes[str(module)] + 10**9, mtimes[str(module)] + 10**9))
    assert command_server._changed_module(mtimes) == str(module)
    module.unlink()
    assert command_server._changed_module(mtimes) == str(module)


class listening:
    """A Unix socket listening at `address` for the block's length, that closes each connection
    at once (a client that connected returns rather than waits); yields the list of the
    connections it accepted."""

    def __init__(self, address):
        self.address = address
        self.connected: list[bool] = []

    def __enter__(self) -> list[bool]:
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(self.address)
        self.listener.listen()
        self.accepting = threading.Thread(target=self._accept, daemon=True)
        self.accepting.start()
        return self.connected

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # closed
                return
            self.connected.append(True)
            connection.close()

    def __exit__(self, *exc) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.accepting.join(5)
        os.unlink(self.address)


def test_a_server_that_drops_the_command_is_named_and_the_command_runs_here(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    recorded = pid_file(str(tmp_path))
    recorded.write_text(str(os.getpid()))  # this process listens: it is the server the client trusts
    try:
        with listening(socket_address(str(tmp_path))) as connected:  # closes each connection unanswered
            assert run_on_server(["backfill", "list"]) is None
    finally:
        recorded.unlink()
    assert connected == [True]
    assert "the command server did not take this command (" in capsys.readouterr().err  # closed, or broken pipe


def test_a_listener_that_is_not_the_recorded_server_is_sent_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    recorded = pid_file(str(tmp_path))
    recorded.write_text("1")  # the server is another process than this listener
    try:
        with listening(socket_address(str(tmp_path))):
            assert run_on_server(["backfill", "list"]) is None
    finally:
        recorded.unlink()
    assert f"is held by process {os.getpid()}, not by the instance's server 1; nothing was sent" in (
        capsys.readouterr().err
    )


def test_a_request_sent_whole_at_once_writes_nothing_after_it(monkeypatch):
    """A server may answer and close as soon as it read the request: the sender must not
    write again (an empty write to a closed socket is a broken pipe)."""
    writes = []
    monkeypatch.setattr(socket.socket, "sendall", lambda self, data: writes.append(data))
    sender, receiver = socket.socketpair(socket.AF_UNIX)
    with sender, receiver:
        send_request(sender, a_request())
        _, fds = receive_request(receiver)
    for fd in fds:
        os.close(fd)
    assert writes == []
