"""Runs backfill nodes through the instance's run coordinator and run launcher (`--runs-via launcher`).

Each run unit becomes one run of the code location's implicit asset job, with the
unit's asset as its selection and its partition (or partition range) as tags, created
against a code server this runner starts for the location (Dagster's own gRPC server,
as `dagster job launch` uses) and handed to `instance.submit_run`: the configured run
coordinator queues or launches it, the configured run launcher executes it (in a
subprocess with the DefaultRunLauncher; Docker, Kubernetes or ECS with theirs). A
polling thread follows the submitted runs in the run storage and completes each unit's
future with a result per node once its run finishes, so the engine (order, throttle,
retry, resume) is the same as with local workers.

Not guaranteed: a run the QueuedRunCoordinator queues starts only while
`dagster-daemon` runs, and the engine counts it as running meanwhile (a backfill
without a daemon waits). A run's own process must reach the same instance, lake and
Spark as the coordinator. Terminating a run is what the launcher's `terminate` does;
a run the launcher cannot reach is marked canceled in the instance instead
(`state.cancel_in_flight`), which does not stop a process the launcher lost.
"""

import asyncio
import logging
import os
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from contextlib import ExitStack
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import dagster as dg

from partition_assets.backfill.model import NodeResult, RunUnit
from partition_assets.backfill.planning.node_run_config import merged_config
from partition_assets.backfill.running.local_workers import failure_message
from partition_assets.backfill.running.node_run_proofs import NodeRunProofs
from partition_assets.backfill.running.skips import record_skip, yielded_output
from partition_assets.backfill.state.record import cancel_launched_run
from partition_assets.code_location import load_definitions, split_target
from partition_assets.dagster_internals import (
    ModuleTarget,
    PythonFileTarget,
    WorkspaceLoadTarget,
    WorkspaceProcessContext,
    submit_asset_run,
)
from partition_assets.deploy.versioning import GIT_SHA_TAG, definitions_git_sha
from partition_assets.errors import CodeLocationError
from partition_assets.run_console import quiet_console_config
from partition_assets.run_tags import LAUNCHED_TAG, range_tags

# How often the run storage is read for the runs in flight: bounds how late a finished
# run's downstream nodes start (local workers report at once).
POLL_SECONDS = 0.25
# How long `terminate` waits for the launcher to stop the runs in flight.
TERMINATE_WAIT_SECONDS = 60.0

# The daemon that dequeues the runs a QueuedRunCoordinator queues (QueuedRunCoordinatorDaemon.daemon_type()).
_QUEUE_DAEMON = "QUEUED_RUN_COORDINATOR"
_IN_PROCESS: dict[str, Any] = {"execution": {"config": {"in_process": {}}}}

_log = logging.getLogger(__name__)


@dataclass
class _Submitted:
    unit: RunUnit
    future: Future
    at: float  # epoch seconds it was submitted: run bookkeeping


class LaunchedNodeRunner:
    """Submits run units through the instance's run coordinator; each unit is one Dagster
    run, given `run_config` (the backfill's), tagged `tags` and the tags given with it (and,
    like local workers' runs, the git sha of the code location and the lease proof of the
    backfill they name: node_run_proofs.py). The same `launch`, `close` and `terminate` as
    `DagsterNodeRunner`."""

    def __init__(
        self,
        target: str,
        tags: Mapping[str, str],
        instance: dg.DagsterInstance,
        run_config: Mapping[str, Any] = MappingProxyType({}),
    ) -> None:
        definitions = load_definitions(target)
        self._asset_graph = definitions.resolve_asset_graph()
        self._job = definitions.resolve_implicit_global_asset_job_def()
        job = definitions.resolve_implicit_global_asset_job_def()
        # A unit is one asset's step: Dagster's default executor would spawn a process for it
        # inside the run worker; in process, as local workers run it. Another executor is kept.
        # The backfill's `run_config` goes over that, as over each local node run's partition config.
        executor_config = _IN_PROCESS if job.executor_def.name == dg.multi_or_in_process_executor.name else {}
        self._run_config = quiet_console_config(job, merged_config(executor_config, run_config))
        sha = definitions_git_sha(definitions)
        self._tags = {**tags, **({GIT_SHA_TAG: sha} if sha else {}), LAUNCHED_TAG: "true"}
        self._instance = instance
        self._proofs = NodeRunProofs(instance)
        with ExitStack() as stack:  # closed at once should the code server not load the location
            self._workspace = stack.enter_context(
                WorkspaceProcessContext(self._instance, load_target(target), version=dg.__version__)
            )
            check_loaded(self._workspace, target)
            self._stack = stack.pop_all()
        _warn_without_queue_daemon(self._instance)
        self._plans: dict = {}  # the remote job and execution plan of each asset, fetched once
        self._in_flight: dict[str, _Submitted] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._follow, name="launched-runs", daemon=True)
        self._poller.start()

    def launch(self, unit: RunUnit, unit_tags: Mapping[str, str] = MappingProxyType({})) -> Future:
        """Submits `unit` as one run (a partition range when several), also tagged
        `unit_tags`; the future gives a result per node of the unit once the run finishes."""
        future: Future = Future()
        future.set_running_or_notify_cancel()
        submitted_at = time.time()
        try:
            run = self._submit(unit, unit_tags)
        except Exception as error:  # a future carries its work's error, as a pool's does: the unit failed
            future.set_exception(error)
            return future
        with self._lock:
            self._in_flight[run.run_id] = _Submitted(unit, future, submitted_at)
        return future

    def close(self) -> None:
        """Stops following runs and shuts the code server down; runs still in flight are
        left to their launcher."""
        self._stop.set()
        self._poller.join()
        self._stack.close()

    def terminate(self) -> None:
        """Asks the run coordinator to cancel every run in flight (its launcher terminates
        them), waits up to TERMINATE_WAIT_SECONDS for them to stop, then closes."""
        with self._lock:
            run_ids = list(self._in_flight)
        for run_id in run_ids:
            cancel_launched_run(self._instance, run_id)
        deadline = time.monotonic() + TERMINATE_WAIT_SECONDS
        while self._in_flight and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
        self.close()

    def __enter__(self) -> "LaunchedNodeRunner":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _submit(self, unit: RunUnit, unit_tags: Mapping[str, str]) -> dg.DagsterRun:
        # The proof is a tag, bound to the run's id: it reaches the run wherever the launcher runs it.
        run_id, tags = self._proofs.proved({**self._tags, **unit_tags, **self._partition_tags(unit)})
        request = dg.RunRequest(asset_selection=[unit.asset], tags=tags, run_config=self._run_config)
        return asyncio.run(
            submit_asset_run(
                run_id=run_id,
                run_request=request,
                run_request_index=0,
                instance=self._instance,
                workspace_process_context=self._workspace,
                workspace=self._workspace.create_request_context(),
                run_request_execution_data_cache=self._plans,
                debug_crash_flags={},
                logger=_log,
            )
        )

    def _partition_tags(self, unit: RunUnit) -> dict[str, str]:
        """The tags by which a run knows its partitions: those `execute_in_process` sets."""
        first, last = unit.partitions[0], unit.partitions[-1]
        if len(unit.partitions) > 1:
            return range_tags(first, last)
        partitions_def = self._asset_graph.get(unit.asset).partitions_def
        return dict(partitions_def.get_tags_for_partition_key(first)) if partitions_def and first else {}

    def _follow(self) -> None:
        """Completes the future of each run that finished, until `close`. Should reading the
        instance fail, every future in flight fails with that error rather than hang."""
        try:
            while not self._stop.wait(POLL_SECONDS):
                self._complete_finished()
        except Exception as error:  # the engine waits on these futures: hand them the error
            with self._lock:
                failed, self._in_flight = list(self._in_flight.values()), {}
            for submitted in failed:
                submitted.future.set_exception(error)

    def _complete_finished(self) -> None:
        with self._lock:
            run_ids = list(self._in_flight)
        if not run_ids:
            return
        for record in self._instance.get_run_records(dg.RunsFilter(run_ids=run_ids)):
            run = record.dagster_run
            if not run.is_finished:
                continue
            with self._lock:
                submitted = self._in_flight.pop(run.run_id)
            succeeded = run.status == dg.DagsterRunStatus.SUCCESS
            error = None if succeeded else self._failure(run)
            skipped = succeeded and self._skipped(run.run_id, submitted.unit.asset)
            started = record.start_time or submitted.at
            ended = record.end_time or time.time()
            submitted.future.set_result(
                [
                    NodeResult(node, succeeded, run.run_id, started, ended, error, skipped)
                    for node in submitted.unit.nodes
                ]
            )

    def _skipped(self, run_id: str, asset: dg.AssetKey) -> bool:
        """Whether the run `run_id` of `asset`, which succeeded, yielded no output (then tagged skipped)."""
        outputs = self._instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_OUTPUT)
        if yielded_output(self._job, asset, (entry.dagster_event for entry in outputs if entry.dagster_event)):
            return False
        record_skip(self._instance, run_id)
        return True

    def _failure(self, run: dg.DagsterRun) -> str:
        if run.status == dg.DagsterRunStatus.CANCELED:
            return "run canceled"
        records = self._instance.get_records_for_run(
            run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE, limit=1
        ).records
        return failure_message(
            record.event_log_entry.dagster_event for record in records if record.event_log_entry.dagster_event
        )


def load_target(target: str) -> WorkspaceLoadTarget:
    """The code server's view of `target` (a module name or a .py file, and `:ATTRIBUTE`
    when given), as -m/-f name it."""
    location, attribute = split_target(target)
    if location.endswith(".py"):
        return PythonFileTarget(location, attribute=attribute, working_directory=os.getcwd(), location_name=None)
    return ModuleTarget(location, attribute=attribute, working_directory=os.getcwd(), location_name=None)


def check_loaded(workspace: WorkspaceProcessContext, target: str) -> None:
    """Raises CodeLocationError when the code server could not load `target`."""
    context = workspace.create_request_context()
    for name in context.code_location_names:
        error = context.get_code_location_error(name)
        if error is not None:
            raise CodeLocationError(
                f"the code server for {target} failed to load it ({error.message.strip()}): fix the code "
                "location, or run the backfill with --runs-via local; no run was launched"
            )


def _warn_without_queue_daemon(instance: dg.DagsterInstance) -> None:
    """Warns when the instance queues runs and no dagster-daemon dequeues them lately:
    the backfill's runs would wait in the queue without a word."""
    status = instance.get_daemon_statuses([_QUEUE_DAEMON])[_QUEUE_DAEMON]
    if status.required and not status.healthy:
        _log.warning(
            "the instance's run coordinator queues runs and no dagster-daemon has dequeued any lately: "
            "the backfill's runs wait in the queue until one runs (`dagster-daemon run`, or `make dev`)"
        )
