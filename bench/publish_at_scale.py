"""The publish of a large staged backfill, measured with the whole backfill in the same
call: the example's hourly `events` + daily `daily_orders` over 40, 120 and 365 days
(1,000 / 3,000 / 9,125 nodes).

Each size runs in a fresh process on a fresh DAGSTER_HOME, lake and state folder: plan,
then the real coordinator (`BackfillRun`, staged: engine loop, record, leases, Dagster
backfill mirror, gate, publish) with `RecordingRunner`, whose runs succeed as they are
launched and are stored in the instance as the engine's runs would be (tags, asset,
partition or range, status SUCCESS). The publish then does its real Dagster work for every
node: reading the node states and each run's outputs, and recording a materialization per
node in its publish run. It is timed apart (wall and CPU), with the SQL statements it sent
to the instance.

Usage: python bench/publish_at_scale.py [--days 40 120 365]
       (prints one JSON line per size; bench/scale_bench.py --publish-days reports them)

Not guaranteed: nothing runs Spark, so no table has staged files: the publish's Delta
commits and file moves are not in these figures (bench/results/storage.md measures a
1,000-file publish commit), nor are ledger rows (the gate finds no staged partition).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from types import MappingProxyType

import dagster as dg

# This checkout's package and test helpers, even when the installed package is another work tree's.
sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from partition_assets.backfill.model import RunUnit
from partition_assets.run_tags import PARTITION_TAG, range_tags
from partition_assets_tests.support.scale import Clocks, ImmediateRunner, example_spec, json_of_fresh_process

REPO = Path(__file__).resolve().parents[1]


class RecordingRunner(ImmediateRunner):
    """`ImmediateRunner` whose runs are also stored in `instance`, succeeded, tagged as the
    engine tags a node run (`tags`, and the unit's partition or range)."""

    def __init__(self, instance: dg.DagsterInstance, tags: Mapping[str, str]) -> None:
        super().__init__()
        self.instance = instance
        self.tags = dict(tags)

    def launch(self, unit: RunUnit, unit_tags: Mapping[str, str] = MappingProxyType({})) -> Future:
        first, last = unit.partitions[0], unit.partitions[-1]
        partition = range_tags(first, last) if len(unit.partitions) > 1 else {PARTITION_TAG: first}
        self.instance.add_run(
            dg.DagsterRun(
                job_name="__ASSET_JOB",
                run_id=str(uuid.uuid4()),
                status=dg.DagsterRunStatus.SUCCESS,
                tags={**self.tags, **unit_tags, **partition},
                asset_selection=frozenset({unit.asset}),
            )
        )
        return super().launch(unit, unit_tags)


def measure(days: int) -> dict:
    """Plans and runs `example_spec(days)` with `RecordingRunner`, timing its publish apart."""
    from partition_assets.backfill.dagster_ui.view import WEBSERVER
    from partition_assets.backfill.planning.instance_state import graph_of
    from partition_assets.backfill.publishing import stages
    from partition_assets.backfill.running.coordinator import BackfillRun
    from partition_assets.backfill.state.record import BackfillRecord
    from partition_assets.backfill.state.store import BackfillStore
    from partition_assets_tests.support.publish_stages import watched_stages

    spec = example_spec(days)
    publish_cost = {"statements": 0}
    began_publish: list[Clocks] = []

    def count(*_: object) -> None:
        publish_cost["statements"] += 1

    def ended() -> None:
        after = Clocks.now()
        publish_cost.update(seconds=after.wall - began_publish[0].wall, cpu_seconds=after.cpu - began_publish[0].cpu)

    # The publish, timed apart: its stages from the table commits to the status published.
    stages.PUBLISH_STAGES = watched_stages(count, lambda: began_publish.append(Clocks.now()), ended)
    with dg.DagsterInstance.get() as instance:
        began = time.perf_counter()
        graph = graph_of(spec, instance)
        plan_seconds = time.perf_counter() - began
        record = BackfillRecord(spec, store=BackfillStore(instance))
        runners: list[RecordingRunner] = []

        def runner_of(_spec: object, tags: dict[str, str], of: dg.DagsterInstance) -> RecordingRunner:
            runners.append(RecordingRunner(of, tags))
            return runners[-1]

        before = Clocks.now()
        status = BackfillRun(instance, record, graph, set(), runner_of=runner_of, dagster_view=WEBSERVER).run()
        after = Clocks.now()
        recorded = sum(len(instance.get_materialized_partitions(asset)) for asset in graph.assets)
    return {
        "days": days,
        "nodes": graph.node_count(),
        "succeeded": sum(1 for state in status.values() if state.value == "succeeded"),
        "runs": sum(runner.units for runner in runners),
        "materialized_partitions": recorded,
        "plan_seconds": plan_seconds,
        "backfill_seconds": after.wall - before.wall,
        "backfill_cpu_seconds": after.cpu - before.cpu,
        "publish_seconds": publish_cost.get("seconds", 0.0),
        "publish_cpu_seconds": publish_cost.get("cpu_seconds", 0.0),
        "publish_statements": publish_cost["statements"],
    }


def measure_in_fresh_process(days: int) -> dict:
    """`measure` in a new process on a new DAGSTER_HOME, lake and state folder (deleted after)."""
    command = [sys.executable, "-W", "ignore", str(Path(__file__)), "--measure", str(days)]
    return json_of_fresh_process(command)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, nargs="+", default=[40, 120, 365])
    parser.add_argument("--measure", type=int, help="measure this many days in this process (its environment fresh)")
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    for days in args.days:
        print(json.dumps(measure_in_fresh_process(days)), flush=True)


if __name__ == "__main__":
    main()
