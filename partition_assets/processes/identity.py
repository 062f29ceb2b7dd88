"""Which process a pid names, wherever it is read: on another host, after a reboot, from
another pid namespace (a container with host networking, a Kubernetes pod with
`hostNetwork`), or once the pid was handed to another process.

A pid means nothing alone: the same number names another process on another host, after
the host rebooted, in another pid namespace on the same kernel, or once the process
exited and the kernel reused the number. A `ProcessIdentity` pins it down: the host name,
the kernel's boot id (/proc/sys/kernel/random/boot_id, new at every boot), the process's
pid and time namespaces (the inodes of /proc/self/ns/pid and /proc/self/ns/time: a start
time reads in its time namespace) and its start time (field 22 of /proc/<pid>/stat, clock
ticks after boot: a reused pid has another).

`is_gone` says a process is gone only when it can prove it: the reader runs on the same
host, boot and namespaces, its own /proc shows that pid namespace, and the pid is free
there, a zombie, or another process (another start time). Whatever it cannot see (another
host, boot or namespace, a /proc of another namespace, a process hidden by `hidepid`) it
never calls gone: the caller judges such a process by what else it knows (a coordinator
by its heartbeat's age, backfill/state/presence.py).

Not guaranteed: outside Linux (no /proc) no process is ever proved gone.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
# The namespaces a pid and its start time are read in (time: Linux 5.6 and later).
_NAMESPACES = ("pid", "time")
# In /proc/<pid>/stat, after the command name: the state, then (field 22 of the whole line) the start time.
_STATE, _START_TIME = 0, 19


@dataclass(frozen=True)
class ProcessIdentity:
    """One process: `pid` on `host`, in the kernel boot `boot_id`, in `namespaces` (e.g.
    "pid:[4026531836] time:[4026531834]"), started `started` clock ticks after boot. The last
    three are None where the process could not read them (no /proc: not Linux)."""

    host: str
    pid: int
    boot_id: str | None = None
    namespaces: str | None = None
    started: int | None = None

    @classmethod
    def of_this_process(cls) -> ProcessIdentity:
        """The calling process's identity."""
        stat = _stat_fields("self")
        started = int(stat[_START_TIME]) if stat is not None else None
        return cls(socket.gethostname(), os.getpid(), _boot_id(), _namespaces(), started)

    @classmethod
    def of_pid(cls, pid: int) -> ProcessIdentity:
        """The identity of process `pid` of the caller's own pid namespace, such as a child it
        just started, to record beside the pid (a record checked with `is_gone` before the
        pid is trusted or signalled). Its start time is None where /proc does not show it
        (not Linux, a /proc of another namespace, or `pid` already gone): such a record
        proves nothing gone."""
        stat = _stat_fields(str(pid)) if _proc_shows_own_pid_namespace() else None
        started = int(stat[_START_TIME]) if stat is not None else None
        return cls(socket.gethostname(), pid, _boot_id(), _namespaces(), started)

    def is_gone(self) -> bool:
        """Whether this process provably no longer runs (see the module docstring): False
        whenever the caller cannot tell, never a guess."""
        if self.boot_id is None or self.namespaces is None or self.started is None:
            return False  # it did not say which process it is
        seen_from = (socket.gethostname(), _boot_id(), _namespaces())
        if (self.host, self.boot_id, self.namespaces) != seen_from or not _proc_shows_own_pid_namespace():
            return False  # its pid names nothing the caller can look up
        stat = _stat_fields(str(self.pid))
        if stat is None:
            return not _pid_exists(self.pid)
        return stat[_STATE] == "Z" or int(stat[_START_TIME]) != self.started


def _boot_id() -> str | None:
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return None


def _namespaces() -> str | None:
    links = []
    for kind in _NAMESPACES:
        try:
            links.append(os.readlink(f"/proc/self/ns/{kind}"))
        except FileNotFoundError:  # a kernel without this kind of namespace
            continue
        except OSError:
            return None
    return " ".join(links) or None


def _proc_shows_own_pid_namespace() -> bool:
    """Whether /proc is mounted for the caller's pid namespace, so that /proc/<pid> is the
    pid the caller's own namespace gives: its NSpid line (the pid in each namespace from
    /proc's down to the caller's) then holds one pid. A container that shares the host's
    /proc, or `unshare --pid` without `--mount-proc`, shows more."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return len(line.split()) == 2
    except OSError:
        pass
    return False


def _stat_fields(pid: str) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (which may hold spaces and
    parentheses), or None when there is no such process to read."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _pid_exists(pid: int) -> bool:
    """Whether the caller's pid namespace has a process `pid` (one /proc may hide: `hidepid`)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
