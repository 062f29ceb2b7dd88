"""A `partition-assets backfill ...` command handed to the instance's command server
(`partition-assets backfill serve`, processes/command_server.py), when one is listening.

Contract:
- `run_on_server(argv)` returns None, having run nothing, unless `argv` is a `backfill`
  command other than `serve`, `standby` and `adopt`, DAGSTER_HOME is set and a server
  listens on its socket and accepts the command; then the command runs in a fork of the
  server, on this process's standard streams, in its working directory and environment,
  and `run_on_server` returns its exit code once it ended. A server that listens but does
  not take the command (refused, dropped, or unreachable once connected) is named on
  stderr, and None returned.
- SIGINT, SIGTERM and SIGHUP that reach this process are sent on to the command's
  process, as if they had reached it: Ctrl-C interrupts the backfill as it would in
  this process.

Not guaranteed: a command whose process ended without a reply (killed with SIGKILL) exits
with 1 and a line saying so. Imports only the standard library: it is loaded before
Dagster, which it exists to spare the command from importing.
"""

import os
import signal
import socket
import sys
from types import FrameType

from partition_assets.processes.command_socket import replies, send_request, socket_address

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
    connection = socket.socket(socket.AF_UNIX)
    try:
        connection.connect(socket_address(home))
    except OSError:  # no server: run it here
        connection.close()
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
            },
        )
    except OSError as error:  # a closed standard stream, say
        connection.close()
        _runs_here(f"it could not be sent: {error}")
        return None
    with connection:
        return _await_exit(connection)


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
                _forward_signals_to(pid)
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


def _forward_signals_to(pid: int) -> None:
    def forward(signum: int, frame: FrameType | None) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass  # it just ended: its exit code is on the way

    for signum in _FORWARDED_SIGNALS:
        signal.signal(signum, forward)
