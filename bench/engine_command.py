"""The engine's whole `partition-assets backfill run` command, timed from process start to exit.

`run_backfill_command` starts the CLI as a fresh process on a prepared DAGSTER_HOME (a new one
from `instance_env`, or a copy of a seeded instance), waits for it to exit and reads back from
the instance what it did: its runs (those created after the command started), their statuses,
how long after the process started the first node run started and the last node run ended,
and how many of the targeted (asset, partition) pairs are materialized; the time of its
`published:` line is read from its output as it prints it. Together they split the command
(`CommandResult.split`). Shared by engine_bench.py (the bench DAG), example_bench.py and
shapes_bench.py (the example with real Spark) and generated_shapes_bench.py.

Not guaranteed: runs other processes create in the same instance while the command runs are
counted as its own (every bench gives each command its own instance); the first-run figure is
the earliest run start the instance recorded, which Dagster stamps when the run's process
reports RUN_START, not when the coordinator decided to launch it.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import yaml
from dagster_backfill import START, DaemonResult, materialized_count

from partition_assets.backfill.publishing.dagster_events import PUBLISH_RUN_TAG
from partition_assets_tests.support.instances import (
    POSTGRES_STORAGE_YAML,
    URL_ENV,
    add_to_config,
    instance_env,
    open_instance,
)

REPO = Path(__file__).resolve().parents[1]


@dataclass
class CommandResult:
    seconds: float  # process start -> exit
    first_run_after: float | None  # process start -> first node run started (instance run records)
    returncode: int
    summary: str  # the command's `backfill <id>: ...` lines: nodes (and those already done), then outcome
    runs: int  # every run it created: node runs and, when it publishes, the publish run
    run_statuses: dict[str, int]
    materialized: int  # targeted (asset, partition) pairs materialized after the command
    targeted: int
    measured_at: str
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    stderr_tail: str = ""
    args: list[str] = field(default_factory=list)
    last_node_run_ended_after: float | None = None  # process start -> last node run's end (run records)
    published_after: float | None = None  # process start -> its `published:` line printed
    node_runs: int = 0  # its runs but the publish run
    # CPU seconds (user + system) of the command's process and of the processes it waited for
    # (workers, their runs): unlike its seconds, barely moved by the machine's other load.
    cpu_seconds: float | None = None
    publish_seconds: float | None = None  # what its `published: ... (N s)` line says the publish took
    instance: str = "repo"  # which instance it ran on (INSTANCES)
    # The bound of this very run from its nodes' own step times, when its bench computes one
    # (engine_bench.py `same_run_bound`): {"bound", "critical", "work"} in seconds over its runs, with
    # "runs" and the node-level "node_bound", "node_critical" (only the node-level three before them).
    same_run_bound: dict[str, float] | None = None
    # With engine_bench.py --repeat: every run of the row ({"seconds", "bound", "cpu_seconds"},
    # "bound" its same-run bound or None), this result being the one of the median ratio.
    repeats: list[dict[str, float | None]] = field(default_factory=list)

    @property
    def all_succeeded(self) -> bool:
        return self.returncode == 0 and self.materialized == self.targeted

    def split(self) -> Split | None:
        """The command's seconds by phase; None when a phase's end was not seen (no node run,
        or nothing published: the command failed, or its backfill publishes per node)."""
        first, last, published = self.first_run_after, self.last_node_run_ended_after, self.published_after
        if first is None or last is None or published is None:
            return None
        return Split(first, last - first, published - last, self.seconds - published)

    def cpu_per_node(self, nodes: int) -> str:
        """CPU seconds per node of the command and its processes, for a results table."""
        return f"{self.cpu_seconds / nodes:.3f}" if self.cpu_seconds is not None else "n/a"

    def publish_cell(self) -> str:
        """The publish's seconds as the command printed them, for a results table."""
        return f"{self.publish_seconds:.2f}" if self.publish_seconds is not None else "n/a"

    def details(self) -> str:
        """Runs, first run, completeness and load, for a results table's details column."""
        runs = ", ".join(f"{n} {s}" for s, n in sorted(self.run_statuses.items())) or "none"
        first = f"{self.first_run_after:.1f} s" if self.first_run_after is not None else "never"
        verdict = "all succeeded" if self.all_succeeded else f"NOT all succeeded (exit {self.returncode})"
        load = " -> ".join("/".join(f"{x:.1f}" for x in loads) for loads in (self.load_before, self.load_after))
        return (
            f"first node run started {first} after the command; {self.runs} runs ({runs}); "
            f"{self.materialized} of {self.targeted} materialized; {verdict}; ended {self.measured_at}, load {load}"
        )


@dataclass(frozen=True)
class Split:
    """A whole command's seconds by phase; they add up to its makespan."""

    start_up: float  # process start -> first node run started: imports, planning, workers
    nodes: float  # first node run started -> last node run ended
    gate_and_publish: float  # last node run ended -> `published:` printed (workers stopped, gate, publish)
    exit: float  # `published:` printed -> process exited

    def cells(self) -> str:
        """`start-up / nodes / gate+publish / exit` in seconds, for a results table."""
        return f"{self.start_up:.1f} / {self.nodes:.1f} / {self.gate_and_publish:.1f} / {self.exit:.1f}"


# The instances a whole command is measured on (issue 44): what a new project has, what this
# repo's `make dev` has, and the production set-up.
INSTANCES = {
    "defaults": "Dagster's defaults (no dagster.yaml)",
    "repo": "this repo's dagster.yaml",
    "postgres": "Postgres (this repo's dagster.yaml + README's storage block)",
    "postgres-storage": "Postgres with only README's storage block (Dagster's defaults otherwise)",
}
# The kinds stored on a PostgreSQL server: each measurement needs a fresh database's URL.
ON_POSTGRES = {"postgres", "postgres-storage"}


def backfill_only_instance_env(home: Path, kind: str = "repo", postgres_url: str | None = None) -> dict[str, str]:
    """A new instance at `home` of `kind` (INSTANCES; those ON_POSTGRES on `postgres_url`, a
    fresh database) that runs nothing but the benched backfill. "defaults" has no dagster.yaml:
    Dagster's storage (a SQLite database per run), no run queue limit. The others have the
    repo's dagster.yaml, with no production run to keep a slot free for
    (`partition_assets.backfills.reserve_runs: 0`): with the default reserve of 1 under the
    repo's `max_concurrent_runs: 4`, a backfill run with `--max-parallel 4` would run 3
    nodes at a time (its first line says so), and be measured against a bound for 4. Its
    storage is created here, before any command is timed, as a deployment's instance exists
    before its backfills: creating its SQLite schema takes 2-3 s on this machine's disk
    (0.5 s in memory), once per instance, and a command on a new instance spent it before
    its first node run. "postgres-storage" (issue 54) is what a user who copies README's
    Postgres block into an otherwise empty dagster.yaml has: that block alone, Dagster's
    defaults for everything else (instance class, run queue, compute logs, telemetry)."""
    if kind == "defaults":
        home.mkdir(parents=True, exist_ok=True)
        env = {"DAGSTER_HOME": str(home)}
    elif kind == "postgres-storage":
        assert postgres_url is not None  # ON_POSTGRES: the caller creates its database
        home.mkdir(parents=True, exist_ok=True)
        (home / "dagster.yaml").write_text(POSTGRES_STORAGE_YAML)
        env = {"DAGSTER_HOME": str(home), URL_ENV: postgres_url}
    else:
        env = instance_env(home, postgres_url if kind in ON_POSTGRES else None)
        config = yaml.safe_load((home / "dagster.yaml").read_text())
        add_to_config(home, partition_assets={**config["partition_assets"], "backfills": {"reserve_runs": 0}})
    with open_instance(env) as instance:
        instance.get_runs(limit=1)  # the run and event-log storages are created on first use
        instance.event_log_storage.get_maximum_record_id()
    return env


def range_args(days: int) -> list[str]:
    """`--start 2024-01-01 --end <last day>`: `days` days, both ends inclusive."""
    return ["--start", day(0), "--end", day(days - 1)]


def day(offset: int) -> str:
    """The day `offset` days after the benches' first day (2024-01-01), as a daily partition key."""
    return (START + timedelta(days=offset)).strftime("%Y-%m-%d")


def command_env(env: dict[str, str]) -> dict[str, str]:
    """The whole environment of a `partition-assets` command run by `run_backfill_command`:
    this process's, the repository first on the import path, and `env`. A command server
    (`backfill serve`) started from the repository's root in it takes those commands."""
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": pythonpath, **env}


def run_backfill_command(
    target: list[str],
    spec_args: list[str],
    env: dict[str, str],
    keys: dict[str, list[str]],
    log=print,
    instance: str = "repo",
) -> CommandResult:
    """Runs `partition-assets backfill run <target> <spec_args>` with `env` added to this
    process's environment; `env` must name the DAGSTER_HOME (prepared by the caller) the
    command and the read-back use. `keys`: the (asset, partition) pairs it should materialize;
    `instance`: which of INSTANCES `env` names, kept with the result."""
    command = [sys.executable, "-m", "partition_assets", "backfill", "run", *target, *spec_args]
    log(f"  engine command: partition-assets {' '.join(command[3:])}")
    load_before = os.getloadavg()
    cpu_before = _children_cpu()
    launched = time.time()
    began = time.perf_counter()
    lines: list[tuple[float, str]] = []  # (seconds since the start, line), as the command printed them
    with tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(
            command,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=command_env(env),
        )
        assert process.stdout is not None
        for line in process.stdout:
            lines.append((time.perf_counter() - began, line.rstrip("\n")))
        returncode = process.wait()
        seconds = time.perf_counter() - began
        cpu_seconds = _children_cpu() - cpu_before
        stderr.seek(0)
        stderr_text = stderr.read()
    # Opened with `env` in the environment too: the repo's instance storage finds its files
    # under $DAGSTER_HOME, not under the folder the instance is loaded from.
    with open_instance(env) as opened:
        records = opened.get_run_records(dg.RunsFilter(created_after=datetime.fromtimestamp(launched, UTC)))
        materialized = materialized_count(opened, keys)
    starts = [r.start_time for r in records if r.start_time]
    node_records = [r for r in records if PUBLISH_RUN_TAG not in r.dagster_run.tags]
    node_ends = [r.end_time for r in node_records if r.end_time]
    summary = [line for _, line in lines if line.startswith("backfill ")]
    published = [at for at, line in lines if line.startswith("published:")]
    publish_seconds = [float(m[1]) for _, line in lines if (m := PUBLISHED_SECONDS.match(line))]
    result = CommandResult(
        seconds=seconds,
        first_run_after=min(starts) - launched if starts else None,
        returncode=returncode,
        summary=" / ".join(summary),
        runs=len(records),
        run_statuses=dict(Counter(r.dagster_run.status.value for r in records)),
        materialized=materialized,
        targeted=sum(map(len, keys.values())),
        measured_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        load_before=load_before,
        load_after=os.getloadavg(),
        stderr_tail="" if returncode == 0 else "\n".join(stderr_text.splitlines()[-20:]),
        args=command[3:],
        last_node_run_ended_after=max(node_ends) - launched if node_ends else None,
        published_after=published[0] if published else None,
        node_runs=len(node_records),
        cpu_seconds=cpu_seconds,
        publish_seconds=publish_seconds[0] if publish_seconds else None,
        instance=instance,
    )
    log(f"  engine command: {seconds:.1f} s, exit {returncode}; {result.details()}")
    return result


# The command's publish line: `published: <tables and versions> (1.2 s: <its split>)`.
PUBLISHED_SECONDS = re.compile(r"published: .* \(([0-9.]+) s(?:: [^()]*)?\)$")


def _children_cpu() -> float:
    """User + system CPU seconds of this process's children that have been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def versus_dagster(seconds: float, daemons: dict[str, DaemonResult]) -> tuple[float, str]:
    """How many times faster an engine makespan of `seconds` is than the best of Dagster's
    backfills `daemons` (by policy label), and a sentence saying so. When none finished, the
    ratio is a lower bound: the shortest timeout over `seconds`."""
    finished = {label: d.makespan for label, d in daemons.items() if d.finished and d.makespan is not None}
    if not finished:
        ratio = min(d.timeout for d in daemons.values()) / seconds
        return ratio, f"Engine is more than {ratio:.1f}x faster than Dagster: no policy finished in its timeout"
    label = min(finished, key=lambda policy: finished[policy])
    ratio = finished[label] / seconds
    faster = f"{ratio:.2f}x faster than" if ratio >= 1 else f"{1 / ratio:.2f}x slower than"
    return ratio, f"Engine is {faster} Dagster's best policy ({label}: {finished[label]:.1f} s)"
