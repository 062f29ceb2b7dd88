"""The soak (issue 55): a staged backfill of the soak DAG (bench/soak/soak_defs.py) on Postgres
and a Spark Connect server, while a seeded fault schedule kills its processes and servers
(bench/soak/faults.py), production writes other partitions of the same tables and library
readers join two of them at one release (bench/soak/actors.py); then every invariant
(bench/soak/invariants.py), and a verdict.

Usage: python bench/soak/soak.py [--seed 1] [--minutes 2] [--nodes 20] [--faults N]
           [--interval-scale S] [--previous COMMIT] [--upgrade-after FRACTION|SECONDS]
           [--node-seconds S] [--out FILE] [--keep]
(`make soak SEED=... MINUTES=... NODES=... PREVIOUS=...`). A failure reproduces from its seed: the
schedule is the seed's alone (where each fault lands in the backfill depends on the machine).

Steps:
1. a throwaway Postgres server holds the instance (this repo's dagster.yaml plus README's
   storage block); the Spark Connect server is the local one on
   $PARTITION_ASSETS_SPARK_CONNECT_PORT (17000 unless set), its state under the soak's folder;
2. an undisturbed backfill writes generation 1 of the DAG's days and publishes it;
3. a command server (`backfill serve`) starts, then production and the readers, then the
   soak's backfill (generation 2 of the same days, through the command server);
4. each fault of the schedule at its time; the harness then does what an operator does: a
   command that drove the backfill ended without publishing -> `backfill resume <id>`;
   a command server gone -> start it again (as its service manager would); anything else
   (a Postgres or Spark restart, a node run killed) -> nothing: the product recovers;
   With `--previous COMMIT` (the Makefile's default: c552270; `--previous ''` for none), the
   command server and the backfill's commands are that release's (bench/soak/upgrade.py, run
   from a project folder holding a copy of the soak's code, with the Spark server named by
   PARTITION_ASSETS_SPARK_REMOTE: a release refuses a local server another install started;
   a Spark server killed then is started again by the harness, as that remote server's
   operator would), until `--upgrade-after` (a fraction of the nodes succeeded, or seconds
   when > 1): then the harness deploys this release as an operator does: SIGTERM to every
   process of the old release (UPGRADE_GRACE seconds, then SIGKILL), this release's command
   server started, `backfill resume <id>` with it. Faults go on across the upgrade.
   Production and the readers are this release's throughout (a schedule's code is deployed
   on its own; the upgrade under test is the backfill's);
5. once published and the faults done: production and readers stop, the invariants are
   checked, the report printed (seed, schedule, what each fault hit and what recovered it,
   counts, verdict), and written to `--out` if given.

Not guaranteed: the figures of a loaded machine; faults past the publish are not injected
(listed as such); no webserver runs (the soak drives the CLI; a webserver of either release
reads the same records as `status` does).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO)]

from bench.dag_shapes import START
from bench.soak import faults as fault_kinds
from bench.soak import soak_defs
from bench.soak.actors import STOP_FILE_ENV
from bench.soak.invariants import Evidence, check_all
from bench.soak.upgrade import Release, previous_release

LOCATION = str(REPO / "bench/soak/soak_defs.py")
ACTORS = str(REPO / "bench/soak/actors.py")
DEFAULT_SPARK_PORT = "17000"
PRODUCTION_DAYS = 3  # production writes the days just after the backfill's range, in turn
MAX_DAYS = 120  # more nodes are more lanes: lane 0's Spark writes stay bounded
# Seconds a Spark call of the soak's processes retries a server that is gone (not Spark's ten minutes).
UNREACHABLE_SECONDS = "5"
MEAN_INTERVAL = sum(fault_kinds.INTERVAL) / 2
UPGRADE_GRACE = 10.0  # seconds between the deploy's SIGTERM and its SIGKILL
# The soak's code, copied into the previous release's project folder (its processes import no
# file of this checkout): the same modules, by the same names, before and after the upgrade.
PROJECT_FILES = ("bench/dag_shapes.py", "bench/soak/soak_defs.py")


def size(nodes: int) -> tuple[int, int]:
    """(days, lanes) of a soak DAG of about `nodes` nodes: a lane has 3 daily assets and a
    monthly one; lanes are added once a lane of MAX_DAYS days is not enough."""
    days = max(3, min(MAX_DAYS, nodes // 3))
    per_lane = 3 * days + math.ceil(days / 28)
    return days, max(1, round(nodes / per_lane))


@dataclass
class Injected:
    kind: str
    at: float  # seconds since the soak's backfill started
    hit: str | None  # None: nothing to hit at that moment (skipped)
    recovered_by: list[str] = field(default_factory=list)
    previous_release: str | None = None  # the previous release's sha, when it ran the backfill then


@dataclass
class Upgrade:
    """The upgrade step: the previous release, when to deploy this one, and what happened."""

    release: Release
    after: float  # <= 1: a fraction of the nodes succeeded; > 1: seconds since the backfill started
    project: Path  # the previous release's working directory, holding PROJECT_FILES
    done: bool = False
    at: float = 0.0  # seconds since the soak's backfill started
    succeeded: int = 0  # nodes succeeded then
    format_before: int | None = None  # the record's format as the previous release left it
    stopped: list[str] = field(default_factory=list)  # what the deploy stopped, and how

    def due(self, elapsed: float, succeeded: int, nodes: int) -> bool:
        return not self.done and (elapsed >= self.after if self.after > 1 else succeeded >= self.after * nodes)


class Soak:
    """One soak's servers, processes and records, under `root`."""

    def __init__(self, root: Path, seed: int, days: int, lanes: int, log, upgrade: Upgrade | None = None) -> None:
        from partition_assets_tests.support.instances import instance_env
        from partition_assets_tests.support.postgres import PostgresServer

        self.root, self.seed, self.days, self.lanes, self.log = root, seed, days, lanes, log
        self.first, self.last = START, soak_defs.last_day(days)
        self.lake = root / "lake"
        self.home = root / "dagster_home"
        self.backfill_log = root / "backfill.log"
        self.postgres = PostgresServer().start()
        self.env = {
            **os.environ,
            **instance_env(self.home, self.postgres.create_database()),
            soak_defs.DAYS_ENV: str(days),
            soak_defs.LANES_ENV: str(lanes),
            soak_defs.LAKE_ENV: str(self.lake),
            "PARTITION_ASSETS_STATE_DIR": str(root / "state"),
            "PARTITION_ASSETS_SPARK_CONNECT_PORT": os.environ.get("PARTITION_ASSETS_SPARK_CONNECT_PORT")
            or DEFAULT_SPARK_PORT,
            "PARTITION_ASSETS_SPARK_UNREACHABLE_SECONDS": UNREACHABLE_SECONDS,
        }
        self.env.pop("PARTITION_ASSETS_SPARK_REMOTE", None)
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self._saved_env = dict(os.environ)
        os.environ.clear()
        os.environ.update(self.env)  # this process opens the same instance and Spark server
        self.server: subprocess.Popen | None = None
        self.server_outputs: list = []  # each command server's output (ServerOutput), the last one's running
        self.driver: subprocess.Popen | None = None
        self.actors: list[subprocess.Popen] = []
        self.injected: list[Injected] = []
        self.commands: list[str] = []
        self.upgrade = upgrade

    # --- the release running the backfill ----------------------------------------------------
    def previous(self) -> Release | None:
        """The previous release, while it runs the backfill (None: this one does)."""
        return None if self.upgrade is None or self.upgrade.done else self.upgrade.release

    def popen(self, args: list[str], env: dict[str, str], **kwargs) -> subprocess.Popen:
        """`partition-assets <args>` of the release running the backfill, in a session of its own."""
        from partition_assets_tests.support.cli_runs import start_cli

        release = self.previous()
        if release is None:
            return start_cli(*args, env=env, **kwargs)
        assert self.upgrade is not None
        # The Spark server this release started: the previous one refuses it unless named as remote.
        env = release.env({**env, "PARTITION_ASSETS_SPARK_REMOTE": self.spark_server().url})
        return subprocess.Popen(
            release.command(*args), cwd=self.upgrade.project, env=env, text=True, start_new_session=True, **kwargs
        )

    def location(self) -> str:
        return LOCATION if self.previous() is None else str(self.upgrade.project / PROJECT_FILES[1])  # type: ignore[union-attr]

    # --- servers -------------------------------------------------------------------------
    def spark_server(self):
        from partition_assets.spark import SparkResource

        return SparkResource.from_env().local_server()

    def kill_spark(self) -> int | None:
        recorded = self.spark_server().recorded_server()
        if recorded is None or not self.spark_server().is_running():
            return None
        os.killpg(recorded.pid, signal.SIGKILL)
        return recorded.pid

    def start_command_server(self) -> None:
        from partition_assets_tests.support.command_servers import ServerOutput

        self.server = self.popen(["backfill", "serve"], self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.server_outputs.append(ServerOutput(self.server))
        self.server_outputs[-1].wait_for_line(r"command server \d+ serving")

    def kill_command_server(self) -> int | None:
        if self.server is None or self.server.poll() is not None:
            return None
        self.server.send_signal(signal.SIGKILL)
        self.server.wait()
        return self.server.pid

    # --- the backfill ----------------------------------------------------------------------
    def backfill_args(self) -> list[str]:
        return ["run", "-f", self.location(), "--select", "*", "--start", self.first, "--end", self.last]

    def baseline(self) -> None:
        """Generation 1 of lane 0, undisturbed, published: what the readers read before the soak's publish."""
        from partition_assets_tests.support.cli_runs import ok, run_cli

        started = time.monotonic()
        # Lane 0 only (the tables the readers join): the other lanes store nothing to read.
        env = {**self.env, soak_defs.GENERATION_ENV: "1", soak_defs.LANES_ENV: "1"}
        ok(run_cli("backfill", *self.backfill_args(), env=env, timeout=7200))
        self.log(f"baseline (generation 1) published in {time.monotonic() - started:.0f} s")

    def drive(self, *args: str) -> None:
        """A `partition-assets backfill <args>` driving the soak's backfill, its output appended to its log."""
        release = self.previous()
        self.commands.append(" ".join(args) + ("" if release is None else f" ({release.sha[:7]})"))
        with self.backfill_log.open("a") as out:
            out.write(f"=== soak: `partition-assets backfill {' '.join(args)}` at +{self.elapsed():.1f}s\n")
            out.flush()
            self.driver = self.popen(
                ["backfill", *args], {**self.env, soak_defs.GENERATION_ENV: "2"}, stdout=out, stderr=out
            )

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def start_actors(self) -> None:
        production_days = [soak_defs.last_day(self.days + 1 + i) for i in range(PRODUCTION_DAYS)]
        stop = {STOP_FILE_ENV: str(self.root / "stop_actors")}
        production_env = {**self.env, **stop, soak_defs.GENERATION_ENV: "prod"}
        with (self.root / "actors.log").open("a") as out:
            self.actors = [
                subprocess.Popen(
                    [sys.executable, ACTORS, *args], cwd=REPO, env=env, stdout=out, stderr=out, start_new_session=True
                )
                for args, env in (
                    (["production", str(self.root / "production.jsonl"), *production_days], production_env),
                    (
                        ["reader", str(self.root / "reader.jsonl"), str(self.lake), self.first, self.last],
                        {**self.env, **stop},
                    ),
                )
            ]

    def stop_actors(self) -> None:
        """Asks the actors to stop after their run or read in flight (bench/soak/actors.py), and
        waits for them; one still going after two minutes is killed."""
        (self.root / "stop_actors").touch()
        for actor in self.actors:
            try:
                actor.wait(120)
            except subprocess.TimeoutExpired:
                actor.kill()
                actor.wait()

    def status(self, backfill_id: str) -> str | None:
        from partition_assets_tests.support.records import recorded_backfill

        try:
            return recorded_backfill(self.home, backfill_id).status.value
        except Exception as error:  # the instance unreachable (Postgres restarting): ask again later
            self.log(f"status unreadable now: {type(error).__name__}")
            return None

    def backfill_id(self) -> str | None:
        from partition_assets_tests.support.records import recorded_ids

        try:
            ids = recorded_ids(self.home)
        except Exception:
            return None
        return ids[1] if len(ids) > 1 else None

    def coordinator_live(self, backfill_id: str) -> bool | None:
        import dagster as dg

        from partition_assets.backfill.state.presence import live_coordinator

        try:
            with dg.DagsterInstance.from_config(str(self.home)) as instance:
                return live_coordinator(instance, backfill_id) is not None
        except Exception:
            return None

    def succeeded(self, backfill_id: str) -> int | None:
        """How many of the backfill's node runs succeeded (None: the instance unreachable now)."""
        import dagster as dg

        from partition_assets.run_tags import BACKFILL_ID_TAG

        try:
            with dg.DagsterInstance.from_config(str(self.home)) as instance:
                return instance.get_runs_count(
                    dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}, statuses=[dg.DagsterRunStatus.SUCCESS])
                )
        except Exception:
            return None

    def record_format(self, backfill_id: str) -> int | None:
        """The format of the backfill's record as stored (None: unreachable now, or unmarked)."""
        import dagster as dg

        from partition_assets_tests.support.older_releases import stored_body

        try:
            with dg.DagsterInstance.from_config(str(self.home)) as instance:
                return stored_body(instance, backfill_id).get("format")
        except Exception:
            return None

    def deploy(self, backfill_id: str, succeeded: int) -> None:
        """An operator's deploy of this release mid-backfill: every process of the previous one
        (its command server, the commands it forked, the driving client) gets SIGTERM, then
        SIGKILL after UPGRADE_GRACE seconds; this release's command server starts and resumes."""
        upgrade = self.upgrade
        assert upgrade is not None
        upgrade.at, upgrade.succeeded = self.elapsed(), succeeded
        upgrade.format_before = self.record_format(backfill_id)
        groups = [p.pid for p in (self.driver, self.server) if p is not None and p.poll() is None]
        groups += [pid for output in self.server_outputs for pid in output.forks()]
        for signum in (signal.SIGTERM, signal.SIGKILL):
            for pid in groups:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signum)
            deadline = time.monotonic() + UPGRADE_GRACE
            while time.monotonic() < deadline and (live := self._live_groups(groups)):
                time.sleep(0.2)
            upgrade.stopped.append(f"{signum.name}: {len(groups)} process groups, {len(live)} left")
            if not live:
                break
        upgrade.done = True
        self.log(f"+{self.elapsed():.1f}s upgrade: {'; '.join(upgrade.stopped)}; this release's server resumes")
        self.start_command_server()
        self.drive("resume", backfill_id)

    def _live_groups(self, groups: list[int]) -> list[int]:
        for process in (self.driver, self.server):
            if process is not None:
                process.poll()  # reaps a child of this process: a zombie would still count
        live = []
        for pid in groups:
            try:
                os.killpg(pid, 0)
                live.append(pid)
            except ProcessLookupError:
                pass
        return live

    def close(self) -> None:
        """Kills what the soak started, each in its session: served commands (a coordinator
        left running after a failure) included, then stops the servers."""
        for process in [self.driver, self.server, *self.actors]:
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        for fork in {pid for output in self.server_outputs for pid in output.forks()}:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(fork, signal.SIGKILL)
        self.spark_server().stop()
        self.postgres.stop()
        os.environ.clear()
        os.environ.update(self._saved_env)


def run_soak(
    seed: int,
    minutes: float,
    nodes: int,
    fault_count: int | None,
    scale: float,
    root: Path,
    log,
    previous: str | None = None,
    upgrade_after: float = 0.3,
) -> tuple[bool, list[str]]:
    """One soak (see the module docstring); (every invariant held, the report's lines). With
    `previous` (a commit), that release starts the backfill and this one takes it over after
    `upgrade_after` (a fraction of the nodes succeeded, or seconds when > 1)."""
    days, lanes = size(nodes)
    upgrade = None
    if previous:
        project = root / "project"
        for name in PROJECT_FILES:
            (project / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / name, project / name)
        upgrade = Upgrade(previous_release(previous), upgrade_after, project)
    count = fault_count if fault_count is not None else max(1, int(minutes * 60 / (MEAN_INTERVAL * scale)))
    schedule = fault_kinds.schedule(seed, count, scale)
    header = [
        f"seed {seed}; {days} days x {lanes} lanes ({nodes_of(days, lanes)} nodes "
        f"at most, {os.environ.get(soak_defs.SIDE_SECONDS_ENV, soak_defs.SIDE_LANE_SECONDS)} s per node past lane 0); "
        f"{count} faults, interval scale {scale}"
        + ("" if upgrade is None else f"; upgrade from {upgrade.release.sha[:7]} after {upgrade_after:g}"),
        "schedule: " + ", ".join(fault.describe() for fault in schedule),
    ]
    for line in header:
        log(line)
    soak = Soak(root, seed, days, lanes, log, upgrade)
    try:
        soak.spark_server().ensure_running()
        soak.baseline()
        soak.start_command_server()
        soak.start_actors()
        soak.started = time.monotonic()
        soak.drive(*soak.backfill_args())
        backfill_id = _wait_for_id(soak)
        rng = random.Random(seed)
        target = fault_kinds.Target(
            soak.home, backfill_id, soak.kill_spark, soak.postgres.crash_and_restart, soak.kill_command_server
        )
        published = _run_schedule(
            soak, backfill_id, schedule, target, rng, deadline=max(minutes * 60 * 3, 600), nodes=nodes_of(days, lanes)
        )
        _wait_for_readers_to_see(soak, "2")
        soak.stop_actors()
        evidence = Evidence(soak.root, soak.home, soak.lake, backfill_id, days, soak.first, soak.last, soak.injected)
        results = check_all(evidence) if published else {"published": (False, "the backfill did not publish in time")}
        if upgrade is not None:
            results["upgrade"] = _upgrade_result(upgrade, soak.record_format(backfill_id), nodes_of(days, lanes))
    finally:
        soak.close()
    lines = [*header, "", "| at | fault | hit | recovered by |", "| --- | --- | --- | --- |"]
    for fault in soak.injected:
        lines.append(
            f"| +{fault.at:.1f}s{f' ({fault.previous_release})' if fault.previous_release else ''} | {fault.kind} | "
            f"{fault.hit or 'nothing to hit (skipped)'} | "
            f"{'; '.join(fault.recovered_by) or '-'} |"
        )
    lines += ["", f"commands: {', '.join(f'`{c}`' for c in soak.commands)}", ""]
    lines += [f"- {name}: {'held' if held else 'VIOLATED'}: {detail}" for name, (held, detail) in results.items()]
    verdict = all(held for held, _ in results.values())
    lines += ["", f"verdict: {'every invariant held' if verdict else 'FAILED'} (seed {seed})"]
    return verdict, lines


def nodes_of(days: int, lanes: int) -> int:
    """The soak DAG's nodes at most (see `size`)."""
    return days * 3 * lanes + lanes * math.ceil(days / 28)


def _upgrade_result(upgrade: Upgrade, format_after: int | None, nodes: int) -> tuple[bool, str]:
    """The verdict's upgrade line: held once this release took the backfill over mid-way and
    left its record in this release's format (what else carried over, the invariants check)."""
    from partition_assets.state_formats import RECORD_FORMAT

    if not upgrade.done:
        return False, f"not done: not due ({upgrade.after:g}) before the backfill published or the soak's deadline"
    held = format_after == RECORD_FORMAT and upgrade.succeeded < nodes
    return held, (
        f"{upgrade.release.sha[:7]} -> this release at +{upgrade.at:.1f}s, {upgrade.succeeded} of {nodes} nodes "
        f"succeeded; deploy: {'; '.join(upgrade.stopped)}; record format {upgrade.format_before} before, "
        f"{format_after} after (this release's: {RECORD_FORMAT}); the record, leases, ledger, release log and "
        "tables carried over (the invariants above)"
    )


def _wait_for_id(soak: Soak) -> str:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        found = soak.backfill_id()
        if found:
            return found
        time.sleep(0.5)
    raise RuntimeError(f"the soak's backfill was not recorded within 300 s; see {soak.backfill_log}")


def _run_schedule(soak: Soak, backfill_id: str, schedule, target, rng, deadline: float, nodes: int) -> bool:
    """Injects `schedule`'s faults and recovers as an operator does, until the backfill is
    published and the schedule done (or `deadline` seconds); True once published."""
    pending = list(schedule)
    next_at = pending[0].after if pending else math.inf
    while soak.elapsed() < deadline:
        status = soak.status(backfill_id)
        if status == "published":
            for fault in soak.injected:
                if fault.hit is not None and not fault.recovered_by:
                    fault.recovered_by.append("the product itself (no operator action)")
            for fault in pending:
                soak.injected.append(Injected(fault.kind, soak.elapsed(), None, ["not injected: published already"]))
            return True
        if soak.upgrade is not None and not soak.upgrade.done:
            succeeded = soak.succeeded(backfill_id)
            if succeeded is not None and soak.upgrade.due(soak.elapsed(), succeeded, nodes):
                soak.deploy(backfill_id, succeeded)
        _recover(soak, backfill_id, status)
        if pending and soak.elapsed() >= next_at:
            fault = pending.pop(0)
            hit = fault_kinds.inject(fault.kind, target, rng)
            release = soak.previous()
            soak.injected.append(Injected(fault.kind, soak.elapsed(), hit, [], release and release.sha[:7]))
            if hit and fault.kind == "spark_server" and soak.previous() is not None:
                # The previous release uses it as a remote server: it is its operator's to start again.
                soak.spark_server().ensure_running()
                _note(soak, soak.injected[-1], "the harness started the Spark server again (remote to the release)")
            soak.log(f"+{soak.elapsed():.1f}s fault {fault.kind}: {hit or 'nothing to hit (skipped)'}")
            next_at = soak.elapsed() + (pending[0].after if pending else 0)
        time.sleep(0.5)
    return False


def _recover(soak: Soak, backfill_id: str, status: str | None) -> None:
    """What an operator does now: restart a command server that is gone; resume a backfill
    whose driving command ended without publishing, once no coordinator is live."""
    last = soak.injected[-1] if soak.injected else None
    if soak.server is not None and soak.server.poll() is not None:
        soak.start_command_server()
        _note(soak, last, "the harness started `backfill serve` again (the backfill's command ran on)")
    if soak.driver is None or soak.driver.poll() is None or status is None or status == "published":
        return
    if soak.coordinator_live(backfill_id) is not False:
        return  # its coordinator runs on (a served command outlives its client), or the instance is unreachable
    status = soak.status(backfill_id)  # again: a coordinator lets go once its status is final
    if status is None or status == "published":
        return
    code = soak.driver.returncode
    soak.drive("resume", backfill_id)
    _note(soak, last, f"`backfill resume` (the command before it exited {code}, status {status})")
    soak.log(f"+{soak.elapsed():.1f}s resume (previous command exited {code}, status {status})")


def _note(soak: Soak, fault: Injected | None, recovery: str) -> None:
    if fault is not None:
        fault.recovered_by.append(recovery)


def _wait_for_readers_to_see(soak: Soak, generation: str, timeout: float = 120) -> None:
    """Until the readers' last observation holds `generation` on both tables (they saw the publish)."""
    out = soak.root / "reader.jsonl"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = out.read_text().splitlines() if out.exists() else []
        last = next((json.loads(line) for line in reversed(lines) if '"generations"' in line), None)
        if last and all(gens == [generation] for gens in last["generations"].values()):
            return
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--faults", type=int, default=None, help="default: as many as fit in --minutes")
    parser.add_argument(
        "--interval-scale", type=float, default=None, help="x 20-90 s between faults (default: 1, or 0.1 for <5 min)"
    )
    parser.add_argument(
        "--previous",
        default="",
        help="start the backfill with the release of this commit (HEAD~N, a tag), then upgrade",
    )
    parser.add_argument(
        "--upgrade-after",
        type=float,
        default=0.3,
        help="with --previous: upgrade once this fraction of the nodes succeeded (<= 1), or after this many seconds",
    )
    parser.add_argument(
        "--node-seconds",
        type=float,
        default=soak_defs.SIDE_LANE_SECONDS,
        help="simulated work of each node past lane 0: the soak ends at its publish, so its length follows this",
    )
    parser.add_argument("--out", default=None, help="also write the report to this file")
    parser.add_argument(
        "--keep", action="store_true", help="keep the soak's folder (logs, lake, records); a failed soak keeps it"
    )
    args = parser.parse_args()
    scale = args.interval_scale if args.interval_scale is not None else (1.0 if args.minutes >= 5 else 0.1)
    root = Path(tempfile.mkdtemp(prefix=f"soak-{args.seed}-"))
    os.environ[soak_defs.SIDE_SECONDS_ENV] = str(args.node_seconds)  # every release's processes inherit it

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    log(f"soak folder: {root}")
    held = False
    try:
        held, lines = run_soak(
            args.seed, args.minutes, args.nodes, args.faults, scale, root, log, args.previous, args.upgrade_after
        )
    finally:
        if held and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        elif not args.keep:  # a failure's records, logs and lake are what diagnoses it
            log(f"kept for diagnosis (the soak failed): {root}")
    report = "\n".join(lines)
    if args.out:
        Path(args.out).write_text(report + "\n")
    print(report)
    sys.exit(0 if held else 1)


if __name__ == "__main__":
    main()
