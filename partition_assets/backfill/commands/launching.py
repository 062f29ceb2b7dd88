"""The commands that start a backfill: plan it, run it here, hand it to the run launcher,
adopt one the webserver launched, or wait warm for the webserver's next one.

Each takes a spec (or a Dagster backfill's id) and the instance, reports progress to the
`Console` it is given and returns a result (commands/results.py). A spec that the plan
refuses (a bad selection, a schema change the partitions cannot take, leased partitions)
raises a PartitionAssetsError before anything is recorded or written.

A script calling the commands that run nodes (run, resume, retry) calls them under
`if __name__ == "__main__":`: their workers import it again (processes/main_guard.py).

Not guaranteed: `run_backfill` returns when the backfill has run, gated and published (or
stopped short); a Ctrl-C or a kill leaves it for `resume` (its record says where it is).
"""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager

import dagster as dg

from partition_assets.backfill.commands.console import Console
from partition_assets.backfill.commands.detaching import submit_coordinator_run
from partition_assets.backfill.commands.results import BackfillPlan, DetachedRun, RunOutcome
from partition_assets.backfill.commands.unpublished import nothing_published
from partition_assets.backfill.dagster_ui.adoption import adopted_plan, hand_back, mark_failed
from partition_assets.backfill.dagster_ui.view import WEBSERVER
from partition_assets.backfill.model import BackfillStatus, Node, PublishMode, RunsVia
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.planning.history import pinned_history
from partition_assets.backfill.planning.instance_state import graph_of, nodes_to_skip
from partition_assets.backfill.planning.lineage import impact
from partition_assets.backfill.planning.node_runs import NodeRuns
from partition_assets.backfill.planning.policy_runs import asset_runs
from partition_assets.backfill.planning.spec import DEFAULT_MAX_PARALLEL, BackfillSpec
from partition_assets.backfill.publishing.schema_plan import TableSchemaPlan, plan_schema_changes
from partition_assets.backfill.publishing.tables import tables_of
from partition_assets.backfill.running.claims import fewer_runs_note
from partition_assets.backfill.running.coordinator import BackfillRun
from partition_assets.backfill.running.durations import recorded_seconds
from partition_assets.backfill.running.local_workers import DagsterNodeRunner, start_fork_server
from partition_assets.backfill.running.progress import Progress
from partition_assets.backfill.running.runners import RunnerFactory, node_runner, node_runner_reusing
from partition_assets.backfill.running.scheduling import critical_path
from partition_assets.backfill.running.spark_start import start_spark_for
from partition_assets.backfill.state.approval import DAGSTER_USER_TAG, launcher
from partition_assets.backfill.state.record import BackfillRecord, node_states, skipped_as_current
from partition_assets.backfill.state.skipped_ranges import stored_skipped
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.backfill.state.stored_plan import stored_plan
from partition_assets.code_location import load_definitions
from partition_assets.dagster_instance.daemon_filter import ENGINE_TAG, SPARSE, runs_on_engine
from partition_assets.dagster_instance.key_values import swap
from partition_assets.dagster_internals import SqliteEventLogStorage
from partition_assets.errors import (
    BackfillPlanError,
    BackfillStateError,
    CommitError,
    GateFailedError,
    LeaseLapsedError,
    PartitionAssetsError,
    SparkConnectServerError,
    SparkServerGoneError,
)
from partition_assets.ids import checked_backfill_id
from partition_assets.processes.coordinators import await_backfill
from partition_assets.processes.main_guard import refuse_unguarded_script

_DEFAULT_SECONDS_PER_NODE = 1.0


def plan_backfill(spec: BackfillSpec, instance: dg.DagsterInstance) -> BackfillPlan:
    """Plans `spec` against its code location and the instance: its graph, critical path,
    ETA, impact outside the selection and schema changes. Nothing is launched or written.

    Raises:
        PartitionAssetsError: The plan refuses the spec (BackfillPlanError, SchemaChangeError, ...).
    """
    graph, done, schema_changes = _planned(spec, instance)
    asset_graph = load_definitions(spec.module).resolve_asset_graph()
    recorded = recorded_seconds(instance, graph)
    seconds = {key: recorded.get(key, _DEFAULT_SECONDS_PER_NODE) for key in graph.slices}
    path, length = critical_path(graph, seconds, done)  # of the nodes that run: --catch-up's current ones left out
    return BackfillPlan(
        spec=spec,
        graph=graph,
        seconds_per_node=seconds,
        critical_path=tuple(path),
        critical_seconds=length,
        impacted=impact(asset_graph, graph, instance),
        schema_changes=tuple(schema_changes),
        current_nodes=len(done),
        asset_runs=asset_runs(asset_graph, graph, spec.batching, spec.batch, done),
    )


def run_backfill(
    spec: BackfillSpec, instance: dg.DagsterInstance, console: Console, launched_by: str | None = None
) -> RunOutcome:
    """Plans, records and runs `spec` in this process's workers (or through the run launcher,
    as `spec.runs_via` says), then gates and publishes it as its spec says. The record is
    written once its leases are taken: a backfill refused for leased partitions leaves none.
    `launched_by` names who launches it (default: the OS user); the record keeps it.

    Raises:
        PartitionAssetsError: The plan refuses the spec, or its partitions are leased; nothing
            was recorded or written.
        UnguardedScriptError: A script calls it outside `if __name__ == "__main__":`; nothing was run.
    """
    refuse_unguarded_script("run_backfill")
    spec = pinned_history(spec, instance)  # its record re-plans the same nodes when resumed
    on_workers = spec.runs_via != RunsVia.launcher
    if on_workers:  # before any thread: the server is a fork of this process
        start_fork_server([spec.module], instance)
    # Its workers load while this process plans; a backfill its plan refuses (or leased
    # partitions, or a bad capacity) kills them before they run anything.
    with warm_workers(spec.module if on_workers else None, spec.max_parallel, instance) as warm:
        graph, done, _ = _planned(spec, instance)
        record = BackfillRecord(
            spec,
            store=BackfillStore(instance),
            launched_by=launcher(launched_by, None),
            skipped=stored_skipped(graph, done),
            stored_plan=stored_plan(graph),
        )
        return execute_backfill(instance, record, graph, done, console, node_runner_reusing(warm))


def detach_backfill(spec: BackfillSpec, instance: dg.DagsterInstance) -> DetachedRun:
    """Plans `spec` here, then hands it to the instance's run launcher as one run of its code
    location's engine job, which records and runs it; returns at once.

    Raises:
        PartitionAssetsError: The plan refuses the spec, or the code location has no engine
            job; no run was created.
    """
    _planned(spec, instance)
    backfill_id, run = submit_coordinator_run(instance, spec)
    return DetachedRun(backfill_id, run.run_id)


def execute_backfill(
    instance: dg.DagsterInstance,
    record: BackfillRecord,
    graph: BackfillGraph,
    done: AbstractSet[Node],
    console: Console,
    runner_of: RunnerFactory = node_runner,
) -> RunOutcome:
    """Runs `record`'s nodes of `graph` but `done` through its coordinator, then its gate and
    publish; a line per node result and phase goes to `console`, the first saying how many
    nodes it runs and, when the deployment's capacity lets it run fewer runs at a time than
    its --max-parallel, how many and why (claims.fewer_runs_note); on Dagster's default event
    log, two lines after it on what that costs and how to drop it (`per_run_database_note`), the
    first time a backfill runs on the instance only; the local Spark server its nodes need
    started, announced with its time (running/spark_start.py). A failed gate, a refused
    commit, lapsed leases or a Spark server gone end it short of publishing, as a result that
    did not succeed, as does a cancel (`backfill cancel`, the UI) while it ran: its last line
    says canceled."""
    staged = record.spec.publish == PublishMode.staged
    progress = Progress(record.id, graph, done, staged=staged, current=len(skipped_as_current(record, graph)))
    fewer = fewer_runs_note(instance, record)
    console.line(progress.started() + (f"; {fewer}" if fewer else ""))
    storage = per_run_database_note(instance)
    if storage is not None and swap(instance, PER_RUN_DATABASE_NOTE_KEY, None, "shown"):  # once per instance
        console.line(storage)
    if record.spec.runs_via == RunsVia.local:
        try:
            start_spark_for(load_definitions(record.spec.module), graph.slices, console.line)
        except SparkConnectServerError as error:  # before its first node: nothing ran
            return RunOutcome(record.id, str(error), succeeded=False)
    run = BackfillRun(
        instance,
        record,
        graph,
        done,
        runner_of=runner_of,
        on_result=lambda result: console.node(progress.line(result), progress.tally()),
        on_phase=console.line,
        on_launch=progress.launched,
        dagster_view=WEBSERVER,
    )
    try:
        status = run.run()
    except (GateFailedError, CommitError, LeaseLapsedError, SparkServerGoneError) as error:  # stopped short
        return RunOutcome(record.id, str(error), succeeded=False)
    failure = progress.failure(status)
    message = failure or progress.summary(status)
    if record.stored_status() == BackfillStatus.CANCELED:  # by `backfill cancel` or the UI, while it ran
        return RunOutcome(record.id, f"{message} (canceled)", succeeded=False)
    if failure is None:
        return RunOutcome(record.id, message, succeeded=True)
    ran = node_states(instance, record.id, graph)
    unpublished = nothing_published(record.id, record.spec, status, ran, graph.node_count())
    return RunOutcome(record.id, failure + (f" {unpublished}" if unpublished else ""), succeeded=False)


# What Dagster's default event log (a SQLite database per run) costs a node beyond this repo's
# storage on the bench DAG (one run per partition), in CPU seconds of the command and its
# workers: 0.108 against 0.053 per node (31 days, quiet machine: bench/results/engine_instances.md)
# before its run databases were written through RunShardedEventLogStorage
# (dagster_instance/storage.py); 0.072-0.086 against 0.057-0.064 since (7 days, loaded machine).
PER_RUN_DATABASE_CPU_SECONDS = 0.02
# The instance's key-value store holds this key once a backfill told it the note (insert-once: `swap`).
PER_RUN_DATABASE_NOTE_KEY = "partition_assets/per_run_database_note"


def per_run_database_note(instance: dg.DagsterInstance) -> str | None:
    """Two lines for an instance on Dagster's default event log, a SQLite database per run
    (no dagster.yaml `storage:` nor this library's instance class): what it costs per node,
    then the dagster.yaml line that drops it and the guide's section that says more (what
    becomes of earlier runs' events); None on any other event log."""
    storage = instance.event_log_storage
    if not (isinstance(storage, SqliteEventLogStorage) and storage.is_run_sharded):
        return None
    return (
        f"instance: Dagster's default event log makes a SQLite database per run, about "
        f"{PER_RUN_DATABASE_CPU_SECONDS:.2f} CPU-s per node more than one for all runs (said once per instance)\n"
        "  dagster.yaml line that makes it one: `instance_class: {module: partition_assets.instance, "
        "class: EngineBackfillInstance}` (docs/guide/sparse-engine.md#per-node-overhead)"
    )


def adopt_backfill(
    instance: dg.DagsterInstance, backfill_id: str, console: Console, warm: DagsterNodeRunner | None = None
) -> RunOutcome:
    """Runs the webserver-launched Dagster backfill `backfill_id` on the engine, under the
    same id (so `backfill resume <id>` picks it up), on the `warm` workers when they serve
    it, or hands it back to Dagster's daemon when no spec plans exactly its target. Refused
    before its first node for another reason (an engine code location that does not load,
    leased partitions), the Dagster backfill is marked FAILED with the error.

    Raises:
        BackfillStateError: No such Dagster backfill, or not one the engine runs; nothing was run.
        PartitionAssetsError: Refused before its first node (then marked FAILED).
    """
    checked_backfill_id(backfill_id, "the Dagster backfill id")
    backfill = instance.get_backfill(backfill_id)
    if backfill is None or not runs_on_engine(backfill):
        raise BackfillStateError(
            f"Dagster backfill {backfill_id!r} is not one the engine runs (absent, or not tagged "
            f"{ENGINE_TAG}={SPARSE}): nothing was run"
        )
    try:
        spec, graph = adopted_plan(backfill, getattr(instance, "engine_modules", []), instance)
    except BackfillPlanError as error:
        hand_back(instance, backfill)
        return RunOutcome(backfill_id, str(error), succeeded=True)
    except Exception as error:  # an engine code location that does not load, say: nothing ran
        mark_failed(instance, backfill_id, error)
        raise
    who = launcher(None, backfill.tags.get(DAGSTER_USER_TAG))
    record = BackfillRecord(
        spec, id=backfill_id, store=BackfillStore(instance), launched_by=who, stored_plan=stored_plan(graph)
    )
    try:
        return execute_backfill(instance, record, graph, set(), console, node_runner_reusing(warm))
    except PartitionAssetsError as error:  # refused before its first node, e.g. leased partitions
        mark_failed(instance, backfill_id, error)
        raise


def stand_by(instance: dg.DagsterInstance, console: Console) -> RunOutcome | None:
    """Imports the instance's engine code locations, makes a fork of this process the
    workers' fork server, starts the workers for the first code location (as many as a
    backfill runs by default), then adopts the one Dagster backfill its webserver hands it
    (processes/coordinators.py); None when it hands none (the webserver is gone)."""
    modules = list(getattr(instance, "engine_modules", []))
    if modules:
        start_fork_server(modules, instance)  # its workers are forks of this process: nothing imported twice
    with warm_workers(modules[0] if modules else None, DEFAULT_MAX_PARALLEL, instance) as warm:
        if warm is not None:
            warm.wait_until_loaded()
        backfill_id = await_backfill(instance.root_directory)
        return None if backfill_id is None else adopt_backfill(instance, backfill_id, console, warm)


@contextmanager
def warm_workers(target: str | None, workers: int, instance: dg.DagsterInstance) -> Iterator[DagsterNodeRunner | None]:
    """`workers` workers for code location `target` (None: no workers), loading while
    nothing is asked of them; terminated on exit."""
    runner = DagsterNodeRunner(target, workers, {}, instance) if target is not None else None
    try:
        yield runner
    finally:
        if runner is not None:
            runner.terminate()


def _planned(spec: BackfillSpec, instance: dg.DagsterInstance) -> tuple[BackfillGraph, NodeRuns, list[TableSchemaPlan]]:
    """`spec`'s graph, the nodes it leaves alone and its tables' schema changes; a schema
    change the partitions cannot take is refused here, before anything is recorded or written."""
    graph = graph_of(spec, instance)
    done = nodes_to_skip(spec, graph, instance)
    definitions = load_definitions(spec.module)
    asset_graph = definitions.resolve_asset_graph()
    readers = {
        key: sorted(c.to_user_string() for c in asset_graph.get(key).child_keys - set(graph.slices))
        for key in graph.slices
    }
    return graph, done, plan_schema_changes(tables_of(definitions, graph), readers)
