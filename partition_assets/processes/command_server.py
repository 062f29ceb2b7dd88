"""A resident process that runs `partition-assets backfill` commands as forks of itself,
with Dagster and the engine already imported (`partition-assets backfill serve`).

A `backfill run` in a new process spends 1.6-2.4 s before its first node run, half of it
importing Dagster: on a backfill of 30 s that alone is 5-8% of its time. With a server
running for the instance (DAGSTER_HOME), the command's own process only hands over its
arguments, environment, working directory, process settings and standard streams
(command_client.py), and a fork of the server runs it: same code, same output on the same
terminal, same exit code.

Contract:
- `serve(home, run, refusal)` listens on `socket_address(home)` (a folder of this user's
  only, command_socket.py) with its pid in `pid_file(home)`, locked, until SIGTERM or
  SIGINT. A socket file left by a server that died is replaced; a live server's is not.
- Per connection of a process of its own user (others are dropped unread) it forks at
  once, before reading anything: a slow or silent client holds its own fork, never the
  server. The fork starts a session of its own (stopping the server never stops a
  command it runs), reads the request (within 10 s, else it drops it), takes the
  command's process settings (umask, nice level, effective group, groups, resource
  limits), streams, environment and working directory, says its pid, asks
  `refusal(argv)`, then runs `run(argv)` and replies its exit code.
- A signal the client forwards (`{"signal": signum}`: SIGINT, SIGTERM or SIGHUP) is
  raised by the fork in itself; no pid named by a client is ever signalled.
- A request is refused (the client runs the command itself, in its own process, as
  without a server, saying why) when it is malformed, when its interpreter or import path
  is not the server's, when a process setting of the client cannot be taken (a nice level
  below the server's, other groups, a hard limit above the server's, for a server without
  the privilege), when `refusal` names a reason, or when a file of a module the server
  imported has changed since it started: the server then stops, since every later
  command would run old code.
- A fork never returns into the server's loop: it ends with `os._exit`.

Not guaranteed: what a module read from the environment when the server imported it keeps
the server's value (the command's environment is in `os.environ` for everything read
later). A code location the server did not import is imported by the fork, per command,
as a new process imports it; a module the server imported and that changes is noticed by
its file's mtime only. A forwarded signal is raised when the fork's Python code next runs
(as a signal with a Python handler is), not at once. A
command whose client is killed with SIGKILL runs on to its end (like `--detach`), as
nothing forwards the signal; `backfill status` and `cancel` reach it.
"""

import fcntl
import gc
import io
import json
import os
import resource
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from types import FrameType
from typing import Any, NoReturn

from partition_assets.errors import EnvironmentSetupError
from partition_assets.processes.command_socket import (
    STANDARD_FDS,
    ProtocolError,
    peer_credentials,
    pid_file,
    receive_request,
    send_line,
    socket_address,
)
from partition_assets.processes.quick_exit import exit_now

# The exit code of a command ended by SIGINT (an uncaught KeyboardInterrupt), as subprocess
# reports a process killed by a signal: its client then ends by SIGINT too, as Python does.
_INTERRUPTED = -signal.SIGINT
# How long a client that connected may take to send its request.
_REQUEST_SECONDS = 10.0
# The signals a client may forward to its command.
_FORWARDED_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


class _Stop(Exception):
    """SIGTERM or SIGINT reached the server."""


class _Refused(Exception):
    """The command is not one the server runs: its client runs it."""


def serve(home: str, run: Callable[[list[str]], int], refusal: Callable[[list[str]], str | None]) -> int:
    """Runs commands for the instance at `home` until SIGTERM or SIGINT, or until an
    imported module's file changes; returns the server's exit code (0).

    Raises:
        EnvironmentSetupError: another server is listening for `home`; nothing was started.
        CommandSocketFolderError: the socket's folder is not private to this user; nothing was started.
    """
    if threading.active_count() > 1:  # a fork would hold the locks the other threads held
        raise EnvironmentSetupError(
            f"the command server must start with one thread, not {threading.active_count()}: start it as "
            "`partition-assets backfill serve`. Nothing was started."
        )
    server = os.getpid()
    with _recorded_pid(home) as recorded:
        address = socket_address(home)
        listener = _listen(address)
        modules = _module_mtimes()
        startup = {"executable": sys.executable, "sys_path": list(sys.path)}
        previous = {stop: signal.signal(stop, _raise_stop) for stop in (signal.SIGTERM, signal.SIGINT)}
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the forks
        gc.freeze()  # what the forks share stays shared: the collector never writes to it
        print(f"command server {server} serving the instance at {home}", flush=True)
        try:
            while True:
                try:
                    connection, _ = listener.accept()
                except OSError as error:  # a client that left before it was accepted, say
                    print(f"command server: accept failed: {error}", flush=True)
                    continue
                with connection:
                    _, uid = peer_credentials(connection)
                    if uid != os.getuid():
                        print(f"command server: dropped a connection of user {uid}", flush=True)
                        continue
                    if os.fork() == 0:
                        listener.close()
                        recorded.close()
                        _serve_connection(connection, server, startup, modules, run, refusal, previous)
        except _Stop:
            return 0
        finally:
            listener.close()
            with suppress(FileNotFoundError):  # ours: the pid file's lock says no other server bound it
                os.unlink(address)


@contextmanager
def _recorded_pid(home: str) -> Iterator[io.FileIO]:
    """The pid file of `home`'s server, locked (a second server is refused) and holding this
    process's pid for the block's length; emptied when it ends. The lock is a POSIX record
    lock: a fork does not inherit it, so a command that outlives the server never keeps
    another from starting."""
    path = pid_file(home)
    with io.FileIO(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600), "r+") as file:
        try:
            fcntl.lockf(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise EnvironmentSetupError(
                f"a command server already serves the instance at {home} (its pid is in {path}): stop it "
                "(SIGTERM) first. Nothing was started."
            ) from None
        file.truncate(0)
        file.write(str(os.getpid()).encode())
        try:
            yield file
        finally:
            file.truncate(0)


def _listen(address: str) -> socket.socket:
    """A socket listening at `address`, in place of any file there (the caller holds the pid
    file's lock: no live server bound it)."""
    with suppress(FileNotFoundError):
        os.unlink(address)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(address)
    listener.listen()
    return listener


def _raise_stop(signum: int, frame: FrameType | None) -> NoReturn:
    raise _Stop


def _serve_connection(
    connection: socket.socket,
    server: int,
    startup: dict[str, Any],
    modules: dict[str, int],
    run: Callable[[list[str]], int],
    refusal: Callable[[list[str]], str | None],
    handlers: dict[signal.Signals, Any],
) -> NoReturn:
    """In a fork of the server: reads the request on `connection`, then runs it or refuses
    it. Never returns, nor raises, into the server's loop."""
    try:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # this command waits for its own children
        os.setsid()  # a signal to the server's group (Ctrl-C in its terminal) is not for this command
        request, fds = _read_request(connection)
        try:
            _take_request(connection, request, server, startup, modules)
            for fd, target in zip(fds, STANDARD_FDS, strict=True):
                os.dup2(fd, target)
        finally:
            for fd in fds:
                os.close(fd)
    except _Refused as refused:
        print(f"command server: process {os.getpid()} refused a request: {refused}", flush=True)
        _refuse(connection, str(refused))
    except BaseException:
        traceback.print_exc()
        os._exit(1)
    _run_command(connection, request, run, refusal)


def _read_request(connection: socket.socket) -> tuple[dict[str, Any], list[int]]:
    connection.settimeout(_REQUEST_SECONDS)  # a client that sends nothing holds this fork only
    try:
        return receive_request(connection)
    except (ProtocolError, OSError) as error:
        raise _Refused(f"the server could not read the request: {error}") from None


def _refuse(connection: socket.socket, why: str) -> NoReturn:
    try:
        send_line(connection, refused=why)
    except OSError:
        pass  # the client is gone
    os._exit(0)


def _take_request(
    connection: socket.socket,
    request: dict[str, Any],
    server: int,
    startup: dict[str, Any],
    modules: dict[str, int],
) -> None:
    """Makes this fork the command's process, but for its streams; raises _Refused when it
    cannot be."""
    mismatch = _mismatch(request, startup)
    if mismatch is not None:
        raise _Refused(mismatch)
    changed = _changed_module(modules)
    if changed is not None:
        print(f"command server: {changed} changed since it started: stopping", flush=True)
        if os.getppid() == server:  # the server forked this process: never a pid anyone named
            os.kill(server, signal.SIGTERM)
        raise _Refused(f"{changed} changed since the server started; it stopped")
    _take_process_settings(request)
    print(f"command server: process {os.getpid()} runs {' '.join(request['argv'])}", flush=True)
    connection.settimeout(None)
    _receive_signals_over(connection)


def _take_process_settings(request: dict[str, Any]) -> None:
    """Gives this process the client's umask, nice level, groups, effective group and
    resource limits; raises _Refused, naming the setting, when one cannot be taken (a
    server without the privilege to raise its priority, change its groups or raise a hard
    limit). The umask is always taken: the server's never applies to a command."""
    os.umask(request["umask"])
    _take(
        "nice level", request["nice"], os.getpriority(os.PRIO_PROCESS, 0), partial(os.setpriority, os.PRIO_PROCESS, 0)
    )
    _take("groups", sorted(set(request["groups"])), sorted(set(os.getgroups())), os.setgroups)
    _take("effective group", request["gid"], os.getegid(), os.setegid)
    for name, limits in request["rlimits"].items():
        number = getattr(resource, name)
        _take(f"{name} limits", tuple(limits), resource.getrlimit(number), partial(resource.setrlimit, number))


def _take(setting: str, wanted: Any, current: Any, change: Callable[[Any], object]) -> None:
    if wanted == current:
        return
    try:
        change(wanted)
    except (OSError, ValueError) as error:
        raise _Refused(
            f"the command's {setting} {wanted} is not the server's {current}, and the server cannot take it ({error})"
        ) from None


def _receive_signals_over(connection: socket.socket) -> None:
    """Raises in this process each signal the client sends (`{"signal": signum}`): the
    kernel tells this process with SIGIO when a line arrives."""
    pending = bytearray()

    def receive(signum: int, frame: FrameType | None) -> None:
        while True:
            try:
                chunk = connection.recv(4096, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                return  # the client is gone: nothing more comes
            if not chunk:
                break
            pending.extend(chunk)
        *lines, rest = bytes(pending).split(b"\n")
        pending[:] = rest
        for line in lines:
            try:
                forwarded = json.loads(line).get("signal")
            except (ValueError, AttributeError):
                continue
            if type(forwarded) is int and forwarded in _FORWARDED_SIGNALS:
                signal.raise_signal(forwarded)

    signal.signal(signal.SIGIO, receive)
    fcntl.fcntl(connection.fileno(), fcntl.F_SETOWN, os.getpid())
    fcntl.fcntl(connection.fileno(), fcntl.F_SETFL, fcntl.fcntl(connection.fileno(), fcntl.F_GETFL) | os.O_ASYNC)


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


def _run_command(
    connection: socket.socket,
    request: dict[str, Any],
    run: Callable[[list[str]], int],
    refusal: Callable[[list[str]], str | None],
) -> NoReturn:
    """In the fork, once it took the request's streams: runs the command and replies its exit code."""
    try:
        _reopen_standard_streams(request["env"])
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [request["argv0"], *request["argv"]]
        send_line(connection, pid=os.getpid())
        code = _exit_code(lambda: _refused_or_run(request["argv"], run, refusal))
    except _Refused as refused:
        _refuse(connection, str(refused))
    except BaseException:  # never back into the server's loop
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    try:
        send_line(connection, exit=code)
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
