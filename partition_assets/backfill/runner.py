"""Runs backfill nodes as real Dagster runs, in worker processes that load the code once.

A `dagster` CLI run pays ~3 s of start-up per partition; a worker that keeps the
code location, the instance and its Spark session loaded pays only the run's own
bookkeeping. Every node is still a real run in the instance: visible in the
webserver, in the event log and in Dagster's partition status.
"""

import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import Any

import dagster as dg

from partition_assets.backfill.graph import Node
from partition_assets.backfill.location import load_definitions
from partition_assets.backfill.scheduling import NodeResult, RunUnit
from partition_assets.deploy.versioning import GIT_SHA_TAG, definitions_git_sha
from partition_assets.run_tags import range_tags

_worker: dict = {}


class _WorkerRecordingContext(SpawnContext):
    """The spawn context, keeping every process a pool creates with it: that pool's
    workers, and no other child of this process."""

    def __init__(self) -> None:
        super().__init__()
        self.workers: list[SpawnProcess] = []

    # The context's process factory; typeshed declares it as the class itself, hence the ignore.
    def Process(self, *args: Any, **kwargs: Any) -> SpawnProcess:  # type: ignore[override]
        worker = SpawnProcess(*args, **kwargs)
        self.workers.append(worker)
        return worker


class DagsterNodeRunner:
    """Launches run units into `workers` processes; each unit is one Dagster run, tagged
    `tags` and `unit_tags(unit)`."""

    def __init__(
        self,
        target: str,
        workers: int,
        tags: dict[str, str],
        unit_tags: Callable[[RunUnit], dict[str, str]] = lambda unit: {},
    ) -> None:
        self._tags = tags
        self._unit_tags = unit_tags
        # Create the instance's storage here, once: workers creating it at the same
        # time race on its schema migrations.
        with dg.DagsterInstance.get():
            pass
        self._context = _WorkerRecordingContext()
        self._pool = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=self._context,
            initializer=_load_worker,
            initargs=(target,),
        )

    def launch(self, unit: RunUnit) -> Future:
        """Runs `unit` as one run (a partition range when several); the future gives
        a result per node of the unit."""
        tags = {**self._tags, **self._unit_tags(unit)}
        return self._pool.submit(_run_unit, unit.asset.to_user_string(), list(unit.partitions), tags)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def terminate(self) -> None:
        """Kills this runner's workers, and with them its runs in flight; other child
        processes (another pool's, a Spark server's) are left alone."""
        # SIGKILL: a worker inside a Dagster run handles SIGTERM and would finish its run.
        for worker in list(self._context.workers):
            worker.kill()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "DagsterNodeRunner":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _load_worker(target: str) -> None:
    definitions = load_definitions(target)
    _worker["job"] = definitions.resolve_implicit_global_asset_job_def()
    sha = definitions_git_sha(definitions)
    _worker["tags"] = {GIT_SHA_TAG: sha} if sha else {}
    _worker["instance"] = dg.DagsterInstance.get()


def _run_unit(asset: str, partitions: list[str], tags: dict[str, str]) -> list[NodeResult]:
    key = dg.AssetKey.from_user_string(asset)
    if len(partitions) > 1:
        tags = {**tags, **range_tags(partitions[0], partitions[-1])}
    started = time.time()
    result = _worker["job"].execute_in_process(
        instance=_worker["instance"],
        asset_selection=[key],
        partition_key=(partitions[0] or None) if len(partitions) == 1 else None,
        tags={**tags, **_worker["tags"]},
        raise_on_error=False,
    )
    error = None
    if not result.success:
        failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
        error = failures[0].event_specific_data.error.message if failures else "run failed"
    ended = time.time()
    return [NodeResult(Node(key, p), result.success, result.run_id, started, ended, error) for p in partitions]
