"""Dagster's own asset backfill, run by its daemon, on the engine bench DAG.

Starts `dagster dev` (webserver + daemon + code server) on a temporary DAGSTER_HOME
whose run queue allows `slots` concurrent runs, launches the backfill with the
GraphQL mutation the UI's "Materialize" dialog uses (`launchPartitionBackfill`,
one partition range per asset), polls `partitionBackfillOrError` until the backfill
is complete and reads the runs and materializations back from the instance.

Nothing in Dagster is patched or tuned: the backfill daemon ticks every 30 s
(`DEFAULT_DAEMON_INTERVAL_SECONDS`, not configurable), the run queue dequeues every
5 s (the default) and each run is a subprocess launched by the default run launcher.

Usage: python bench/dagster_backfill.py [--days 31] [--policy none|single_run]
           [--slots 4] [--timeout 1500] [--file bench/engine_dag.py]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

# This checkout's package and bench modules, even when the installed package is another work tree's.
sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).resolve().parents[1])]
import dagster as dg
import engine_dag

from partition_assets.backfill.planning.graph import build_graph
from partition_assets.backfill.planning.spec import TimeRange
from partition_assets.code_location import load_definitions

REPO = Path(__file__).resolve().parents[1]
DAGSTER = str(Path(sys.executable).parent / "dagster")
DAG_FILE = str(Path(engine_dag.__file__).resolve())
START = datetime(2024, 1, 1, tzinfo=UTC)
FINISHED = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}

LAUNCH = """
mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on Error { message }
  }
}"""
POLL = """
query Poll($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    __typename
    ... on PartitionBackfill { status timestamp endTimestamp }
    ... on Error { message }
  }
}"""
CANCEL = """
mutation Cancel($id: String!) {
  cancelPartitionBackfill(backfillId: $id) { __typename ... on Error { message } }
}"""
READY = """
{
  workspaceOrError { __typename ... on Workspace { locationEntries { name loadStatus
    locationOrLoadError { __typename ... on PythonError { message } } } } }
  instance { daemonHealth { allDaemonStatuses { daemonType healthy required } } }
}"""


@dataclass
class DaemonResult:
    days: int
    policy: str
    slots: int
    targeted: int  # (asset, partition) pairs the backfill covers
    finished: bool  # the backfill reached a final status before the timeout
    status: str
    timeout: float
    makespan: float | None = None  # launch -> last run ended (all data written)
    completed_after: float | None = None  # launch -> backfill status final (seen by the next daemon tick)
    elapsed: float = 0.0  # launch -> end of the measurement (timeout or completion)
    materialized: int = 0  # targeted (asset, partition) pairs materialized by the end of the measurement
    runs: int = 0
    run_statuses: dict[str, int] = field(default_factory=dict)
    median_run_seconds: float | None = None  # run start -> end
    median_run_overhead: float | None = None  # run start -> end minus its simulated work
    median_queue_wait: float | None = None  # run created -> started
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    note: str = ""

    @property
    def all_succeeded(self) -> bool:
        return self.finished and self.run_statuses.get("SUCCESS", 0) == self.runs and self.materialized == self.targeted

    def summary(self) -> str:
        if self.finished:
            head = (
                f"{self.makespan:.1f} s to the last run's end, {self.completed_after:.1f} s to backfill {self.status}"
            )
        else:
            head = (
                f"did not finish in {self.timeout:.0f} s: {self.materialized} of {self.targeted} "
                f"partitions materialized"
            )
        runs = ", ".join(f"{n} {s}" for s, n in sorted(self.run_statuses.items()))
        return f"{head}; {self.runs} runs ({runs or 'none'})"

    def makespan_cell(self) -> str:
        """The makespan, or `> timeout` when the backfill did not finish."""
        return f"{self.makespan:.1f}" if self.finished else f"> {self.timeout:.0f}"

    def details(self) -> str:
        """Runs, final status, completeness and load, for a results table's details column."""
        runs = ", ".join(f"{n} {s}" for s, n in sorted(self.run_statuses.items())) or "none"
        if self.finished:
            outcome = f"backfill {self.status} after {self.completed_after:.1f} s"
        else:
            outcome = f"did not finish in {self.timeout:.0f} s, canceled"
        load = " -> ".join("/".join(f"{x:.1f}" for x in loads) for loads in (self.load_before, self.load_after))
        return f"{self.runs} runs ({runs}); {outcome}; {self.materialized} of {self.targeted} materialized; load {load}"


def planned_keys(defs: dg.Definitions, days: int, selection=None) -> dict[str, list[str]]:
    """Partition keys per asset: the (asset, partition) nodes the engine plans for `selection`
    (default: every asset) over `days` days from START, i.e. 2024-01-01 .. +days-1 and, for
    coarser grains (monthly), every partition overlapping that range."""
    asset_graph = defs.resolve_asset_graph()
    graph = build_graph(
        asset_graph, selection or asset_graph.get_all_asset_keys(), TimeRange(START, START + timedelta(days=days))
    )
    keys: dict[str, list[str]] = defaultdict(list)
    for node in graph.nodes():
        keys[node.asset.to_user_string()].append(node.partition)
    return dict(keys)


def backfill_params(keys: dict[str, list[str]], title: str, defs: dg.Definitions | None = None) -> dict:
    """`partitionsByAssets`: per time-partitioned asset, one range per contiguous run of its keys
    (one range for a whole period; daily and monthly assets differ in grain; scattered days are
    one range each), one single-key range per partition of any other asset (static, multi-dimensional)."""
    asset_graph = (defs or engine_dag.defs).resolve_asset_graph()

    def ranges(asset: str, partitions: list[str]) -> list[dict]:
        partitions_def = asset_graph.get(dg.AssetKey.from_user_string(asset)).partitions_def
        if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
            subset = partitions_def.subset_with_partition_keys(partitions)
            return [{"start": r.start, "end": r.end} for r in subset.get_partition_key_ranges(partitions_def)]
        return [{"start": key, "end": key} for key in partitions]

    return {
        "title": title,
        "partitionsByAssets": [
            {"assetKey": {"path": asset.split("/")}, "partitions": {"ranges": ranges(asset, partitions)}}
            for asset, partitions in keys.items()
            if partitions
        ],
    }


def launch_backfill(query: Callable[[str, dict], dict], params: dict) -> str:
    """Sends the `launchPartitionBackfill` mutation with `params` through `query` (a GraphQL
    client's request: text, variables -> data); the launched backfill's id. RuntimeError
    when the webserver answers anything but a launch."""
    launch = query(LAUNCH, {"params": params})["launchPartitionBackfill"]
    if launch["__typename"] != "LaunchBackfillSuccess":
        raise RuntimeError(f"launchPartitionBackfill: {launch}")
    return launch["backfillId"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DagsterDev:
    """`dagster dev <target>` (`-f file` or `-m module`) on a fresh DAGSTER_HOME.

    Stopped, with all its children, on exit.
    """

    def __init__(self, target: list[str], slots: int, env: dict[str, str], workdir: Path) -> None:
        self.home = workdir / "dagster_home"
        self.home.mkdir(parents=True)
        (self.home / "dagster.yaml").write_text(
            f"telemetry:\n  enabled: false\nconcurrency:\n  runs:\n    max_concurrent_runs: {slots}\n"
        )
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/graphql"
        self.log_path = workdir / "dagster_dev.log"
        self._log = open(self.log_path, "wb")
        pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [DAGSTER, "dev", *target, "-h", "127.0.0.1", "-p", str(self.port)],
            cwd=REPO,
            env={**os.environ, **env, "DAGSTER_HOME": str(self.home), "PYTHONPATH": pythonpath},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def __enter__(self) -> DagsterDev:
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def query(self, text: str, variables: dict | None = None, timeout: float = 60) -> dict:
        body = json.dumps({"query": text, "variables": variables or {}}).encode()
        request = urllib.request.Request(self.url, body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = json.load(response)
        if answer.get("errors"):
            raise RuntimeError(f"GraphQL errors: {answer['errors']}")
        return answer["data"]

    def wait_ready(self, timeout: float = 240) -> None:
        """Until the code location is loaded and the backfill and run-queue daemons are healthy."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dagster dev exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                data = self.query(READY, timeout=10)
            except (urllib.error.URLError, ConnectionError, TimeoutError, RuntimeError) as error:
                last = str(error)
                time.sleep(1)
                continue
            entries = data["workspaceOrError"].get("locationEntries") or []
            loaded = entries and all(e["loadStatus"] == "LOADED" for e in entries)
            errors = [
                e["locationOrLoadError"]
                for e in entries
                if e["locationOrLoadError"] and e["locationOrLoadError"]["__typename"] == "PythonError"
            ]
            if errors:
                raise RuntimeError(f"code location failed to load: {errors[0]['message']}")
            healthy = {d["daemonType"]: d["healthy"] for d in data["instance"]["daemonHealth"]["allDaemonStatuses"]}
            last = f"locations {entries}, daemons {healthy}"
            if loaded and healthy.get("BACKFILL") and healthy.get("QUEUED_RUN_COORDINATOR"):
                return
            time.sleep(1)
        raise TimeoutError(f"dagster dev not ready after {timeout:.0f} s ({last}):\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # dagster dev shuts its webserver, daemon and code server down
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        try:  # whatever is left of its process group (run workers included)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self._log.close()


def materialized_count(instance: dg.DagsterInstance, keys: dict[str, list[str]]) -> int:
    return sum(
        len(instance.get_materialized_partitions(dg.AssetKey.from_user_string(asset)) & set(partitions))
        for asset, partitions in keys.items()
    )


def run_work(record, keys: dict[str, list[str]], work=engine_dag.work_seconds) -> float | None:
    """Simulated work of a run that covers one asset (a partition or a range of it)."""
    run = record.dagster_run
    assets = [key.to_user_string() for key in (run.asset_selection or [])]
    if len(assets) != 1:
        return None
    partitions = keys[assets[0]]
    tags = run.tags
    if "dagster/partition" in tags:
        chosen = [tags["dagster/partition"]]
    elif "dagster/asset_partition_range_start" in tags:
        first = partitions.index(tags["dagster/asset_partition_range_start"])
        last = partitions.index(tags["dagster/asset_partition_range_end"])
        chosen = partitions[first : last + 1]
    else:
        return None
    return sum(work(assets[0], p) for p in chosen)


def measure(
    days: int, policy: str, slots: int = 4, timeout: float = 1500, dag_file: str = DAG_FILE, progress=print
) -> DaemonResult:
    """Launch Dagster's asset backfill of the engine bench DAG over `days` days through its daemon."""
    defs = engine_dag.defs if dag_file == DAG_FILE else load_definitions(dag_file)
    return run_daemon_backfill(
        ["-f", dag_file],
        {"ENGINE_DAG_BACKFILL_POLICY": policy},
        defs,
        planned_keys(defs, days),
        days=days,
        policy=policy,
        slots=slots,
        timeout=timeout,
        progress=progress,
        work=engine_dag.work_seconds,
    )


def run_daemon_backfill(
    target: list[str],
    env: dict[str, str],
    defs: dg.Definitions,
    keys: dict[str, list[str]],
    *,
    days: int,
    policy: str,
    slots: int,
    timeout: float,
    progress=print,
    work=None,
) -> DaemonResult:
    """`dagster dev <target>` with `env`; backfill `keys` through the daemon; time it.

    `work(asset, partition)`, if given, is the simulated work of a partition, for the
    per-run overhead.
    """
    result = DaemonResult(
        days=days,
        policy=policy,
        slots=slots,
        targeted=sum(map(len, keys.values())),
        finished=False,
        status="",
        timeout=timeout,
        load_before=os.getloadavg(),
    )
    workdir = Path(tempfile.mkdtemp(prefix="dagster-daemon-bench-"))
    try:
        with DagsterDev(target, slots, env, workdir) as dev:
            instance = dg.DagsterInstance.from_config(str(dev.home))
            launched = time.time()
            backfill_id = launch_backfill(dev.query, backfill_params(keys, f"bench {days}d {policy}", defs))
            progress(
                f"  dagster daemon {days}d {policy}: backfill {backfill_id} launched "
                f"({result.targeted} partitions), timeout {timeout:.0f} s"
            )
            last_report = time.monotonic()
            while True:
                backfill = dev.query(POLL, {"id": backfill_id})["partitionBackfillOrError"]
                if backfill["__typename"] != "PartitionBackfill":
                    raise RuntimeError(f"partitionBackfillOrError: {backfill}")
                result.status = backfill["status"]
                now = time.time()
                if result.status in FINISHED:
                    result.finished = True
                    result.completed_after = now - launched
                    break
                if now - launched > timeout:
                    break
                if time.monotonic() - last_report > 60:
                    last_report = time.monotonic()
                    progress(
                        f"    {now - launched:.0f} s: {materialized_count(instance, keys)} of "
                        f"{result.targeted} materialized"
                    )
                time.sleep(1)
            result.elapsed = time.time() - launched
            result.materialized = materialized_count(instance, keys)
            if not result.finished:
                dev.query(CANCEL, {"id": backfill_id})
                result.note = "canceled at the timeout"
            records = instance.get_run_records(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
            result.runs = len(records)
            statuses: dict[str, int] = defaultdict(int)
            for record in records:
                statuses[record.dagster_run.status.value] += 1
            result.run_statuses = dict(statuses)
            ended = [r.end_time for r in records if r.end_time]
            if result.finished and ended:
                result.makespan = max(ended) - launched
            done = [r for r in records if r.start_time and r.end_time]
            if done:
                result.median_run_seconds = statistics.median(r.end_time - r.start_time for r in done)
                result.median_queue_wait = statistics.median(
                    r.start_time - r.create_timestamp.timestamp() for r in done
                )
                overheads = [
                    r.end_time - r.start_time - w for r in done if work and (w := run_work(r, keys, work)) is not None
                ]
                if overheads:
                    result.median_run_overhead = statistics.median(overheads)
            instance.dispose()
    finally:
        result.load_after = os.getloadavg()
        shutil.rmtree(workdir, ignore_errors=True)
    progress(f"  dagster daemon {days}d {policy}: {result.summary()}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=31)
    parser.add_argument("--policy", choices=["none", "single_run"], default="single_run")
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=1500)
    parser.add_argument("--file", default=DAG_FILE)
    args = parser.parse_args()
    result = measure(args.days, args.policy, args.slots, args.timeout, str(Path(args.file).resolve()))
    print(json.dumps({**result.__dict__, "all_succeeded": result.all_succeeded}, indent=2))


if __name__ == "__main__":
    main()
