"""The processes a test started, read from /proc (Linux): a process's descendants in its session,
which of them still run, and whether anything of a session is left; for tests that check
that nothing outlives its coordinator or that nothing is left to launch a run.

Not guaranteed: anything outside Linux; a process that left its session (setsid) is not
followed, as a detached Spark Connect server is meant to outlive the run that started it.
"""

import contextlib
import os
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state, ppid, pgrp, session,
    ..., start time at 19), or None once the process is gone; a zombie counts as gone (it
    runs nothing, and the init process of a container may never reap it)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None if fields[0] == "Z" else fields


def _live() -> dict[int, list[str]]:
    stats = {int(path.parent.name): _stat(int(path.parent.name)) for path in Path("/proc").glob("[0-9]*/stat")}
    return {pid: fields for pid, fields in stats.items() if fields is not None}


def session_descendants(pid: int) -> dict[int, str]:
    """The live processes below `pid` in the process tree that stay in its session, by pid:
    their start times (a reused pid is another process)."""
    session = str(os.getsid(pid))
    in_session = {child: fields for child, fields in _live().items() if fields[3] == session}
    below, added = set(), {pid}
    while added:
        added = {child for child, fields in in_session.items() if int(fields[1]) in added} - below
        below |= added
    return {child: in_session[child][19] for child in below}


def session_members(session: int) -> set[int]:
    """The live processes of `session` (a process started with start_new_session=True: its pid),
    its leader's children included once the leader is gone."""
    return {pid for pid, fields in _live().items() if fields[3] == str(session)}


def alive(processes: dict[int, str]) -> dict[int, str]:
    """Those of `processes` (pid: start time) still running, by pid: what they are."""
    running = {}
    for pid, start in processes.items():
        fields = _stat(pid)
        if fields is not None and fields[19] == start:
            with contextlib.suppress(FileNotFoundError):  # gone meanwhile
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                running[pid] = f"child of {fields[1]}: {command[:100]}"
    return running


def started_at(pid: int) -> dict[int, str]:
    """`pid` with its start time, for `alive` (empty when it is gone already)."""
    fields = _stat(pid)
    return {} if fields is None else {pid: fields[19]}
