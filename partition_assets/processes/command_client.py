"""A `partition-assets backfill ...` command handed to the instance's command server
(`partition-assets backfill serve`, processes/command_server.py), when one is listening.

Contract:
- `run_on_server(argv)` returns None, having run nothing, unless `argv` is a `backfill`
  command other than `serve`, `standby` and `adopt`, DAGSTER_HOME is set and a server
  listens on its socket and accepts the command; then the command runs in a fork of the
  server, on this process's standard streams, in its working directory, environment,
  umask, nice level, groups and resource limits, and `run_on_server` returns its exit code
  once it ended. A server that listens but does not take the command (refused, dropped, or
  unreachable once connected) is named on stderr, and None returned.
- Nothing is sent to a listener before it proved to be the instance's server: a process of
  this user (SO_PEERCRED), whose pid is the one the server recorded in its pid file, on a
  socket in a folder only this user may enter (command_socket.py). Any other listener is
  named on stderr, None returned, and neither the environment nor a stream was sent.
- SIGINT, SIGTERM and SIGHUP that reach this process are sent on to the command over the
  socket, and the command's process raises them in itself, as if they had reached it:
  Ctrl-C interrupts the backfill as it would in this process. This process never signals
  a pid it was told.

Not guaranteed: a command whose process ended without a reply (killed with SIGKILL) exits
with 1 and a line saying so. Imports only the standard library: it is loaded before
Dagster, which it exists to spare the command from importing.
"""

import os
import resource
import signal
import socket
import sys
from types import FrameType
from typing import Any

from partition_assets.errors import CommandSocketFolderError
from partition_assets.processes.command_socket import (
    RLIMIT_NAMES,
    peer_credentials,
    recorded_server_pid,
    replies,
    send_line,
    send_request,
    socket_address,
)

# Commands the server never runs: itself, and the webserver's coordinators (their own processes by design).
_OWN_PROCESS_ACTIONS = ("serve", "standby", "adopt")
_FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_on_server(argv: list[str]) -> int | None:
    """The exit code of `argv` run by the instance's command server; None when no server
    runs it (the caller runs it)."""
    home = os.environ.get("DAGSTER_HOME")
    action = argv[1] if len(argv) > 1 else None
    if not home or argv[:1] != ["backfill"] or action in _OWN_PROCESS_ACTIONS:
        return None
    try:
        address = socket_address(home)
    except CommandSocketFolderError as error:
        _runs_here(str(error))
        return None
    connection = socket.socket(socket.AF_UNIX)
    try:
        connection.connect(address)
    except OSError:  # no server (no socket, or one left by a server that died): run it here
        connection.close()
        return None
    impostor = _not_the_server(connection, home, address)
    if impostor is not None:
        connection.close()
        _runs_here(impostor)
        return None
    try:
        send_request(
            connection,
            {
                "argv": argv,
                "argv0": sys.argv[0],
                "cwd": os.getcwd(),
                "env": dict(os.environ),
                "sys_path": sys.path,
                "executable": sys.executable,
                **_process_settings(),
            },
        )
    except OSError as error:  # a closed standard stream, say
        connection.close()
        _runs_here(f"it could not be sent: {error}")
        return None
    with connection:
        return _await_exit(connection)


def _not_the_server(connection: socket.socket, home: str, address: str) -> str | None:
    """Why the listener at the other end of `connection` is not the instance's server, if so."""
    pid, uid = peer_credentials(connection)
    if uid != os.getuid():
        return f"its socket {address} is held by user {uid}, not by this user ({os.getuid()}); nothing was sent"
    recorded = recorded_server_pid(home)
    if pid != recorded:
        server = f"server {recorded}" if recorded is not None else "server (none recorded its pid)"
        return f"its socket {address} is held by process {pid}, not by the instance's {server}; nothing was sent"
    return None


def _process_settings() -> dict[str, Any]:
    """What a fork of the server takes from this process rather than from the server."""
    umask = os.umask(0o077)  # reading the umask sets it: set back at once (no thread runs yet)
    os.umask(umask)
    return {
        "umask": umask,
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "gid": os.getegid(),
        "groups": os.getgroups(),
        "rlimits": {name: list(resource.getrlimit(getattr(resource, name))) for name in RLIMIT_NAMES},
    }


def _await_exit(connection: socket.socket) -> int | None:
    pid = None
    handlers = {signum: signal.getsignal(signum) for signum in _FORWARDED_SIGNALS}
    try:
        for reply in replies(connection):
            if "refused" in reply:
                for signum, handler in handlers.items():
                    signal.signal(signum, handler)
                _runs_here(reply["refused"])
                return None
            if "pid" in reply:
                pid = reply["pid"]
                _forward_signals_over(connection)
            if "exit" in reply:
                return _exit_code(int(reply["exit"]))
    except OSError:  # reset: the same as a close without the exit code
        pass
    if pid is None:
        _runs_here("it closed the connection without an answer")
        return None
    print(f"partition-assets: the command's process {pid} ended without an exit code (killed?)", file=sys.stderr)
    return 1


def _runs_here(why: str) -> None:
    print(
        f"partition-assets: the command server did not take this command ({why}): it runs in this process",
        file=sys.stderr,
    )


def _exit_code(code: int) -> int:
    """`code`, or, for a command ended by a signal (-signum), no return: this process ends
    by that signal too, as the command's own process would have (Python ends by SIGINT
    after an uncaught KeyboardInterrupt)."""
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def _forward_signals_over(connection: socket.socket) -> None:
    def forward(signum: int, frame: FrameType | None) -> None:
        try:
            send_line(connection, signal=signum)
        except OSError:
            pass  # the command just ended: its exit code is on the way

    for signum in _FORWARDED_SIGNALS:
        signal.signal(signum, forward)
