"""The backfill page of a 100,000-node backfill, through the webserver's GraphQL, while it
progresses (issue 27, point 3: loads in <= 3 s, progress current within 2 s).

On a fresh DAGSTER_HOME (the repo's dagster.yaml, no engine modules: nothing adopts UI
backfills) `dagster dev` serves the generated lineage (bench/lineage_defs.py, ASSETS assets).
This process plans a DAYS-day cascade of its 20 roots with `--downstream` (2,000 assets x
46 days: 102,120 nodes) and runs the real Dagster backfill mirror
(`DagsterBackfillMirror`) on that instance, fed by a fake progress source instead of a
coordinator: node runs launched and succeeded asset by asset in topological order, in run
units of UNIT partitions, at RATE nodes a second. Meanwhile it sends the query the
webserver's backfill page sends (`BackfillDetailsQuery`, copied from Dagster's UI bundle
with its fragments) every POLL seconds and times:
- page load: the first query after the backfill exists (the webserver's first read of it
  and of the asset graph), then every query's latency while progress is written;
- staleness: for each answer, how long before the query was sent the source had reported
  the first success the answer does not count yet (0 when it counts all);
- the mirror's ticks (each poll of its thread, `_poll_once`, timed as it happens), median
  and largest.

Usage: python bench/ui_scale_bench.py [--assets 2000] [--days 46] [--rate 1000]
           [--seconds 30] (prints one JSON line; bench/scale_bench.py --ui reports it)

Not guaranteed: the browser's own rendering is not timed (the page polls this query every
10 s while the backfill runs, Dagster's own interval); the rate is far above what real
runs of this lineage would reach, so the ticks carry more than a real backfill's.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

# This checkout's package, bench modules and test helpers, even when the installed package is another work tree's.
sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).resolve().parents[1])]

from lineage_bench import LINEAGE, cascade_spec, timed_mirror_polls
from lineage_defs import ASSETS_ENV

from partition_assets_tests.support.scale import json_of_fresh_process
from partition_assets_tests.support.webserver import DagsterDev

REPO = Path(__file__).resolve().parents[1]
UNIT = 10  # partitions a fake run unit holds
POLL = 0.5  # seconds between two page queries

# The backfill page's query (Dagster 1.13's UI: BackfillDetailsQuery and the fragments it spreads).
PAGE_QUERY = """query BackfillDetailsQuery($backfillId: String!) {
  partitionBackfillOrError(backfillId: $backfillId) {
    ...BackfillDetailsBackfillFragment
    ...PythonErrorFragment
    ... on BackfillNotFoundError { message }
  }
}
fragment BackfillDetailsBackfillFragment on PartitionBackfill {
  id status timestamp endTimestamp numPartitions
  ...BackfillActionsBackfillFragment
  isAssetBackfill
  assetSelection { path }
  partitionSetName
  error { ...PythonErrorFragment }
  assetBackfillData { ...AssetBackfillDetailsFragment }
  partitionStatuses { ...JobBackfillDetailsFragment }
}
fragment BackfillActionsBackfillFragment on PartitionBackfill {
  id hasCancelPermission hasResumePermission isAssetBackfill status
  ...BackfillStepStatusDialogBackfillFragment
  ...BackfillTerminationDialogBackfillFragment
}
fragment BackfillStepStatusDialogBackfillFragment on PartitionBackfill {
  id partitionNames
  partitionSet { id mode name pipelineName repositoryOrigin { id repositoryName repositoryLocationName } }
}
fragment BackfillTerminationDialogBackfillFragment on PartitionBackfill { id status isAssetBackfill }
fragment AssetBackfillDetailsFragment on AssetBackfillData {
  rootTargetedPartitions { partitionKeys ranges { start end } }
  assetBackfillStatuses {
    ... on AssetPartitionsStatusCounts {
      assetKey { path } numPartitionsTargeted numPartitionsInProgress numPartitionsMaterialized numPartitionsFailed
    }
    ... on UnpartitionedAssetStatus { assetKey { path } inProgress materialized failed }
  }
}
fragment JobBackfillDetailsFragment on PartitionStatuses {
  results { id partitionName runId runStatus runDuration }
}
fragment PythonErrorFragment on PythonError {
  message stack errorChain { isExplicitLink error { message stack } }
}"""


class FakeProgress(threading.Thread):
    """Reports the graph's nodes launched and succeeded to `mirror`, a run unit at a time, at
    `rate` nodes a second; `reported` holds (time, successes so far) after each unit."""

    def __init__(self, mirror, graph, rate: float) -> None:
        super().__init__(daemon=True)
        self._mirror, self._graph, self._rate = mirror, graph, rate
        self.reported: list[tuple[float, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        from partition_assets.backfill.model import NodeResult, RunUnit

        started, done = time.monotonic(), 0
        for asset, asset_slice in self._graph.slices.items():
            keys = asset_slice.partition_keys
            for first in range(0, len(keys), UNIT):
                if self.stop.is_set():
                    return
                unit = RunUnit(asset, tuple(keys[first : first + UNIT]))
                self._mirror.launched(unit)
                for node in unit.nodes:
                    self._mirror.finished(NodeResult(node, True, "fake", 0.0, 0.0))
                done += len(unit.partitions)
                self.reported.append((time.monotonic(), done))
                self.stop.wait(max(0.0, started + done / self._rate - time.monotonic()))


def staleness(reported: list[tuple[float, int]], sent: float, shown: int) -> float:
    """Seconds between the first success reported that an answer to a query sent at `sent`
    does not count (it shows `shown`) and the query; 0 when it counts every one reported."""
    counts = [count for _, count in reported]
    first_missing = bisect.bisect_right(counts, shown)
    if first_missing == len(reported) or reported[first_missing][0] >= sent:
        return 0.0
    return sent - reported[first_missing][0]


def materialized_shown(answer: dict) -> int:
    statuses = answer["partitionBackfillOrError"]["assetBackfillData"]["assetBackfillStatuses"]
    return sum(status.get("numPartitionsMaterialized") or int(bool(status.get("materialized"))) for status in statuses)


def measure(assets: int, days: int, rate: float, seconds: float) -> dict:
    root = Path(tempfile.mkdtemp(prefix="ui-scale-"))
    env = {ASSETS_ENV: str(assets), "PYTHONPATH": os.pathsep.join([str(REPO / "bench"), str(REPO)])}
    dev = DagsterDev(root, module="lineage_defs", env=env, engine_modules=[])
    try:
        os.environ.update({**dev.instance_env, **env, "PARTITION_ASSETS_LAKE": str(dev.lake)})
        return _measure_with(dev, assets, days, rate, seconds)
    finally:
        dev.stop()
        shutil.rmtree(root, ignore_errors=True)


def _measure_with(dev: DagsterDev, assets: int, days: int, rate: float, seconds: float) -> dict:
    from partition_assets.backfill.dagster_ui import mirror
    from partition_assets.backfill.planning.instance_state import graph_of
    from partition_assets.backfill.state.record import BackfillRecord
    from partition_assets.backfill.state.store import BackfillStore
    from partition_assets.code_location import load_definitions

    ticks = timed_mirror_polls()
    asset_graph = load_definitions(LINEAGE).resolve_asset_graph()
    spec = cascade_spec(assets, days)
    with dev.open_instance() as instance:
        began = time.perf_counter()
        graph = graph_of(spec, instance)
        plan_seconds = time.perf_counter() - began
        dev.wait_until_ready(timeout=600)
        record = BackfillRecord(spec, store=BackfillStore(instance))
        record.save()
        began = time.perf_counter()
        with mirror.DagsterBackfillMirror(record, graph, asset_graph, instance, done=()) as mirrored:
            create_seconds = time.perf_counter() - began
            began = time.perf_counter()
            dev.graphql(PAGE_QUERY, {"backfillId": record.id})
            first_load = time.perf_counter() - began
            source = FakeProgress(mirrored, graph, rate)
            source.start()
            latencies, stale = [], []
            ended = time.monotonic() + seconds
            while time.monotonic() < ended:
                sent = time.monotonic()
                answer = dev.graphql(PAGE_QUERY, {"backfillId": record.id})
                latencies.append(time.monotonic() - sent)
                stale.append(staleness(source.reported, sent, materialized_shown(answer)))
                time.sleep(max(0.0, sent + POLL - time.monotonic()))
            source.stop.set()
            source.join()
            progress_ticks = list(ticks)
    return {
        "assets": assets,
        "planned_assets": len(graph.assets),
        "nodes": graph.node_count(),
        "plan_seconds": plan_seconds,
        "create_seconds": create_seconds,
        "rate": rate,
        "reported": source.reported[-1][1] if source.reported else 0,
        "first_load_seconds": first_load,
        "queries": len(latencies),
        "load_median_seconds": statistics.median(latencies),
        "load_max_seconds": max(latencies),
        "stale_median_seconds": statistics.median(stale),
        "stale_max_seconds": max(stale),
        "ticks": len(progress_ticks),
        "tick_median_ms": 1000 * statistics.median(wall for wall, _ in progress_ticks),
        "tick_max_ms": 1000 * max(wall for wall, _ in progress_ticks),
    }


def measure_in_fresh_process(assets: int, days: int) -> dict:
    """`measure` with the default rate and duration, in a new process (its own environment)."""
    command = [sys.executable, "-W", "ignore", str(Path(__file__)), "--assets", str(assets), "--days", str(days)]
    return json_of_fresh_process(command)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--assets", type=int, default=2000)
    parser.add_argument("--days", type=int, default=46)
    parser.add_argument("--rate", type=float, default=1000.0, help="nodes reported succeeded a second")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the page is queried")
    args = parser.parse_args()
    print(json.dumps(measure(args.assets, args.days, args.rate, args.seconds)))


if __name__ == "__main__":
    main()
