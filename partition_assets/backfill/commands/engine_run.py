"""The commands of the engine job's coordinator run (automation/job.py): plan the backfill a
run of the job stands for, then run it.

A run of the job is a new backfill (launched from the Launchpad or by a sensor, its id in
its tags or given to it), or the coordinator run of a recorded backfill re-executed from the
UI or started by the takeover sensor (automation/takeover_sensor.py), which resumes it as
`backfill resume` would: by its kind (a retract as a retract, commands/retracting.py), its
status (one the status table does not let resume is refused, nothing written; a final one
runs nothing), and the nodes its record says need not run (succeeded, or skipped as current
by a --catch-up start). Any other run tagged with a recorded backfill's id is refused.

Not guaranteed: the job's op renders these results (its log, a dg.Failure); a run killed
hard (SIGKILL, the host lost) leaves the backfill running, for `resume` or the takeover
sensor, as `backfill run` would.
"""

from __future__ import annotations

import contextlib
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import dagster as dg

from partition_assets.backfill.commands.console import Console
from partition_assets.backfill.commands.launching import execute_backfill
from partition_assets.backfill.commands.results import RunOutcome
from partition_assets.backfill.commands.retracting import resume_retract
from partition_assets.backfill.model import BackfillCommand, BackfillStatus, Node
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.planning.history import pinned_history
from partition_assets.backfill.planning.instance_state import graph_of, nodes_to_skip
from partition_assets.backfill.planning.spec import BackfillSpec, config_key_of
from partition_assets.backfill.publishing.approval_steps import check_launch
from partition_assets.backfill.publishing.publication import staged_publication
from partition_assets.backfill.state.approval import DAGSTER_USER_TAG, launcher
from partition_assets.backfill.state.presence import refuse_if_live
from partition_assets.backfill.state.record import BackfillRecord, cancel, cancel_in_flight, done_nodes
from partition_assets.backfill.state.skipped_ranges import stored_skipped
from partition_assets.backfill.state.status import FINAL_STATUSES
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.backfill.state.stored_plan import recorded_graph, stored_plan
from partition_assets.code_location import load_definitions
from partition_assets.errors import BackfillStateError, PartitionAssetsError
from partition_assets.ids import checked_backfill_id
from partition_assets.run_tags import BACKFILL_ID_TAG, TAKEOVER_TAG


@dataclass(frozen=True)
class EngineRunPlan:
    """What a coordinator run works on: the record (new, or as recorded), its graph, and the
    nodes it leaves alone (current ones, or those a resumed backfill ran already)."""

    record: BackfillRecord
    graph: BackfillGraph
    done: AbstractSet[Node]


def plan_engine_run(
    instance: dg.DagsterInstance, run: dg.DagsterRun, backfill_id: str, spec: BackfillSpec
) -> EngineRunPlan | None:
    """The plan of the coordinator `run` for backfill `backfill_id`: a new backfill of `spec`,
    recorded here once its launch passes the approval policy; for a re-executed or takeover
    run, the backfill's record as it stands (its stored plan, fingerprints, published versions
    and pins, not `spec`), resumed like `backfill resume`. None when that backfill is final.

    Raises:
        BackfillIdError: `backfill_id` cannot name a backfill; nothing was recorded.
        BackfillStateError: `backfill_id` is recorded but `run` is neither a re-execution nor a
            takeover, or the backfill's coordinator is live; nothing was run.
        PartitionAssetsError: The plan or the approval policy refuses `spec`; nothing was recorded.
    """
    checked_backfill_id(backfill_id, f"the run tag {BACKFILL_ID_TAG}")
    store = BackfillStore(instance)
    if not store.exists(backfill_id):
        spec = pinned_history(spec, instance)  # its record re-plans the same nodes when resumed
        graph = graph_of(spec, instance, config_key_of)
        done = nodes_to_skip(spec, graph, instance)
        who = launcher(None, run.tags.get(DAGSTER_USER_TAG))
        record = BackfillRecord(
            spec,
            id=backfill_id,
            store=store,
            launched_by=who,
            skipped=stored_skipped(graph, done),
            stored_plan=stored_plan(graph),
        )
        # before it is recorded
        check_launch(staged_publication(record, load_definitions(spec.module), graph), instance)
        record.save()
        return EngineRunPlan(record, graph, done)
    if not run.parent_run_id and TAKEOVER_TAG not in run.tags:
        raise BackfillStateError(
            f"backfill {backfill_id} is recorded already: a run tagged {BACKFILL_ID_TAG}={backfill_id} resumes it "
            f"only as a re-execution of its coordinator run (or a takeover, tagged {TAKEOVER_TAG}); use "
            f"`partition-assets backfill resume {backfill_id}`, or launch without that tag for a new backfill. "
            "Nothing was run."
        )
    refuse_if_live(instance, backfill_id, BackfillCommand.RE_EXECUTE)
    record = store.load(backfill_id)
    if record.status in FINAL_STATUSES:
        return None
    graph = recorded_graph(record, instance)
    return EngineRunPlan(record, graph, done_nodes(record, graph, instance))


def run_engine_plan(instance: dg.DagsterInstance, plan: EngineRunPlan, console: Console) -> RunOutcome:
    """Runs `plan` as `execute_backfill` does (node results and phases to `console`); a
    recorded retract as `resume_retract` does, running no node. A backfill canceled meanwhile
    (`backfill cancel`, the UI) ends as an outcome that did not succeed. The run interrupted
    (terminated from the UI) leaves the backfill canceled, its node runs in flight canceled,
    so that `backfill resume` picks it up; any other error leaves it as its coordinator
    settled it (failed), its node runs in flight canceled.

    Raises:
        PartitionAssetsError: Refused before its first node (e.g. leased partitions); the
            backfill is failed, nothing was published. A retract its status does not let resume
            (one awaiting approval): IllegalTransitionError, nothing written.
    """
    record = plan.record
    try:
        if record.is_retract:  # continued as a retract: running its graph's nodes would compute what it removes
            outcome = resume_retract(instance, record).outcome
        else:
            outcome = execute_backfill(instance, record, plan.graph, plan.done, console)
    except PartitionAssetsError:
        raise
    except BaseException as error:
        # Dagster interrupts a run terminated from the UI with a BaseException: canceled, where a
        # crash (an Exception) stays failed, as its coordinator left it.
        if not isinstance(error, Exception):
            with contextlib.suppress(BackfillStateError):  # a publish or rollback cut short keeps its status
                cancel(record.store, record.id)
        cancel_in_flight(instance, record.id)
        raise
    if record.is_retract and record.stored_status() == BackfillStatus.CANCELED:  # execute_backfill says so itself
        return RunOutcome(record.id, f"{outcome.message} (canceled)", succeeded=False)
    return outcome
