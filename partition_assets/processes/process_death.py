"""Backfill workers die with their coordinator, however it ends: SIGKILL included.

A coordinator (`partition-assets backfill run|resume|retry|adopt|standby`, or the
Launchpad job's run process) forks its workers from a fork server (processes/fork_server.py,
backfill/running/local_workers.py): coordinator -> fork server -> workers. A worker that outlived a killed
coordinator would finish its run in flight and write, after `backfill cancel` marked it
canceled or after a resumed backfill's gate. `die_with_coordinator`, the first thing each
worker does:

- starts a thread that waits for the coordinator to be gone (EOF on the pipe multiprocessing
  gives each child of it, whose other end the coordinator holds until it exits or has
  joined that child) and then kills the worker: at once, however the coordinator ended;
- asks the kernel to SIGKILL the worker when its parent, the fork server, exits (Linux
  `prctl(PR_SET_PDEATHSIG)`), in case that thread cannot run: a C call holding the GIL
  (a native write, say) delays it, not the kernel. A worker whose fork server is already
  gone by then kills itself at once;
- lets go of the fork server's "alive" pipe. multiprocessing hands its write end to every
  process the fork server forks, and the fork server exits when the last writer closes it:
  with the workers holding it, the fork server (and so they) outlived the coordinator;
  now it exits when its coordinator does, once it has torn down its modules (seconds on
  a busy machine: hence the thread).

The fork server itself gets no death signal: the kernel sends it when the *thread* that
started the process ends, and a coordinator may start its fork server from a short-lived
thread; the pipe ends it whichever thread did.

Not guaranteed:
- The kernel's signal is Linux only: elsewhere a worker whose coordinator died while it
  was in a long C call holding the GIL ends when that call returns.
- Processes a worker starts are not killed with it (neither the thread nor the signal
  reach them): the Spark Connect server a run starts (detached on purpose: it outlives
  runs and commands, spark/connect_server.py), or a subprocess an asset starts and leaves.
- A worker also dies when anything else ends its fork server (processes/quick_exit.py kills it once
  the workers are done).
- A process the coordinator forks without exec'ing holds copies of both pipes: the workers
  then end when that process does too.
- Relies on multiprocessing's private `forkserver._forkserver._forkserver_alive_fd` (set in
  each process the fork server forks), pinned by partition_assets_tests/e2e/test_process_death_orphaned_workers.py.
"""

import ctypes
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import sys
import threading
from collections.abc import Callable

from partition_assets.errors import EnvironmentSetupError

# <linux/prctl.h>
_PR_SET_PDEATHSIG = 1


def die_with_coordinator(fork_server_pid: int) -> None:
    """In a backfill worker forked by the fork server `fork_server_pid` for its coordinator
    (the process that created it): kills the worker when the coordinator is gone."""
    coordinator = multiprocessing.parent_process()
    assert coordinator is not None  # a process multiprocessing started
    threading.Thread(
        target=_kill_self_after, args=(coordinator.join,), name="die-with-coordinator", daemon=True
    ).start()
    die_with_parent(fork_server_pid)
    forkserver = multiprocessing.forkserver._forkserver
    os.close(forkserver._forkserver_alive_fd)  # type: ignore[attr-defined]
    # A fork server this process would start for its own children gets a pipe of its own.
    forkserver._forkserver_alive_fd = None  # type: ignore[attr-defined]


def die_with_parent(parent_pid: int) -> None:
    """On Linux, has the kernel SIGKILL this process when `parent_pid`, the process that
    forked it, exits (more exactly: the thread of it that forked this one), or kills it now
    when that parent has already exited; elsewhere does nothing."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL)) != 0:
        error = ctypes.get_errno()
        raise EnvironmentSetupError(
            f"process {os.getpid()} cannot ask to die with its parent {parent_pid}: prctl(PR_SET_PDEATHSIG) "
            f"failed with {os.strerror(error)}; a backfill worker must not outlive its coordinator (it would "
            "write after a cancel or resume): allow prctl (a seccomp profile may block it); nothing was run"
        )
    # The parent may have exited before the signal was asked for: this process was then
    # handed to another (init, a subreaper) and the signal will never come.
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGKILL)


def _kill_self_after(wait: Callable[[], object]) -> None:
    wait()
    os.kill(os.getpid(), signal.SIGKILL)
