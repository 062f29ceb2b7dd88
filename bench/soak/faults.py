"""The soak's fault schedule and the faults themselves.

`schedule(seed, count, scale)` draws, from `random.Random(seed)` alone, `count` faults: each a
kind of `KINDS` and the seconds since the previous fault (`INTERVAL` scaled by `scale`: 1 for
the long soak's 20-90 s). The same seed gives the same schedule on every machine.

`inject(kind, target)` does it to the running backfill's processes (`Target` finds them from
the instance: the coordinator's pid in its announcement, its fork server and workers in
/proc, a node run's pid in its Dagster events) and returns what it hit, or None when that
kind had nothing to hit at that moment (no node run in flight, say): the soak records it as
skipped, never as a fault that held.

Not guaranteed: that a fault lands in a given phase of the backfill (mid-node, mid-gate, mid-
publish): the schedule is by time, and where the backfill is then depends on the machine.
"""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

KINDS = (
    "coordinator",  # SIGKILL of the coordinator process alone
    "node_run",  # SIGKILL of the process running one node run
    "fork_server",  # SIGKILL of the workers' fork server
    "spark_server",  # SIGKILL of the Spark Connect server's process group
    "postgres",  # `pg_ctl stop -m immediate`, then start again
    "command_server",  # SIGKILL of `backfill serve`
    "process_group",  # SIGKILL of the coordinator's whole process group
)
INTERVAL = (20.0, 90.0)


@dataclass(frozen=True)
class Fault:
    kind: str
    after: float  # seconds after the previous fault (the first: after the backfill started)

    def describe(self) -> str:
        return f"+{self.after:.1f}s {self.kind}"


def schedule(seed: int, count: int, scale: float = 1.0, kinds: tuple[str, ...] = KINDS) -> list[Fault]:
    """`count` faults drawn from `seed` (see the module docstring); every kind once before any
    twice, in an order the seed draws, so that a short schedule still varies its kinds."""
    rng = random.Random(seed)
    faults: list[Fault] = []
    while len(faults) < count:
        for kind in rng.sample(kinds, len(kinds)):
            if len(faults) < count:
                faults.append(Fault(kind, round(rng.uniform(*INTERVAL) * scale, 1)))
    return faults


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def children(pid: int) -> list[int]:
    """The live processes whose parent is `pid`."""
    found = []
    for path in Path("/proc").glob("[0-9]*/stat"):
        fields = _stat(int(path.parent.name))
        if fields is not None and fields[0] != "Z" and int(fields[1]) == pid:
            found.append(int(path.parent.name))
    return sorted(found)


@dataclass
class Target:
    """How to find the backfill's processes: its instance (`home`, opened with this process's
    environment naming its database), its id, the Spark server and the Postgres server and
    the command server's controls."""

    home: Path
    backfill_id: str
    kill_spark: Callable[[], int | None]
    restart_postgres: Callable[[], None]
    kill_command_server: Callable[[], int | None]

    def coordinator_pid(self) -> int | None:
        """The pid the live coordinator announces (None: none announced, or not on this host)."""
        from partition_assets.backfill.state.presence import live_coordinator

        with dg.DagsterInstance.from_config(str(self.home)) as instance:
            presence = live_coordinator(instance, self.backfill_id)
        return None if presence is None else presence.process.pid

    def fork_server_pid(self) -> int | None:
        """The coordinator's child that forks the workers (the one with children)."""
        coordinator = self.coordinator_pid()
        if coordinator is None:
            return None
        servers = [child for child in children(coordinator) if children(child)]
        return servers[0] if servers else None

    def node_run_pid(self, rng: random.Random) -> int | None:
        """The pid of a node run in flight (its newest Dagster event's), one drawn by `rng`."""
        from partition_assets.run_tags import BACKFILL_ID_TAG

        with dg.DagsterInstance.from_config(str(self.home)) as instance:
            runs = instance.get_runs(
                dg.RunsFilter(tags={BACKFILL_ID_TAG: self.backfill_id}, statuses=[dg.DagsterRunStatus.STARTED])
            )
            pids = []
            for run in runs:
                events = [e.dagster_event for e in instance.all_logs(run.run_id) if e.dagster_event is not None]
                if events and events[-1].pid:
                    pids.append(events[-1].pid)
        live = [pid for pid in pids if _stat(pid) is not None]
        return rng.choice(sorted(live)) if live else None


def inject(kind: str, target: Target, rng: random.Random) -> str | None:
    """Does fault `kind` now; what it hit (a sentence), or None when it found nothing to hit."""
    if kind == "postgres":
        target.restart_postgres()
        return "Postgres stopped with -m immediate and started again"
    if kind == "spark_server":
        pid = target.kill_spark()
        return None if pid is None else f"Spark Connect server {pid} killed (SIGKILL to its group)"
    if kind == "command_server":
        pid = target.kill_command_server()
        return None if pid is None else f"command server {pid} killed (SIGKILL)"
    pid = {
        "coordinator": target.coordinator_pid,
        "process_group": target.coordinator_pid,
        "fork_server": target.fork_server_pid,
        "node_run": lambda: target.node_run_pid(rng),
    }[kind]()
    if pid is None:
        return None
    try:
        if kind == "process_group":
            os.killpg(os.getpgid(pid), signal.SIGKILL)
            return f"process group of coordinator {pid} killed (SIGKILL)"
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return None
    return f"{kind.replace('_', ' ')} {pid} killed (SIGKILL)"
