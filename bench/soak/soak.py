"""The soak (issue 55): a staged backfill of the soak DAG (bench/soak/soak_defs.py) on Postgres
and a Spark Connect server, while a seeded fault schedule kills its processes and servers
(bench/soak/faults.py), production writes other partitions of the same tables and library
readers join two of them at one release (bench/soak/actors.py); then every invariant
(bench/soak/invariants.py), and a verdict.

Usage: python bench/soak/soak.py [--seed 1] [--minutes 2] [--nodes 20] [--faults N]
           [--interval-scale S] [--out FILE] [--keep]
(`make soak SEED=... MINUTES=... NODES=...`). A failure reproduces from its seed: the
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
5. once published and the faults done: production and readers stop, the invariants are
   checked, the report printed (seed, schedule, what each fault hit and what recovered it,
   counts, verdict), and written to `--out` if given.

Not guaranteed: the figures of a loaded machine; faults past the publish are not injected
(listed as such).
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
from bench.soak.invariants import Evidence, check_all

LOCATION = str(REPO / "bench/soak/soak_defs.py")
ACTORS = str(REPO / "bench/soak/actors.py")
DEFAULT_SPARK_PORT = "17000"
PRODUCTION_DAYS = 3  # production writes the days just after the backfill's range, in turn
MAX_DAYS = 120  # more nodes are more lanes: lane 0's Spark writes stay bounded
# Seconds a Spark call of the soak's processes retries a server that is gone (not Spark's ten minutes).
UNREACHABLE_SECONDS = "5"
MEAN_INTERVAL = sum(fault_kinds.INTERVAL) / 2


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


class Soak:
    """One soak's servers, processes and records, under `root`."""

    def __init__(self, root: Path, seed: int, days: int, lanes: int, log) -> None:
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
        from partition_assets_tests.support.cli_runs import start_cli
        from partition_assets_tests.support.command_servers import ServerOutput

        self.server = start_cli("backfill", "serve", env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
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
        return ["run", "-f", LOCATION, "--select", "*", "--start", self.first, "--end", self.last]

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
        from partition_assets_tests.support.cli_runs import start_cli

        self.commands.append(" ".join(args))
        with self.backfill_log.open("a") as out:
            out.write(f"=== soak: `partition-assets backfill {' '.join(args)}` at +{self.elapsed():.1f}s\n")
            out.flush()
            self.driver = start_cli(
                "backfill", *args, env={**self.env, soak_defs.GENERATION_ENV: "2"}, stdout=out, stderr=out
            )

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def start_actors(self) -> None:
        production_days = [soak_defs.last_day(self.days + 1 + i) for i in range(PRODUCTION_DAYS)]
        production_env = {**self.env, soak_defs.GENERATION_ENV: "prod"}
        with (self.root / "actors.log").open("a") as out:
            self.actors = [
                subprocess.Popen(
                    [sys.executable, ACTORS, *args], cwd=REPO, env=env, stdout=out, stderr=out, start_new_session=True
                )
                for args, env in (
                    (["production", str(self.root / "production.jsonl"), *production_days], production_env),
                    (["reader", str(self.root / "reader.jsonl"), str(self.lake), self.first, self.last], self.env),
                )
            ]

    def stop_actors(self) -> None:
        for actor in self.actors:
            actor.send_signal(signal.SIGTERM)
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
    seed: int, minutes: float, nodes: int, fault_count: int | None, scale: float, root: Path, log
) -> tuple[bool, list[str]]:
    """One soak (see the module docstring); (every invariant held, the report's lines)."""
    days, lanes = size(nodes)
    count = fault_count if fault_count is not None else max(1, int(minutes * 60 / (MEAN_INTERVAL * scale)))
    schedule = fault_kinds.schedule(seed, count, scale)
    header = [
        f"seed {seed}; {days} days x {lanes} lanes ({days * 3 * lanes + lanes * math.ceil(days / 28)} nodes "
        f"at most); {count} faults, interval scale {scale}",
        "schedule: " + ", ".join(fault.describe() for fault in schedule),
    ]
    for line in header:
        log(line)
    soak = Soak(root, seed, days, lanes, log)
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
        published = _run_schedule(soak, backfill_id, schedule, target, rng, deadline=max(minutes * 60 * 3, 600))
        _wait_for_readers_to_see(soak, "2")
        soak.stop_actors()
        evidence = Evidence(soak.root, soak.home, soak.lake, backfill_id, days, soak.first, soak.last, soak.injected)
        results = check_all(evidence) if published else {"published": (False, "the backfill did not publish in time")}
    finally:
        soak.close()
    lines = [*header, "", "| at | fault | hit | recovered by |", "| --- | --- | --- | --- |"]
    for fault in soak.injected:
        lines.append(
            f"| +{fault.at:.1f}s | {fault.kind} | {fault.hit or 'nothing to hit (skipped)'} | "
            f"{'; '.join(fault.recovered_by) or '-'} |"
        )
    lines += ["", f"commands: {', '.join(f'`{c}`' for c in soak.commands)}", ""]
    lines += [f"- {name}: {'held' if held else 'VIOLATED'}: {detail}" for name, (held, detail) in results.items()]
    verdict = all(held for held, _ in results.values())
    lines += ["", f"verdict: {'every invariant held' if verdict else 'FAILED'} (seed {seed})"]
    return verdict, lines


def _wait_for_id(soak: Soak) -> str:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        found = soak.backfill_id()
        if found:
            return found
        time.sleep(0.5)
    raise RuntimeError(f"the soak's backfill was not recorded within 300 s; see {soak.backfill_log}")


def _run_schedule(soak: Soak, backfill_id: str, schedule, target, rng, deadline: float) -> bool:
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
        _recover(soak, backfill_id, status)
        if pending and soak.elapsed() >= next_at:
            fault = pending.pop(0)
            hit = fault_kinds.inject(fault.kind, target, rng)
            soak.injected.append(Injected(fault.kind, soak.elapsed(), hit))
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
    parser.add_argument("--out", default=None, help="also write the report to this file")
    parser.add_argument("--keep", action="store_true", help="keep the soak's folder (logs, lake, records)")
    args = parser.parse_args()
    scale = args.interval_scale if args.interval_scale is not None else (1.0 if args.minutes >= 5 else 0.1)
    root = Path(tempfile.mkdtemp(prefix=f"soak-{args.seed}-"))

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    log(f"soak folder: {root}")
    try:
        held, lines = run_soak(args.seed, args.minutes, args.nodes, args.faults, scale, root, log)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    report = "\n".join(lines)
    if args.out:
        Path(args.out).write_text(report + "\n")
    print(report)
    sys.exit(0 if held else 1)


if __name__ == "__main__":
    main()
