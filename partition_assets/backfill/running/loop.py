"""Executes a backfill graph: each node starts the moment its own upstream nodes succeed.

The loop launches the run units the scheduling core hands out (`Schedule.next_units`),
waits for the first to finish and feeds its results back (`Schedule.finish`), until
nothing is ready or running, or `should_stop()`. What to run when is the core's
decision (partition_assets/backfill/running/scheduling.py), within what `allowance()`
lets the backfill run now (capacity, pause, window: backfill/running/claims.py), asked
again at least every second; this module only runs it.
"""

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures.process import BrokenProcessPool

import dagster as dg

from partition_assets.backfill.model import Node, NodeResult, NodeStatus, RunUnit
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.running.capacity import UNLIMITED, Allowance
from partition_assets.backfill.running.scheduling import Schedule, Throttle, failed_launch_results

_log = logging.getLogger(__name__)

# Runs one unit (one run); the future gives a result per node of the unit.
Launch = Callable[[RunUnit], Future]

# How often `should_stop` is asked while runs are in flight.
STOP_POLL_SECONDS = 1.0
# How often a unit runs again after its worker process died under it; then it fails.
WORKER_LOSSES_PER_UNIT = 3


def execute(
    graph: BackfillGraph,
    launch: Launch,
    throttle: Throttle,
    done: AbstractSet[Node] = frozenset(),
    on_result: Callable[[NodeResult], None] = lambda result: None,
    newest_first: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
    batch_chains: bool = True,
    allowance: Callable[[], Allowance] = lambda: UNLIMITED,
    pools: Mapping[dg.AssetKey, str] | None = None,
    durations: Mapping[dg.AssetKey, float] | None = None,
    policy_chunks: bool = False,
) -> dict[Node, NodeStatus]:
    """Runs every node of `graph` not in `done`; returns each node's final status.

    Ready nodes heading the longest chains of work launch first, then the oldest
    partitions (with `newest_first`: the newest partitions first, whatever the chains).
    With `batch_chains`, a node of an asset that runs partition ranges
    (`AssetSlice.max_batch`) takes along the partitions that would wait anyway; with
    `policy_chunks` too, it runs in the chunks of its BackfillPolicy instead, as Dagster's
    backfill does (scheduling.py, rule 6).
    `on_result` sees every node's final result as its unit finishes: a range run that
    failed is run again in halves first (scheduling.py, rule 4), and reports nothing itself.
    A unit whose worker process died under it (killed, or its fork server killed) never
    ended: it runs again, up to WORKER_LOSSES_PER_UNIT times, then fails. When `should_stop()`
    turns true, nothing more is launched and running units are left to the caller.
    Units launch only within `allowance()` (its pool caps apply to the assets' `pools`):
    while it allows nothing, the loop waits, its runs in flight finishing. `durations`:
    seconds per node of the assets earlier runs measured (durations.recorded_seconds).
    """
    schedule = Schedule(graph, throttle, done, newest_first, batch_chains, pools, durations, policy_chunks)
    running: dict[Future, RunUnit] = {}
    lost: Counter[RunUnit] = Counter()  # how often each unit's worker died under it
    while not schedule.is_done and not should_stop():
        for unit in schedule.next_units(allowance(), time.monotonic()):
            running[launch(unit)] = unit
        if not running:  # held back (paused, outside its window, no capacity): ask again in a while
            time.sleep(STOP_POLL_SECONDS)
            continue
        finished, _ = wait(running, timeout=STOP_POLL_SECONDS, return_when=FIRST_COMPLETED)
        for future in finished:
            unit = running.pop(future)
            if _worker_lost(future) and lost[unit] < WORKER_LOSSES_PER_UNIT:
                lost[unit] += 1  # its run never ended: run it again, as `resume` would
                _log.warning("%s: its worker process died (killed?): it runs again", _describe(unit))
                running[launch(unit)] = unit
                continue
            results = _results_of(future, unit)
            final = schedule.finish(unit, results)
            if len(final) < len(results):
                _log.info(
                    "%s %s..%s failed as one run: its partitions run again in halves",
                    unit.asset.to_user_string(),
                    unit.partitions[0],
                    unit.partitions[-1],
                )
            for result in final:
                on_result(result)
    return schedule.statuses()


def _worker_lost(future: Future) -> bool:
    """Whether the unit's process died under it (killed, or its fork server killed): its run
    never ended, and the runner has other workers for it (local_workers.py)."""
    return isinstance(future.exception(), BrokenProcessPool)


def _describe(unit: RunUnit) -> str:
    first, last = unit.partitions[0], unit.partitions[-1]
    return f"{unit.asset.to_user_string()} {first}" + (f"..{last}" if last != first else "")


def _results_of(future: Future, unit: RunUnit) -> list[NodeResult]:
    try:
        return future.result()
    except Exception as error:  # the launch itself failed: every node of its run failed
        return failed_launch_results(unit, error, time.time())
