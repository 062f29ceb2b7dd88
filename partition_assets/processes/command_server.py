"""A resident process that runs `partition-assets backfill` commands as forks of itself,
with Dagster and the engine already imported (`partition-assets backfill serve`).

A `backfill run` in a new process spends 1.6-2.4 s before its first node run, half of it
importing Dagster: on a backfill of 30 s that alone is 5-8% of its time. With a server
running for the instance (DAGSTER_HOME), the command's own process only hands over its
arguments, environment, working directory and standard streams (command_client.py), and
a fork of the server runs it: same code, same output on the same terminal, same exit
code.

Contract:
- `serve(home, run, refusal)` listens on `socket_address(home)` until SIGTERM or SIGINT.
  Per request of a process of its own user (others are dropped) it forks; the fork takes
  the command's streams, environment and working directory, starts a session of its own
  (stopping the server never stops a command it runs), says its pid, asks
  `refusal(argv)`, then runs `run(argv)` and replies its exit code.
- A request that is not one (malformed, or not sent within 10 s) is dropped; the server
  serves on.
- A request is refused (the client runs the command itself, in its own process, as
  without a server) when its interpreter or import path is not the server's, when
  `refusal` names a reason, or when a file of a module the server imported has changed
  since it started: the server then stops, since every later command would run old code.
- A fork never returns into the server's loop: it ends with `os._exit` after `run`.

Not guaranteed: what a module read from the environment when the server imported it keeps
the server's value (the command's environment is in `os.environ` for everything read
later). A code location the server did not import is imported by the fork, per command,
as a new process imports it; a module the server imported and that changes is noticed by
its file's mtime only. A
command whose client is killed with SIGKILL runs on to its end (like `--detach`), as
nothing forwards the signal; `backfill status` and `cancel` reach it.
"""

import gc
import io
import os
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from types import FrameType
from typing import Any, NoReturn

from partition_assets.errors import EnvironmentSetupError
from partition_assets.processes.command_socket import (
    ProtocolError,
    peer_uid,
    receive_request,
    send_reply,
    socket_address,
)
from partition_assets.processes.quick_exit import exit_now

# The exit code of a command ended by SIGINT (an uncaught KeyboardInterrupt), as subprocess
# reports a process killed by a signal: its client then ends by SIGINT too, as Python does.
_INTERRUPTED = -signal.SIGINT
# How long a client that connected may take to send its request.
_REQUEST_SECONDS = 10.0


class _Stop(Exception):
    """SIGTERM or SIGINT reached the server."""


class _Refused(Exception):
    """The command is not one the server runs: its client runs it."""


def serve(home: str, run: Callable[[list[str]], int], refusal: Callable[[list[str]], str | None]) -> int:
    """Runs commands for the instance at `home` until SIGTERM or SIGINT, or until an
    imported module's file changes; returns the server's exit code (0).

    Raises:
        EnvironmentSetupError: another server is listening for `home`; nothing was started.
    """
    if threading.active_count() > 1:  # a fork would hold the locks the other threads held
        raise EnvironmentSetupError(
            f"the command server must start with one thread, not {threading.active_count()}: start it as "
            "`partition-assets backfill serve`. Nothing was started."
        )
    listener = _listen(home)
    modules = _module_mtimes()
    startup = {"executable": sys.executable, "sys_path": list(sys.path)}
    previous = {stop: signal.signal(stop, _raise_stop) for stop in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the forks
    gc.freeze()  # what the forks share stays shared: the collector never writes to it
    print(f"command server {os.getpid()} serving the instance at {home}", flush=True)
    try:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError as error:  # a client that left before it was accepted, say
                print(f"command server: accept failed: {error}", flush=True)
                continue
            with connection:
                try:
                    if not _take(connection, listener, startup, modules, run, refusal, previous):
                        return 0
                except (ProtocolError, OSError) as error:  # one request's trouble never stops the server
                    print(f"command server: dropped a request: {error}", flush=True)
    except _Stop:
        return 0
    finally:
        listener.close()


def _take(
    connection: socket.socket,
    listener: socket.socket,
    startup: dict[str, Any],
    modules: dict[str, int],
    run: Callable[[list[str]], int],
    refusal: Callable[[list[str]], str | None],
    handlers: dict[signal.Signals, Any],
) -> bool:
    """Runs the request on `connection` in a fork, or refuses it; False when the server must
    stop (a module changed)."""
    uid = peer_uid(connection)
    if uid != os.getuid():
        raise ProtocolError(f"user {uid} is not this server's user")
    connection.settimeout(_REQUEST_SECONDS)  # a client that sends nothing does not hold the server
    request, fds = receive_request(connection)
    try:
        mismatch = _mismatch(request, startup)
        if mismatch is not None:
            send_reply(connection, refused=mismatch)
            return True
        changed = _changed_module(modules)
        if changed is not None:
            print(f"command server: {changed} changed since it started: stopping", flush=True)
            send_reply(connection, refused=f"{changed} changed since the server started; it stopped")
            return False
        pid = os.fork()
        if pid == 0:
            listener.close()
            _run_fork(connection, request, fds, run, refusal, handlers)
        print(f"command server: process {pid} runs {' '.join(request['argv'])}", flush=True)
        return True
    finally:
        for fd in fds:
            os.close(fd)


def _listen(home: str) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(socket_address(home))
    except OSError as error:
        listener.close()
        raise EnvironmentSetupError(
            f"a command server already serves the instance at {home} ({error.strerror}): stop it (SIGTERM) first. "
            "Nothing was started."
        ) from None
    listener.listen()
    return listener


def _raise_stop(signum: int, frame: FrameType | None) -> NoReturn:
    raise _Stop


def _mismatch(request: dict[str, Any], startup: dict[str, Any]) -> str | None:
    """Why the command's interpreter would not import what this server imported, if so."""
    for field, value in startup.items():
        if request.get(field) != value:
            return f"the command's {field} is not the server's"
    return None


def _module_mtimes() -> dict[str, int]:
    """The mtime of every imported module's file."""
    mtimes = {}
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file:
            try:
                mtimes[file] = os.stat(file).st_mtime_ns
            except OSError:
                continue
    return mtimes


def _changed_module(mtimes: dict[str, int]) -> str | None:
    for file, mtime in mtimes.items():
        try:
            if os.stat(file).st_mtime_ns != mtime:
                return file
        except OSError:
            return file
    return None


def _run_fork(
    connection: socket.socket,
    request: dict[str, Any],
    fds: list[int],
    run: Callable[[list[str]], int],
    refusal: Callable[[list[str]], str | None],
    handlers: dict[signal.Signals, Any],
) -> NoReturn:
    """In the fork: becomes the command's process, runs it and replies its exit code."""
    try:
        connection.settimeout(None)
        os.setsid()  # a signal to the server's group (Ctrl-C in its terminal) is not for this command
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # this command waits for its own children
        for fd, target in zip(fds, (0, 1, 2), strict=True):
            os.dup2(fd, target)
            os.close(fd)
        _reopen_standard_streams(request["env"])
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [request["argv0"], *request["argv"]]
        send_reply(connection, pid=os.getpid())
        code = _exit_code(lambda: _refused_or_run(request["argv"], run, refusal))
    except _Refused as refused:
        send_reply(connection, refused=str(refused))
        os._exit(0)
    except BaseException:  # never back into the server's loop
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    try:
        send_reply(connection, exit=code)
    except OSError:
        pass  # the client is gone: nobody waits for the code
    exit_now(code)


def _refused_or_run(
    argv: list[str], run: Callable[[list[str]], int], refusal: Callable[[list[str]], str | None]
) -> int:
    reason = refusal(argv)
    if reason is not None:
        raise _Refused(reason)
    return run(argv)


def _exit_code(command: Callable[[], int]) -> int:
    """`command()`'s exit code, as a process of its own would end with it."""
    try:
        return command()
    except SystemExit as exit:  # argparse's usage errors, say
        return exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    except KeyboardInterrupt:
        traceback.print_exc()
        return _INTERRUPTED


def _reopen_standard_streams(env: dict[str, str]) -> None:
    """`sys.stdin`, `sys.stdout`, `sys.stderr` on the command's descriptors, buffered as a
    new interpreter would buffer them there (line by line on a terminal, unbuffered with
    PYTHONUNBUFFERED)."""
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    sys.stdin = io.TextIOWrapper(open(0, "rb", closefd=False), encoding="utf-8")
    for fd, name in ((1, "stdout"), (2, "stderr")):
        binary = open(fd, "wb", buffering=0 if unbuffered else -1, closefd=False)
        stream = io.TextIOWrapper(
            binary,
            encoding="utf-8",
            errors="backslashreplace" if name == "stderr" else "strict",
            line_buffering=name == "stderr" or os.isatty(fd),
            write_through=unbuffered,
        )
        setattr(sys, name, stream)
