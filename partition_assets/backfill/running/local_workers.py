"""Runs backfill nodes as real Dagster runs, in worker processes that load the code once.

A `dagster` CLI run pays ~3 s of start-up per partition; a worker that keeps the
code location, the instance and its Spark session loaded pays only the run's own
bookkeeping. Every node is still a real run in the instance: visible in the
webserver, in the event log and in Dagster's partition status.

Workers start the moment the runner is created, all at once, forked from one fork server
that has Dagster and the code location loaded: `backfill run` makes a fork of itself that
server once it loaded the location (`start_fork_server`), so nothing is imported twice;
the coordinator plans meanwhile, and 4 workers cost no import. The server is started
with the command's instance open, and workers take their copy of it as theirs (its
storages connect anew in each process), rather than each opening it at its first run.
What is left to each worker (from multiprocessing's own server: loading the code location
and opening the instance) takes CPU: at most `loading_at_once` workers load together, one
per core the coordinator (planning meanwhile) leaves free, so that the first worker is
ready after one load rather than all of them after every load shared the cores: the first
node run starts that much sooner.
Workers run at a lower OS priority (`worker_niceness()` added to their niceness), so that
production processes on the same host (a schedule's runs, the webserver, the daemon) get
the CPU first while a backfill runs (issue 24: backfills never starve production); their
Spark jobs join the Spark server's low-weight FAIR pool (spark/scheduler_pools.py).
Workers die with the process that created the runner, however it ends (SIGKILL included):
no run in flight of a killed coordinator finishes and writes later (processes/process_death.py, for
what that holds on which OS).
Not guaranteed: a code location module that starts threads or sessions when imported
does so in that process too (import it lazily, as resources do); on an idle host, the
last worker may be ready later than if every worker had loaded at once.
"""

import gc
import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.context import ForkServerContext, ForkServerProcess
from multiprocessing.synchronize import Event as EventType
from multiprocessing.synchronize import Semaphore as SemaphoreType
from types import MappingProxyType
from typing import Any

import dagster as dg

from partition_assets.backfill.model import Node, NodeResult, RunUnit
from partition_assets.backfill.running.asset_runs import AssetRuns
from partition_assets.backfill.running.node_run_proofs import NodeRunProofs
from partition_assets.backfill.running.skips import record_skip, yielded_output
from partition_assets.code_location import load_definitions
from partition_assets.dagster_instance.migrations import remember_dagster_migrations
from partition_assets.dagster_instance.storage import keep_connections, remember_schema_checks
from partition_assets.dagster_instance.telemetry import remember_telemetry_ids
from partition_assets.dagster_internals import InstanceRef, SerializableErrorInfo
from partition_assets.deploy.versioning import GIT_SHA_TAG, definitions_git_sha
from partition_assets.processes.fork_server import fork_here, preload_of, running_pid
from partition_assets.processes.process_death import die_with_coordinator
from partition_assets.run_tags import range_tags
from partition_assets.spark.scheduler_pools import BACKFILL_POOL, POOL_ENV

_log = logging.getLogger(__name__)

_worker: dict = {}
# What a worker adds to its niceness (PARTITION_ASSETS_BACKFILL_NICENESS overrides it; 0
# turns it off): backfill runs yield the CPU to production processes.
WORKER_NICENESS = 10
NICENESS_ENV = "PARTITION_ASSETS_BACKFILL_NICENESS"
# How often `wait_until_loaded` looks for a worker that died loading.
_DEATH_POLL_SECONDS = 0.1


def loading_at_once(workers: int, cores: int) -> int:
    """How many of `workers` workers load at the same time on a host of `cores` cores: one
    per core but the coordinator's (it plans while they load), at least one."""
    return max(1, min(workers, cores - 1))


def worker_niceness() -> int:
    """What a worker adds to its niceness: NICENESS_ENV when it is a whole number, else WORKER_NICENESS."""
    configured = os.environ.get(NICENESS_ENV, "")
    return int(configured) if configured.isdigit() else WORKER_NICENESS


class _WorkerRecordingContext(ForkServerContext):
    """The forkserver context, keeping every process a pool creates with it: that pool's
    workers, and no other child of this process."""

    def __init__(self, preload: list[str]) -> None:
        super().__init__()
        self.workers: list[ForkServerProcess] = []
        # Imported once by the fork server, before it forks the first worker.
        self.set_forkserver_preload(preload)

    # The context's process factory; typeshed declares it as the class itself, hence the ignore.
    def Process(self, *args: Any, **kwargs: Any) -> ForkServerProcess:  # type: ignore[override]
        worker = ForkServerProcess(*args, **kwargs)
        self.workers.append(worker)
        return worker


class DagsterNodeRunner:
    """Launches run units into `workers` processes; each unit is one Dagster run in
    `instance` (whose storage exists: workers opening it at once must not race on its
    schema migrations), tagged `tags` and the tags given with it, and with the lease proof of
    the backfill they name (node_run_proofs.py), and given `run_config` (the backfill's)."""

    def __init__(
        self,
        target: str,
        workers: int,
        tags: dict[str, str],
        instance: dg.DagsterInstance,
        run_config: Mapping[str, Any] = MappingProxyType({}),
    ) -> None:
        self._tags = tags
        self._run_config = dict(run_config)
        self._proofs = NodeRunProofs(instance)
        self._target = target
        self._workers = workers
        self._context = _WorkerRecordingContext(preload_of(_load_worker, [target]))
        self._loaded = self._context.Semaphore(0)  # released by each worker once it has loaded
        self._loaded_count = 0  # of those releases, taken by wait_until_loaded
        self._all_started = self._context.Event()  # set once the pool has started every worker
        self._instance = instance
        self._pool = self._new_pool()
        self._in_flight: dict[Future, str] = {}  # each unit's future, with its run's id
        self._lost: list[str] = []  # the runs whose worker died under them, not marked canceled yet
        self._replacing = threading.Lock()
        # From a thread, as the first start waits for the fork server's imports.
        self._starter = threading.Thread(target=self._start_workers, name="start-workers", daemon=True)
        self._starter.start()

    def _start_workers(self) -> None:
        """Starts every worker now, so that they load while the caller prepares its first
        launch: the pool starts a worker per task submitted while none is idle, and each
        task (`_started`) keeps its worker busy until the last worker is started. Else a
        worker that loads fast (from a fork server that preloaded the code location) would
        be idle by the next task, take it, and the pool would stay short of `workers`."""
        try:
            for _ in range(self._workers):
                self._pool.submit(_started)
        finally:  # a pool broken meanwhile (a worker died loading) lets the others go too
            self._all_started.set()

    def launch(
        self,
        unit: RunUnit,
        unit_tags: Mapping[str, str] = MappingProxyType({}),
        run_config: Mapping[str, Any] | None = None,
    ) -> Future:
        """Runs `unit` as one run (a partition range when several), also tagged `unit_tags`,
        given `run_config` (None: the runner's own); the future gives a result per node of the unit."""
        run_id, tags = self._proofs.proved({**self._tags, **unit_tags})
        config = self._run_config if run_config is None else dict(run_config)
        with self._replacing:
            if self._pool_broken():
                self._replace_pool()
            future = self._pool.submit(
                _run_unit, unit.asset.to_user_string(), list(unit.partitions), tags, run_id, config
            )
            self._in_flight[future] = run_id
        future.add_done_callback(self._settled)
        return future

    def _settled(self, future: Future) -> None:
        """A unit's run ended, or its worker died under it (its run left for `_cancel_lost_runs`)."""
        run_id = self._in_flight.pop(future)
        if not future.cancelled() and isinstance(future.exception(), BrokenProcessPool):
            self._lost.append(run_id)

    def _new_pool(self) -> ProcessPoolExecutor:
        """A pool of this runner's workers, forked from this process's fork server (started
        again, importing the code location, if it died)."""
        return ProcessPoolExecutor(
            max_workers=self._workers,
            mp_context=self._context,
            initializer=_load_worker,
            initargs=(
                self._target,
                self._instance.get_ref(),
                dict(os.environ),
                os.getcwd(),
                running_pid(),
                self._context.Semaphore(loading_at_once(self._workers, os.cpu_count() or 1)),
                self._loaded,
                self._all_started,
            ),
        )

    def _pool_broken(self) -> bool:
        """Whether a worker of the pool died (killed, or its fork server killed, which its workers
        die with): concurrent.futures then fails every run the pool holds and refuses new ones."""
        # private: pinned by partition_assets_tests/integration/test_local_workers_death.py
        return bool(self._pool._broken)

    def _replace_pool(self) -> None:
        """A new pool in place of a broken one, once every worker of the old one is dead: the
        pool failed its runs in flight before it stopped their workers (with SIGTERM, on which a
        worker inside a Dagster run finishes its run), so a node run again before then could
        run twice at once."""
        self.terminate()
        self._context.workers.clear()
        self._cancel_lost_runs()
        _log.warning("a backfill worker died: new workers start")
        self._pool = self._new_pool()

    def _cancel_lost_runs(self) -> None:
        """Marks canceled the runs whose worker died under them (nobody will finish them), once
        their workers are gone, as `resume` would: this coordinator runs on. A lost run the
        instance does not hold yet is looked for again at the next replacement and when the runner
        closes: a database server finishes the statement of a client that died meanwhile, so the
        dead worker's run may be created after its death was seen (bench/soak/, seed 23), NOT_STARTED
        for good, and without its tags (Dagster writes them by a second statement) that `resume`
        finds its backfill's runs by.

        Not guaranteed: a lost run created after the runner closed stays unended (the statement
        of a worker killed as the last run in flight ended, still running on the server)."""
        lost, self._lost = self._lost, []
        for run_id in lost:
            run = self._instance.get_run_by_id(run_id)
            if run is None:
                self._lost.append(run_id)
            elif not run.is_finished:
                self._instance.report_run_canceled(run, message="its worker process died (killed?)")

    def close(self) -> None:
        self._starter.join()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._cancel_lost_runs()

    def terminate(self) -> None:
        """Kills this runner's workers, and with them its runs in flight; other child
        processes (another pool's, a Spark server's) are left alone."""
        self._starter.join()
        # SIGKILL: a worker inside a Dagster run handles SIGTERM and would finish its run. A
        # worker whose start failed (the pool made it, its start raised) has no process.
        for worker in list(self._context.workers):
            if worker.pid is not None:
                worker.kill()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def wait_until_loaded(self) -> None:
        """Returns once every worker has loaded the code location, or once one of them died
        (the pool is then broken: its launches fail)."""
        self._starter.join()
        while self._loaded_count < self._workers:
            if self._loaded.acquire(timeout=_DEATH_POLL_SECONDS):
                self._loaded_count += 1
            elif not all(worker.is_alive() for worker in self._context.workers):
                return

    def serves(self, target: str, workers: int) -> bool:
        """True when this runner can run a backfill of code location `target` on `workers` workers."""
        return target == self._target and workers <= self._workers

    def __enter__(self) -> "DagsterNodeRunner":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class TaggedRunner:
    """`runner`, its runs also tagged `tags` and given `run_config`: a runner started before the
    backfill it runs was known (a standby coordinator's) runs it as the backfill's own would."""

    def __init__(
        self, runner: DagsterNodeRunner, tags: Mapping[str, str], run_config: Mapping[str, Any] = MappingProxyType({})
    ) -> None:
        self._runner = runner
        self._tags = dict(tags)
        self._run_config = dict(run_config)

    def launch(self, unit: RunUnit, unit_tags: Mapping[str, str] = MappingProxyType({})) -> Future:
        return self._runner.launch(unit, {**self._tags, **unit_tags}, self._run_config)

    def close(self) -> None:
        self._runner.close()

    def terminate(self) -> None:
        self._runner.terminate()


def start_fork_server(targets: Sequence[str], instance: dg.DagsterInstance | None = None) -> None:
    """Starts this process's fork server for workers of the code locations `targets`, first
    loaded here as a worker loads them (their definitions and asset jobs, which Dagster
    caches on them): workers forked from a fork of this process find them loaded
    (fork_server.fork_here). Workers of runners on `instance` take this process's copy of it
    as theirs (`_instance`): opening an instance costs each worker ~40 ms of CPU (Dagster
    reads its ~90 migration scripts to check each SQLite storage's schema), all at once when
    the first runs start. This process and its forks read those scripts once
    (dagster_instance/migrations.py): on Dagster's default event log, a database per run, each node
    run would read them twice; and Dagster's telemetry ids, which each node run would read twice
    with telemetry on (dagster_instance/telemetry.py). From then on this process's instance keeps its database server
    connections open (dagster_instance/storage.py `keep_connections`), as each worker does its own."""
    remember_dagster_migrations()
    remember_telemetry_ids()
    for target in targets:
        load_definitions(target).resolve_implicit_global_asset_job_def()
    if instance is not None:
        _worker["inherited_instance"] = instance
    fork_here(_load_worker, targets)
    if instance is not None:  # once forked: the fork server and its workers keep none of this process's
        keep_connections(instance)
        remember_schema_checks(instance)


def _load_worker(
    target: str,
    instance_ref: InstanceRef,
    environment: dict[str, str],
    cwd: str,
    fork_server_pid: int,
    loading: SemaphoreType,
    loaded: SemaphoreType,
    all_started: EventType,
) -> None:
    die_with_coordinator(fork_server_pid)
    # The fork server keeps the environment and directory it started with (a test session
    # or bench may have changed them since): a worker takes the runner's.
    os.environ.clear()
    os.environ.update(environment)
    os.environ[POOL_ENV] = BACKFILL_POOL  # its Spark jobs join the server's low-weight backfill pool
    os.nice(worker_niceness())
    os.chdir(cwd)
    with loading:  # its share of the cores (loading_at_once)
        definitions = load_definitions(target)
        _worker["runs"] = AssetRuns(definitions.resolve_implicit_global_asset_job_def())
        sha = definitions_git_sha(definitions)
        _worker["tags"] = {GIT_SHA_TAG: sha} if sha else {}
    _worker["instance_ref"] = instance_ref
    _worker["all_started"] = all_started
    # What is loaded now (Dagster, the code location: ~200,000 objects) stays for the
    # worker's life: out of the collector's sight, a full collection no longer walks it
    # (0.1-0.5 s each, every few dozen runs, on some node's run).
    gc.freeze()
    loaded.release()


def _instance() -> dg.DagsterInstance:
    """The worker's instance, used from its first run on, not while it loads: workers load
    while their backfill is planned, and a backfill refused meanwhile (a bad input, leased
    partitions) must leave the instance's files as they were. The copy of it the fork server
    was started with when it is the same instance (its storages connect anew in each
    process: dagster_instance/storage.py), else opened from its ref."""
    if "instance" not in _worker:
        inherited = _worker.get("inherited_instance")
        same = inherited is not None and inherited.get_ref() == _worker["instance_ref"]
        _worker["instance"] = inherited if same else dg.DagsterInstance.from_ref(_worker["instance_ref"])
        keep_connections(_worker["instance"])  # in this worker's own process, forked before
        remember_schema_checks(_worker["instance"])
    return _worker["instance"]


def _started() -> None:
    """Waits until the pool has started all its workers: one such task per worker makes
    the pool start them all (DagsterNodeRunner._start_workers)."""
    _worker["all_started"].wait()


def _run_unit(
    asset: str, partitions: list[str], tags: dict[str, str], run_id: str, run_config: dict[str, Any]
) -> list[NodeResult]:
    key = dg.AssetKey.from_user_string(asset)
    if len(partitions) > 1:
        tags = {**tags, **range_tags(partitions[0], partitions[-1])}
    started = time.time()
    result = _worker["runs"].execute(
        _instance(),
        key,
        (partitions[0] or None) if len(partitions) == 1 else None,
        {**tags, **_worker["tags"]},
        run_id,
        run_config,
    )
    error = None if result.success else failure_message(result.all_events)
    skipped = result.success and not yielded_output(_worker["runs"].job, key, result.all_events)
    if skipped:
        record_skip(_instance(), result.run_id)
    ended = time.time()
    return [NodeResult(Node(key, p), result.success, result.run_id, started, ended, error, skipped) for p in partitions]


def failure_message(events: Iterable[dg.DagsterEvent]) -> str:
    """Why a failed run failed, on one line: `ErrorClass: message` of its first failed step's
    error as the asset's code raised it (unwrapped from the Dagster errors that carry it, such
    as `DagsterExecutionStepExecutionError`), else \"run failed\". The stack trace stays in
    the run's event log."""
    for event in events:
        if event.is_step_failure and event.step_failure_data.error is not None:
            return user_error_line(event.step_failure_data.error)
    return "run failed"


def user_error_line(error: SerializableErrorInfo) -> str:
    """`ErrorClass: message` of the error that `error` wraps (following the causes of Dagster's
    user-code wrappers, which say only which step raised), its message's lines joined."""
    wrappers = _user_code_wrappers()
    while error.cause is not None and error.cls_name in wrappers:
        error = error.cause
    # The message is the traceback's last line, `module.ErrorClass: text`: keep the text.
    named, _, text = error.message.partition(": ")
    if named.strip().split(".")[-1] != error.cls_name:
        text = error.message
    return f"{error.cls_name}: {' '.join(text.split())}" if text.strip() else str(error.cls_name)


def _user_code_wrappers() -> set[str]:
    """The class names of the errors Dagster raises around an error of the user's code."""
    wrappers, classes = set(), [dg.DagsterUserCodeExecutionError]
    while classes:
        cls = classes.pop()
        wrappers.add(cls.__name__)
        classes.extend(cls.__subclasses__())
    return wrappers
