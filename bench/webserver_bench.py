"""Materialize range in the webserver (the sparse engine behind it) against the engine CLI.

Usage: python bench/webserver_bench.py [--days 1 31] [--repeats 1] [--spark-port 15113]
           [--timeout 900] [--out bench/results/webserver.md]

Per case (`--days` days of `events` + `daily_orders` from 2024-01-01) and repeat, on a
fresh `dagster dev` (webserver, daemon, code server) serving workspace.yaml with the repo's
dagster.yaml (EngineBackfillInstance, engine_modules [partition_assets.example]): the
`make dev` setup, on a fresh DAGSTER_HOME and lake. Once it is ready:
- webserver, once the webserver's standby coordinator says its workers are loaded (as a
  user clicks, some seconds after the page opens; the wait is reported): the
  `launchPartitionBackfill` mutation the Materialize dialog sends (the two
  assets, the root asset's hourly keys); timed launch -> first node run started (the run
  records' start times) and launch -> the backfill's status COMPLETED_SUCCESS (the instance
  read every 0.2 s);
- CLI: `partition-assets backfill run -m partition_assets.example --select 'key:events or
  key:daily_orders' --start <first day> --end <last day>` on another fresh DAGSTER_HOME (the
  same dagster.yaml) and lake, while that `dagster dev` stays up, idle, so both paths run
  beside the same processes; timed command start -> exit and command start -> first node
  run started.
The two alternate which goes first from one repeat to the next. Afterwards each lake must
hold the generator's rows for exactly those days and each instance must list exactly those
partitions materialized (partition_assets_tests/support/example_tables.py), or the repeat is
reported as failed. One local Spark Connect server (local[2]) serves the whole bench,
warmed by an untimed 1-day CLI backfill before the first timed one.

Not measured here: the browser (the dialog's click is this mutation; the browser test in
partition_assets_tests/e2e/test_dagster_ui_webserver.py prints its own click -> complete).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

# This checkout's package, bench modules and test helpers, even when the installed package is another work tree's.
sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).resolve().parents[1])]
import dagster as dg
from dagster._core.execution.backfill import BulkActionStatus
from dagster_backfill import CANCEL, LAUNCH
from deltalake.exceptions import TableNotFoundError
from engine_bench import _load, _uptime

from partition_assets.backfill.publishing.dagster_events import PUBLISH_RUN_TAG
from partition_assets.processes.coordinators import coordinator_log
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets.spark import SparkResource
from partition_assets_tests.support.example_tables import assert_tables_hold_the_days, days_of, hours_of
from partition_assets_tests.support.instances import instance_env, open_instance
from partition_assets_tests.support.webserver import DagsterDev

REPO = Path(__file__).resolve().parents[1]
MODULE = "partition_assets.example"
ASSETS = ("events", "daily_orders")
FIRST_DAY = datetime(2024, 1, 1)
POLL_SECONDS = 0.2
# Issue 12: launch -> complete at most 25 s for 1 day, and within 5 s of the CLI for every case.
GOAL_ONE_DAY_SECONDS = 25.0
GOAL_DIFFERENCE_SECONDS = 5.0
UNFINISHED = (BulkActionStatus.REQUESTED, BulkActionStatus.CANCELING, BulkActionStatus.FAILING)
STARTED_LINE = re.compile(r"backfill (\w+): (\d+) nodes")
PHASES = ("gate:", "published:")


@dataclass
class Measurement:
    """One backfill of one path: seconds from its start (launch or command start)."""

    path: str  # "webserver" or "cli"
    total: float | None = None  # -> backfill complete (webserver) or command exit (CLI)
    first_node: float | None = None  # -> first node run started
    last_node: float | None = None  # -> last node run ended (then the stats, the gate and the publish)
    published: float | None = None  # -> the publish run ended (its materializations recorded)
    runs: int = 0  # node runs (the publish run apart)
    nodes: int | None = None  # as the engine planned them
    phases: list[str] = field(default_factory=list)  # the engine's lines after the nodes (gate, publish)
    problems: list[str] = field(default_factory=list)  # empty when it succeeded and wrote the right data
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)


def last_day(days: int) -> str:
    return (FIRST_DAY + timedelta(days=days - 1)).strftime("%Y-%m-%d")


def measure_webserver(dev: DagsterDev, days: int, timeout: float) -> Measurement:
    """Launches the dialog's mutation on `dev` and follows the backfill in its instance."""
    result = Measurement("webserver", load_before=os.getloadavg())
    first, last = FIRST_DAY.strftime("%Y-%m-%d"), last_day(days)
    params = {
        "fromFailure": False,
        "title": f"webserver bench {days}d",
        "assetSelection": [{"path": [asset]} for asset in ASSETS],
        "partitionNames": hours_of(first, last),  # the dialog sends the root asset's keys
    }
    # As a user clicks: after the webserver's standby coordinator has loaded its workers.
    result.phases.append(f"standby ready {dev.wait_for_standby():.1f} s after dagster dev started")
    with dev.open_instance() as instance:
        launched = time.time()
        answer = dev.graphql(LAUNCH, {"params": params})["launchPartitionBackfill"]
        if answer["__typename"] != "LaunchBackfillSuccess":
            result.problems.append(f"launchPartitionBackfill answered {answer}")
            return result
        backfill_id = answer["backfillId"]
        status = wait_until_finished(instance, backfill_id, launched + timeout)
        if status in UNFINISHED:
            dev.graphql(CANCEL, {"id": backfill_id})
            result.problems.append(f"backfill {backfill_id} still {status.value} after {timeout:.0f} s; canceled")
        elif status != BulkActionStatus.COMPLETED_SUCCESS:
            result.problems.append(f"backfill {backfill_id} ended {status.value}")
        else:
            result.total = time.time() - launched
        result.load_after = os.getloadavg()
        wait_for_coordinator_exit(backfill_id)
        read_runs(instance, backfill_id, launched, result)
        check_materialized(instance, first, last, result)
    log = coordinator_log(str(dev.home), backfill_id)
    read_output(log.read_text(errors="replace") if log.exists() else "", result)
    check_tables(dev.lake, first, last, result)
    return result


def wait_until_finished(instance: dg.DagsterInstance, backfill_id: str, deadline: float) -> BulkActionStatus:
    """The backfill's status once final, or its last status at `deadline`."""
    while True:
        backfill = instance.get_backfill(backfill_id)
        status = backfill.status if backfill else BulkActionStatus.REQUESTED
        if status not in UNFINISHED or time.time() > deadline:
            return status
        time.sleep(POLL_SECONDS)


def coordinator_pids(backfill_id: str) -> list[int]:
    """The processes running `partition-assets backfill adopt <backfill_id>` (the detached
    coordinator the instance starts for a webserver backfill, in its own session)."""
    wanted = ["backfill", "adopt", backfill_id]
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().decode(errors="replace").split("\0")
        except OSError:  # exited meanwhile
            continue
        if args[-4:-1] == wanted or args[-3:] == wanted:
            pids.append(int(cmdline.parent.name))
    return pids


def wait_for_coordinator_exit(backfill_id: str, timeout: float = 60) -> None:
    """The coordinator exits once its backfill is final; one still alive after `timeout`
    (a canceled or stuck backfill) is killed, so no case runs beside another's processes."""
    deadline = time.monotonic() + timeout
    while (pids := coordinator_pids(backfill_id)) and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)  # it leads its own session: its workers go with it
        except ProcessLookupError:
            pass


def measure_cli(env: dict[str, str], days: int, workdir: Path) -> Measurement:
    """`partition-assets backfill run` of the same selection and days on a fresh instance and lake."""
    result = Measurement("cli", load_before=os.getloadavg())
    first, last = FIRST_DAY.strftime("%Y-%m-%d"), last_day(days)
    home, lake = workdir / "cli_home", workdir / "cli_lake"
    cli_env = instance_env(home)
    command = [sys.executable, "-m", "partition_assets", "backfill", "run", "-m", MODULE]
    command += ["--select", " or ".join(f"key:{asset}" for asset in ASSETS), "--start", first, "--end", last]
    started = time.time()
    began = time.perf_counter()
    done = subprocess.run(
        command,
        cwd=REPO,
        env={**os.environ, **env, **cli_env, "PARTITION_ASSETS_LAKE": str(lake)},
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - began
    result.load_after = os.getloadavg()
    found = STARTED_LINE.search(done.stdout)
    if done.returncode == 0 and found:
        result.total = seconds
    else:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-5:])
        result.problems.append(f"`backfill run` exited {done.returncode}: {tail}")
    if found is None:  # refused before it planned: no runs, no data to check
        return result
    read_output(done.stdout, result)
    with open_instance(cli_env) as instance:
        read_runs(instance, found.group(1), started, result)
        check_materialized(instance, first, last, result)
    check_tables(lake, first, last, result)
    return result


def read_output(output: str, result: Measurement) -> None:
    """From the engine's output: its node count (`backfill <id>: <n> nodes`) and the
    steps after the nodes with their durations (`gate: ... (0.4 s)`, `published: ...`)."""
    found = STARTED_LINE.search(output)
    result.nodes = int(found.group(2)) if found else None
    result.phases += [line for line in output.splitlines() if line.startswith(PHASES)]


def read_runs(instance: dg.DagsterInstance, backfill_id: str, started: float, result: Measurement) -> None:
    """The backfill's node runs: how many, all succeeded, when the first started and the last ended."""
    records = instance.get_run_records(dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
    failed = [r.dagster_run.run_id for r in records if r.dagster_run.status != dg.DagsterRunStatus.SUCCESS]
    if failed or not records:
        result.problems.append(f"{len(failed)} of {len(records)} runs did not succeed")
    nodes = [r for r in records if PUBLISH_RUN_TAG not in r.dagster_run.tags]
    result.runs = len(nodes)
    published = [r.end_time for r in records if PUBLISH_RUN_TAG in r.dagster_run.tags and r.end_time]
    if published:
        result.published = max(published) - started
    starts = [r.start_time for r in nodes if r.start_time]
    ends = [r.end_time for r in nodes if r.end_time]
    if starts:
        result.first_node = min(starts) - started
    if ends:
        result.last_node = max(ends) - started


def check_materialized(instance: dg.DagsterInstance, first: str, last: str, result: Measurement) -> None:
    """The fresh instance lists exactly the days' partitions of both assets materialized."""
    for asset, keys in (("events", hours_of(first, last)), ("daily_orders", days_of(first, last))):
        materialized = instance.get_materialized_partitions(dg.AssetKey(asset))
        if materialized != set(keys):
            result.problems.append(
                f"{asset}: {len(materialized)} partitions materialized in the instance, expected {len(keys)}"
            )


def check_tables(lake: Path, first: str, last: str, result: Measurement) -> None:
    try:
        assert_tables_hold_the_days(lake, SparkResource.from_env().spark_session, first, last)
    except AssertionError as error:  # wrong data: the repeat is reported failed, the bench goes on
        result.problems.append(f"tables do not hold the generated rows of {first}..{last}: {error}"[:300])
    except TableNotFoundError as error:  # a table missing altogether
        result.problems.append(f"tables unreadable under {lake}: {error}")


def warm_up(env: dict[str, str], log) -> None:
    """One untimed CLI backfill of 1 day on a scratch instance and lake: the Spark server's
    first writes (JIT, caches) would otherwise slow whichever path the bench times first."""
    workdir = Path(tempfile.mkdtemp(prefix="webserver-bench-warm-up-"))
    try:
        log(f"warm-up (untimed): {describe(measure_cli(env, 1, workdir))}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_case(days: int, repeat: int, env: dict[str, str], timeout: float, log) -> dict[str, Measurement]:
    """One repeat of one case: a fresh `dagster dev`, the webserver and CLI backfills beside it."""
    workdir = Path(tempfile.mkdtemp(prefix=f"webserver-bench-{days}d-"))
    results = {}
    try:
        dev = DagsterDev(workdir, env=env).wait_until_ready()
        try:
            order = ["webserver", "cli"] if repeat % 2 == 0 else ["cli", "webserver"]
            for path in order:
                if path == "webserver":
                    results[path] = measure_webserver(dev, days, timeout)
                else:
                    results[path] = measure_cli(env, days, workdir)
                log(f"  {days}d repeat {repeat + 1}: {describe(results[path])}")
        finally:
            dev.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def describe(m: Measurement) -> str:
    total = f"{m.total:.1f} s" if m.total is not None else "failed"
    problems = f"; PROBLEMS: {'; '.join(m.problems)}" if m.problems else ""
    phases = f" ({'; '.join(m.phases)})" if m.phases else ""
    return (
        f"{m.path}: total {total}, first node started {at(m.first_node)}, last node ended {at(m.last_node)}, "
        f"publish run ended {at(m.published)}{phases}; {m.runs} node runs, {m.nodes} nodes{problems}"
    )


def at(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def median(values: list[float | None]) -> float | None:
    """The median of the measured values; None when a repeat has none (it failed)."""
    return None if not values or None in values else statistics.median(v for v in values if v is not None)


def seconds(value: float | None) -> str:
    return "failed" if value is None else f"{value:.1f}"


def verdict(ok: bool) -> str:
    return "met" if ok else "not met"


def report(days_measured: dict[int, list[dict[str, Measurement]]]) -> tuple[list[str], list[str], list[str]]:
    """The table rows, the goal lines and the per-repeat details."""
    rows, goals, details = [], [], []
    for days, repeats in days_measured.items():
        web = [r["webserver"] for r in repeats]
        cli = [r["cli"] for r in repeats]
        web_total, cli_total = median([m.total for m in web]), median([m.total for m in cli])
        web_first, cli_first = median([m.first_node for m in web]), median([m.first_node for m in cli])
        difference = None if web_total is None or cli_total is None else web_total - cli_total
        shown = "failed" if difference is None else f"{difference:+.1f}"
        rows.append(
            f"| {days} day{'s' if days > 1 else ''} ({web[0].nodes} nodes) | {seconds(web_total)} | "
            f"{seconds(cli_total)} | {shown} | {seconds(web_first)} | {seconds(cli_first)} | "
            f"{statistics.median(m.runs for m in web):.0f} / {statistics.median(m.runs for m in cli):.0f} |"
        )
        if days == 1:
            goals.append(
                f"1 day: webserver launch -> complete {seconds(web_total)} s (goal <= {GOAL_ONE_DAY_SECONDS:.0f} s: "
                f"{verdict(web_total is not None and web_total <= GOAL_ONE_DAY_SECONDS)})"
            )
        close = difference is not None and difference <= GOAL_DIFFERENCE_SECONDS
        goals.append(
            f"{days} day{'s' if days > 1 else ''}: webserver - CLI {shown} s "
            f"(goal <= {GOAL_DIFFERENCE_SECONDS:.0f} s: {verdict(close)})"
        )
        for index, pair in enumerate(repeats, start=1):
            for m in pair.values():
                details.append(
                    f"- {days}d repeat {index}, {describe(m)}; load {_load(m.load_before)} -> {_load(m.load_after)}"
                )
    return rows, goals, details


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, nargs="+", default=[1, 31])
    parser.add_argument("--repeats", type=int, default=1, help="measurements per case; the table shows medians")
    parser.add_argument("--spark-port", type=int, default=15113, help="the bench's own Spark Connect server")
    parser.add_argument("--timeout", type=float, default=900, help="seconds before a webserver backfill is canceled")
    parser.add_argument("--out", default=str(REPO / "bench/results/webserver.md"))
    args = parser.parse_args()

    state = Path(tempfile.mkdtemp(prefix="webserver-bench-state-"))
    env = {
        "PARTITION_ASSETS_STATE_DIR": str(state),
        "PARTITION_ASSETS_SPARK_CONNECT_PORT": str(args.spark_port),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    os.environ.update(env)  # this process's Spark session (the table checks) and every process it starts

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    uptime_before = _uptime()
    spark = SparkResource.from_env()
    server = spark.local_server()
    started_here = not server.is_running()
    server.ensure_running()
    measured: dict[int, list[dict[str, Measurement]]] = {}
    try:
        warm_up(env, log)
        for days in args.days:
            log(f"{days} days of {' + '.join(ASSETS)} from {FIRST_DAY:%Y-%m-%d}, {args.repeats} repeats")
            measured[days] = [run_case(days, repeat, env, args.timeout, log) for repeat in range(args.repeats)]
    finally:
        # Close the client first: at exit it would otherwise retry a stopped server for minutes.
        spark.spark_session.stop()
        if started_here:
            server.stop()
        shutil.rmtree(state, ignore_errors=True)
    uptime_after = _uptime()

    rows, goals, details = report(measured)
    command = " ".join(["python bench/webserver_bench.py", *sys.argv[1:]])
    lines = [
        "# Materialize range in the webserver (sparse engine) against the engine CLI",
        "",
        f"Command: `{command}` (`make bench` runs it with the defaults: `--days 1 31 --repeats 1`); "
        f"measured {datetime.now(UTC):%Y-%m-%d %H:%M UTC}.",
        "",
        f"Machine: {os.cpu_count()} cores, shared with other work; `uptime` before: `{uptime_before}`; "
        f"after: `{uptime_after}`.",
        "",
        f"`{' + '.join(ASSETS)}` from {FIRST_DAY:%Y-%m-%d}, the `make dev` setup (`dagster dev -w workspace.yaml`, "
        "the repo's dagster.yaml: EngineBackfillInstance, SQLite), a fresh DAGSTER_HOME and lake per path, case "
        "and repeat; one local Spark Connect server for the whole bench, warmed by an untimed 1-day CLI backfill; "
        "the two paths alternate which goes first from one repeat to the next. Webserver: the "
        "`launchPartitionBackfill` mutation the Materialize dialog sends, launch -> backfill COMPLETED_SUCCESS "
        f"(its status read every {POLL_SECONDS} s). CLI: `partition-assets backfill run` of the same selection and "
        "days, command start -> exit, run beside the same idle `dagster dev`. First node: -> the earliest start "
        f"time among the backfill's node runs. Medians of {args.repeats} repeat(s); every repeat checked the "
        "tables' rows and the instance's materialized partitions.",
        "",
        "| case | webserver launch -> complete s | CLI start -> exit s | difference s | "
        "webserver launch -> first node s | CLI start -> first node s | node runs (webserver / CLI) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        "Goals (issue 12): " + "; ".join(goals) + ".",
        "",
        "Per repeat:",
        "",
        *details,
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
