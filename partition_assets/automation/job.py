"""The sparse backfill engine as a Dagster job, launched from the Launchpad or by a sensor.

The job's one op is the backfill's coordinator: it records the backfill, runs it
through the coordinator (the same as `partition-assets backfill run`) and logs each
node's result (the results of each second in one log event). The coordinator run
carries the backfill id tag too, so filtering runs by `partition_assets/backfill_id=<id>`
in the UI shows it beside its node runs.
"""

import contextlib
import uuid

import dagster as dg

from partition_assets.backfill.dagster_ui.view import WEBSERVER
from partition_assets.backfill.model import BackfillCommand, BackfillStatus
from partition_assets.backfill.planning.graph import BackfillGraph, Node
from partition_assets.backfill.planning.instance_state import graph_of, nodes_to_skip
from partition_assets.backfill.planning.run_config import COORDINATOR_OP, ENGINE_JOB, SparseBackfillConfig
from partition_assets.backfill.planning.spec import BackfillSpec, config_key_of, spec_from_config
from partition_assets.backfill.publishing.approval_steps import check_launch
from partition_assets.backfill.publishing.publication import Publication
from partition_assets.backfill.running.coordinator import BackfillRun
from partition_assets.backfill.running.progress import GroupedLines, Progress
from partition_assets.backfill.state.approval import DAGSTER_USER_TAG, launcher
from partition_assets.backfill.state.presence import refuse_if_live
from partition_assets.backfill.state.record import BackfillRecord, cancel, cancel_in_flight, succeeded_nodes
from partition_assets.backfill.state.status import FINAL_STATUSES
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.code_location import load_definitions
from partition_assets.errors import BackfillStateError, PartitionAssetsError
from partition_assets.ids import checked_backfill_id
from partition_assets.run_tags import BACKFILL_ID_TAG, TAKEOVER_TAG


def sparse_backfill_job(module: str, name: str = ENGINE_JOB) -> dg.JobDefinition:
    """A job whose run plans and runs a sparse backfill of the code location `module`.

    `module` is what the node runs load (a module name or a .py path, `:ATTRIBUTE` naming
    one object of it: any target `code_location.load_definitions` loads, so a `@repository`
    or a `@dg.definitions` function too), normally the code location that serves this job.
    """

    @dg.op(name=COORDINATOR_OP)
    # Dagster reads the config schema from the annotation; mypy cannot see a class built at import.
    def coordinate(context: dg.OpExecutionContext, config: SparseBackfillConfig) -> None:  # type: ignore[valid-type]
        backfill_id = context.run.tags.get(BACKFILL_ID_TAG)
        if backfill_id is None:  # launched from the Launchpad: tag this run after the fact
            backfill_id = uuid.uuid4().hex[:12]
            context.instance.add_run_tags(context.run_id, {BACKFILL_ID_TAG: backfill_id})
        try:
            checked_backfill_id(backfill_id, f"the run tag {BACKFILL_ID_TAG}")
            store = BackfillStore(context.instance)
            record, graph, done = _record_of_run(context, store, backfill_id, spec_from_config(config, module))
        except PartitionAssetsError as error:
            raise dg.Failure(description=f"backfill not planned: {error}") from None
        if record is None:
            context.log.info(f"backfill {backfill_id} has nothing left to run or publish")
            return
        progress = Progress(backfill_id, graph, done)
        context.log.info(f"{progress.started()}; its runs carry the tag {BACKFILL_ID_TAG}={backfill_id}")
        try:
            # The gate's and publish's lines go through the group too: after the last nodes' lines.
            with GroupedLines(context.log.info) as lines:
                status = BackfillRun(
                    context.instance,
                    record,
                    graph,
                    done,
                    on_result=lambda result: lines.add(progress.line(result)),
                    on_phase=lines.add,
                    dagster_view=WEBSERVER,
                ).run()
        except PartitionAssetsError as error:  # a failed gate, partitions leased by another writer, ...
            raise dg.Failure(description=str(error), metadata={"backfill_id": backfill_id}) from None
        except BaseException:
            # Terminated from the UI (or crashed): record it, so that `backfill resume` picks it up.
            with contextlib.suppress(BackfillStateError):  # a publish or rollback cut short keeps its status
                cancel(store, backfill_id)
            cancel_in_flight(context.instance, backfill_id)
            raise
        if record.stored_status() == BackfillStatus.CANCELED:  # `partition-assets backfill cancel`
            raise dg.Failure(description=f"{progress.summary(status)} (canceled)")
        failure = progress.failure(status)
        if failure is not None:
            raise dg.Failure(description=failure, metadata={"backfill_id": backfill_id})
        context.log.info(progress.summary(status))

    @dg.job(
        name=name,
        # The op only coordinates: no step subprocess; the node runs are the real work.
        executor_def=dg.in_process_executor,
        description=(
            "Sparse (asset, partition) backfill: each node starts when its own upstream nodes "
            "succeed. Launch with config {selection, start, end, ...}; filter runs by the tag "
            f"{BACKFILL_ID_TAG} to see the node runs."
        ),
    )
    def sparse_backfill():
        coordinate()

    return sparse_backfill


def _record_of_run(
    context: dg.OpExecutionContext, store: BackfillStore, backfill_id: str, spec: BackfillSpec
) -> tuple[BackfillRecord | None, BackfillGraph, set[Node]]:
    """The record the coordinator run works on, its graph and the nodes it leaves alone: a new one for
    a new id; for a re-executed run or a takeover run (automation/takeover_sensor.py), its backfill's record
    as it stands (its fingerprints, published versions and pins), resumed like `backfill resume`
    (None when final). BackfillStateError when the id is recorded but this run is neither, or when
    the backfill's coordinator is live."""
    instance = context.instance
    if not store.exists(backfill_id):
        who = launcher(None, context.run.tags.get(DAGSTER_USER_TAG))
        record = BackfillRecord(spec, id=backfill_id, store=store, launched_by=who)
        graph = graph_of(spec, instance, config_key_of)
        done = nodes_to_skip(spec, graph, instance)
        check_launch(Publication(record, load_definitions(spec.module), graph), instance)  # before it is recorded
        record.save()
        return record, graph, done
    if not context.run.parent_run_id and TAKEOVER_TAG not in context.run.tags:
        raise BackfillStateError(
            f"backfill {backfill_id} is recorded already: a run tagged {BACKFILL_ID_TAG}={backfill_id} resumes it "
            f"only as a re-execution of its coordinator run (or a takeover, tagged {TAKEOVER_TAG}); use "
            f"`partition-assets backfill resume {backfill_id}`, or launch without that tag for a new backfill. "
            "Nothing was run."
        )
    refuse_if_live(instance, backfill_id, BackfillCommand.RE_EXECUTE)
    record = store.load(backfill_id)
    graph = graph_of(record.spec, instance, config_key_of)
    if record.status in FINAL_STATUSES:
        return None, graph, set()
    return record, graph, succeeded_nodes(record, graph, instance)
