"""The fork server backfill workers are forked from (multiprocessing's forkserver protocol,
backfill/running/local_workers.py, which hands it the function its workers run).

`backfill run` makes a fork of its own process the fork server (`fork_here`), once it has
imported Dagster and loaded the code location: the server starts with everything the
workers need and imports nothing. multiprocessing's own fork server is a fresh interpreter
that imports Dagster, this library and the code location again: ~2.3 of the 6.6 CPU-s an
8-node `backfill run` took (process accounting of its process tree), competing on a small
machine with the command's own imports. The webserver's standby coordinator does the same
(`backfill standby`). A process running other threads (a Launchpad job's run process)
starts multiprocessing's server instead (`start`): a fork of it would hold locks its other
threads held.

Not guaranteed: the forked server keeps what the command held when it forked (its modules,
open files, and what the code location did on import), as the workers do; only the "alive"
pipe's write end, which would keep the server running after the command died, is closed.
Relies on multiprocessing's private `forkserver._forkserver` (its `_forkserver_address`,
`_forkserver_alive_fd`, `_forkserver_pid`) and `forkserver.main`, pinned by
partition_assets_tests/integration/test_fork_server.py.
"""

import multiprocessing
import multiprocessing.forkserver
import os
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from multiprocessing import connection, resource_tracker
from typing import Any


def preload_of(runner: Callable[..., Any], targets: Sequence[str]) -> list[str]:
    """What the fork server imports: the module of `runner` (what each worker it forks runs
    first, given by its caller: this module names none above it), and the code locations
    given as modules."""
    return [runner.__module__, *(target for target in targets if not target.endswith(".py"))]


def start(runner: Callable[..., Any], targets: Sequence[str]) -> None:
    """Starts this process's fork server now (if it is not running), importing `runner`'s
    module and the code locations `targets` in the background."""
    multiprocessing.set_forkserver_preload(preload_of(runner, targets))
    multiprocessing.forkserver.ensure_running()


def running_pid() -> int:
    """The pid of this process's fork server, started now (with the preload last set) if
    it is not running. Reads multiprocessing's private `forkserver._forkserver`, as
    processes/quick_exit.py does."""
    multiprocessing.forkserver.ensure_running()
    return multiprocessing.forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]


def fork_here(runner: Callable[..., Any], targets: Sequence[str]) -> None:
    """Makes a fork of this process its fork server, now, unless one is running: the
    workers it forks start with what this process imported (load the code location
    `targets` first). With other threads running here, starts multiprocessing's server
    instead (`start`), importing `runner`'s module."""
    server: Any = multiprocessing.forkserver._forkserver  # private: typeshed does not declare it
    if server._forkserver_pid is not None:
        return
    if threading.active_count() > 1:
        start(runner, targets)
        return
    resource_tracker.ensure_running()  # as multiprocessing's server does: its workers share the tracker
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # else each worker would write this process's buffered output again when it ends
    with socket.socket(socket.AF_UNIX) as listener:
        address = connection.arbitrary_address("AF_UNIX")  # type: ignore[attr-defined]
        listener.bind(address)
        if not address.startswith("\0"):  # a file, not Linux's abstract namespace
            os.chmod(address, 0o600)
        listener.listen()
        # The server ends when the last holder of alive_w (this process, the workers) is gone.
        alive_r, alive_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(alive_w)
            try:
                multiprocessing.forkserver.main(listener.fileno(), alive_r, [])
            finally:
                os._exit(0)  # never back into the command's code, nor its exit handlers
        os.close(alive_r)
    server._forkserver_address = address
    server._forkserver_alive_fd = alive_w
    server._forkserver_pid = pid
