"""A generated shape launched as the webserver's *Materialize range* launches it, onto the warm
standby coordinator: what a backfill costs beyond the bound when no process starts for it.

`measure_warm_launch` serves the shape's code location with `dagster dev` (webserver, daemon,
code server) on a fresh SQLite instance whose UI backfills of that location run on the sparse
engine, with no slot kept for production runs (`reserve_runs: 0`, as the whole-command rows).
It waits until the webserver's standby coordinator (processes/coordinators.py) has imported
Dagster, the engine and the location and started its workers, then sends the
`launchPartitionBackfill` mutation the UI's Materialize dialog sends, for every planned
(asset, partition) pair, and times from just before the mutation was sent to:
- the first node run's start and the last node run's end (the instance's run records);
- the backfill's final status: its end time, which the coordinator writes after the gate and
  the publish (backfill/dagster_ui/mirror.py).

Not guaranteed: the webserver, the daemon and the code server run beside the backfill (as in a
deployment), and the status is polled every half second (the end time itself is the
coordinator's stamp, not the poll's). Runs another process creates in the instance meanwhile
would be counted (nothing else uses it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
from dagster_backfill import FINISHED, backfill_params, launch_backfill, materialized_count, planned_keys

from bench.dag_shapes import SEED_ENV, Shape, definitions
from partition_assets.backfill.publishing.dagster_events import PUBLISH_RUN_TAG
from partition_assets.dagster_instance.daemon_filter import DAGSTER, ENGINE_TAG
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.webserver import DagsterDev

REPO = Path(__file__).resolve().parents[1]
# The generated shapes' code location, as a module the standby coordinator imports by name.
LOCATION_MODULE = "bench.shape_location"
# Seconds a launched backfill may take before the measurement gives up on it.
TIMEOUT = 600


@dataclass
class WarmLaunch:
    first_run_after: float | None  # launch -> first node run started
    last_node_run_ended_after: float | None  # launch -> last node run ended
    completed_after: float | None  # launch -> the backfill's final status written (gate and publish done)
    status: str  # the Dagster backfill's final status
    runs: int  # node runs and, when it publishes, the publish run
    run_statuses: dict[str, int]
    materialized: int  # planned (asset, partition) pairs materialized
    targeted: int
    standby_ready_after: float  # `dagster dev` start -> standby ready (not timed in the figures)
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]

    @property
    def all_succeeded(self) -> bool:
        return self.status == "COMPLETED_SUCCESS" and self.materialized == self.targeted

    def split(self) -> str:
        """`start-up / nodes / gate+publish` in seconds, for a results table."""
        first, last, done = self.first_run_after, self.last_node_run_ended_after, self.completed_after
        if first is None or last is None or done is None:
            return "n/a"
        return f"{first:.1f} / {last - first:.1f} / {done - last:.1f}"

    def details(self) -> str:
        runs = ", ".join(f"{n} {s}" for s, n in sorted(self.run_statuses.items())) or "none"
        load = " -> ".join("/".join(f"{x:.1f}" for x in loads) for loads in (self.load_before, self.load_after))
        return (
            f"backfill {self.status}; {self.runs} runs ({runs}); {self.materialized} of {self.targeted} materialized; "
            f"standby ready {self.standby_ready_after:.0f} s after `dagster dev` started; load {load}"
        )


def measure_warm_launch(seed: int, shape: Shape, slots: int, log=print) -> WarmLaunch:
    """Launches every planned node of `shape` (generated from `seed`) from the webserver onto
    its warm standby coordinator with `slots` runs at a time; times it (module docstring)."""
    defs = definitions(shape)
    keys = planned_keys(defs, shape.days)
    root = Path(tempfile.mkdtemp(prefix="warm-launch-bench-"))
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    dev = DagsterDev(
        root,
        module=LOCATION_MODULE,
        env={SEED_ENV: str(seed), "PYTHONPATH": pythonpath},
        engine_modules=[LOCATION_MODULE],
        backfills={"max_runs": slots, "reserve_runs": 0},
    )
    try:
        dev.wait_until_ready()
        ready_after = dev.wait_for_standby()
        with dev.open_instance() as instance:
            load_before = os.getloadavg()
            launched = time.time()
            backfill_id = launch_backfill(dev.graphql, backfill_params(keys, f"warm launch seed {seed}", defs))
            log(f"  warm launch: backfill {backfill_id} launched from the webserver")

            def final():
                """the launched backfill's final status"""
                backfill = instance.get_backfill(backfill_id)
                if backfill is not None and backfill.tags.get(ENGINE_TAG) == DAGSTER:
                    raise RuntimeError(f"backfill {backfill_id} was handed back to Dagster's daemon; see {dev.home}")
                return backfill if backfill is not None and backfill.status.value in FINISHED else None

            backfill = wait_for(final, TIMEOUT, step=0.5, alive=[dev.process])
            records = instance.get_run_records(dg.RunsFilter(created_after=datetime.fromtimestamp(launched, UTC)))
            node_records = [r for r in records if PUBLISH_RUN_TAG not in r.dagster_run.tags]
            starts = [r.start_time for r in node_records if r.start_time]
            ends = [r.end_time for r in node_records if r.end_time]
            result = WarmLaunch(
                first_run_after=min(starts) - launched if starts else None,
                last_node_run_ended_after=max(ends) - launched if ends else None,
                completed_after=backfill.backfill_end_timestamp - launched if backfill.backfill_end_timestamp else None,
                status=backfill.status.value,
                runs=len(records),
                run_statuses=dict(Counter(r.dagster_run.status.value for r in records)),
                materialized=materialized_count(instance, keys),
                targeted=sum(map(len, keys.values())),
                standby_ready_after=ready_after,
                load_before=load_before,
                load_after=os.getloadavg(),
            )
    finally:
        dev.stop()
        shutil.rmtree(root, ignore_errors=True)
    log(f"  warm launch: {result.split()} s (start-up / nodes / gate+publish); {result.details()}")
    return result
