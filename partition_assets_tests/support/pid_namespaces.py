"""A backfill coordinator in a pid namespace of its own on this host, as in a container with
host networking (a Kubernetes pod with `hostNetwork`): same host name, same kernel, its
own pids and its own /proc. It announces itself through the library (`coordinating`)
exactly as a coordinator does, says so, and holds the backfill until told to let go.

Its pid is pinned (the namespace's `ns_last_pid`) to one that names no process in the
caller's namespace, as a container's small pids do on a host: a check that takes host and
pid alone for the coordinator then finds nothing here and calls it dead.

The processes are forks of the racing fork server (racing.py: Dagster and this library
imported once), not fresh interpreters: the first calls unshare(2) for new pid and mount
namespaces (and a user namespace, mapping the caller's user to root there, when the caller
is not root), then forks the namespace's first process (pid 1), which mounts its own /proc
and forks the coordinator.

Not guaranteed: Linux only; where unprivileged user namespaces are disabled (or a seccomp
profile forbids unshare), a caller that is not root cannot start one (`usable` says so).
"""

import ctypes
import os
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path

import dagster as dg

from partition_assets.backfill.state.presence import coordinating
from partition_assets_tests.support.racing import racing_context, racing_process

# <linux/sched.h>, <linux/mount.h>
_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
_MS_REC, _MS_PRIVATE = 0x4000, 1 << 18
_LIBC = ctypes.CDLL(None, use_errno=True)


def pid_free_here() -> int:
    """A pid no process of this namespace has, and that the kernel will not hand out here
    before it has handed out every other one (just below the last it handed out)."""
    last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    return next(pid for pid in range(last - 1, 300, -1) if not Path(f"/proc/{pid}").exists())


class NamespacedCoordinator:
    """A coordinator of `backfill_id` with pid `pid` in a new pid namespace, on the instance
    of DAGSTER_HOME, for the `with` block: `pid_or_error()` waits until it announced itself
    (its pid inside, or what it failed with); it lets go and ends when the block does."""

    def __init__(self, backfill_id: str, pid: int) -> None:
        context = racing_context(__name__)
        self._heard, said = context.Pipe(duplex=False)
        self._let_go = context.Event()
        self._process = racing_process(context, _hold, backfill_id, pid, said, self._let_go)

    def __enter__(self) -> "NamespacedCoordinator":
        self._process.start()
        return self

    def pid_or_error(self, timeout: float = 60) -> int | str:
        """Its pid once it announced itself, or the error that stopped it."""
        if not self._heard.poll(timeout):
            return f"it said nothing within {timeout} s"
        return self._heard.recv()

    def __exit__(self, *exc: object) -> None:
        self._let_go.set()
        self._process.join(timeout=60)
        if self._process.exitcode is None:
            self._process.kill()
            self._process.join()
        assert self._process.exitcode == 0, f"the namespaced coordinator exited with {self._process.exitcode}"


def usable() -> str | None:
    """None when this process can start a pid namespace, else why not (a fork that tries)."""
    context = racing_context(__name__)
    heard, said = context.Pipe(duplex=False)
    probe = racing_process(context, _probe, said)
    probe.start()
    probe.join(timeout=60)
    return heard.recv() if heard.poll(0) else f"the probe process exited with {probe.exitcode}"


def _probe(said: Connection) -> None:
    try:
        _unshare()
    except OSError as error:
        said.send(f"cannot start a pid namespace here: {error}")
        return
    said.send(None)


def _unshare() -> None:
    """This process's next children start in new pid and mount namespaces (and a user
    namespace where this process is root, when it is not root here); its mounts are made
    private, so that the /proc they mount stays theirs."""
    uid, gid = os.geteuid(), os.getegid()
    rootless = uid != 0
    if _LIBC.unshare(_CLONE_NEWPID | _CLONE_NEWNS | (_CLONE_NEWUSER if rootless else 0)) != 0:
        raise OSError(ctypes.get_errno(), f"unshare: {os.strerror(ctypes.get_errno())}")
    if rootless:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
        Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)


def _mount(source: str | None, target: str, kind: str | None, flags: int) -> None:
    encoded = [value.encode() if value is not None else None for value in (source, target, kind)]
    if _LIBC.mount(*encoded, ctypes.c_ulong(flags), None) != 0:
        raise OSError(ctypes.get_errno(), f"mount {target}: {os.strerror(ctypes.get_errno())}")


def _hold(backfill_id: str, pid: int, said: Connection, let_go: Event) -> None:
    """In a fork of the racing server: new namespaces, their first process, and in it the coordinator."""
    try:
        _unshare()
    except OSError:
        said.send(traceback.format_exc())
        raise
    code = _forked(said, lambda: _first_process(backfill_id, pid, said, let_go))
    if code != 0:
        raise SystemExit(code)


def _first_process(backfill_id: str, pid: int, said: Connection, let_go: Event) -> int:
    """Pid 1 of the namespace: mounts its /proc, then forks the coordinator as `pid`."""
    _mount("proc", "/proc", "proc", 0)
    Path("/proc/sys/kernel/ns_last_pid").write_text(str(pid - 1))
    return _forked(said, lambda: _coordinate(backfill_id, said, let_go))


def _coordinate(backfill_id: str, said: Connection, let_go: Event) -> int:
    with dg.DagsterInstance.get() as instance, coordinating(instance, backfill_id, "run"):
        said.send(os.getpid())
        let_go.wait()
    return 0


def _forked(said: Connection, target: Callable[[], int]) -> int:
    """The exit code of a child of this process that runs `target` and exits with what it
    returns (1, its traceback sent on `said`, when it raises)."""
    child = os.fork()
    if child == 0:
        try:
            code = target()
        except BaseException:
            said.send(traceback.format_exc())
            code = 1
        os._exit(code)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)
