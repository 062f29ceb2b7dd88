"""The commands on a recorded backfill, one typed function each: status, resume, retry,
cancel, pause, unpause, diff, publish, approve, discard, ledger, rollback; and the list of
every backfill.

Each takes the instance and the backfill's id, returns a result (commands/results.py) and
refuses, before anything is read or written, a command that does not fit: an unknown id, a
live coordinator (for the commands that coordinate: backfill/state/presence.py), a status
the command does not accept (backfill/state/status.py). Every surface calls these (the
command line, the Launchpad's jobs), so all write the same records and ledger rows and
refuse the same inputs with the same messages.

Not guaranteed: a command checks the status it read; a change between that read and its
first write is refused by the store's compare-and-set, not by these checks.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast

import dagster as dg

from partition_assets.backfill.commands.console import Console
from partition_assets.backfill.commands.launching import execute_backfill
from partition_assets.backfill.commands.results import (
    Canceled,
    Committed,
    DiffReport,
    Discarded,
    LedgerReport,
    Lineup,
    PauseChanged,
    Published,
    RollbackRequested,
    RunOutcome,
    StatusReport,
    TableDiff,
    TakeoverClaim,
)
from partition_assets.backfill.commands.retracting import resume_retract
from partition_assets.backfill.commands.unpublished import nothing_published
from partition_assets.backfill.dagster_ui.mirror import mark_canceled
from partition_assets.backfill.model import BackfillCommand, BackfillStatus, NodeStatus
from partition_assets.backfill.publishing.approval_steps import (
    approve,
    discard,
    publication_of,
    request_rollback,
    rollback_requires_approval,
)
from partition_assets.backfill.publishing.approval_wait import approval_required
from partition_assets.backfill.publishing.diff import diff_rows
from partition_assets.backfill.publishing.freeze import unfreeze
from partition_assets.backfill.publishing.publication import Publication
from partition_assets.backfill.publishing.stages import publish
from partition_assets.backfill.running.claims import fewer_runs_note
from partition_assets.backfill.running.lineup import launch_line, standings
from partition_assets.backfill.state import pausing
from partition_assets.backfill.state.approval import launcher, utc_now
from partition_assets.backfill.state.liveness import silent_coordinator
from partition_assets.backfill.state.presence import refuse_if_live
from partition_assets.backfill.state.record import (
    BackfillRecord,
    cancel,
    cancel_in_flight,
    done_nodes,
    node_states,
    with_nodes_settled_without_run,
)
from partition_assets.backfill.state.status import COMMANDS, check_command
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.backfill.state.stored_plan import recorded_graph
from partition_assets.backfill.state.takeover_claims import claim_takeovers
from partition_assets.errors import ApprovalError, BackfillStateError
from partition_assets.ids import checked_backfill_id
from partition_assets.processes.main_guard import refuse_unguarded_script
from partition_assets.storage.leases import release
from partition_assets.storage.table_format import PreviousKeepingFormat

C = BackfillCommand
# The commands that act as the backfill's coordinator: refused while another one is live.
_COORDINATING = frozenset({C.RESUME, C.RETRY, C.PUBLISH, C.APPROVE, C.DISCARD, C.ROLLBACK})


def backfill_status(instance: dg.DagsterInstance, backfill_id: str, now: datetime | None = None) -> StatusReport:
    """Each node's state from its latest run, when the backfill launches next (seen at
    `now`, default the present), whether its coordinator went silent, the previous
    versions it keeps and, while it runs, why the capacity lets it run fewer runs at a time
    than its --max-parallel, if it does. Reads only."""
    record = _recorded(instance, backfill_id)
    graph = recorded_graph(record, instance)
    ran = node_states(instance, record.id, graph)
    states = with_nodes_settled_without_run(graph, {node: state for node, (state, _) in ran.items()})
    windowed = record.status == BackfillStatus.PAUSED or record.spec.launch_window() is not None
    keeps_previous = record.spec.keep_previous is not None
    return StatusReport(
        record=record,
        graph=graph,
        node_states=states,
        launch=launch_line(record, now or datetime.now(UTC)) if windowed else None,
        silence=silent_coordinator(instance, record.id, record.status),
        previous_versions=_previous_versions(publication_of(record, instance)) if keeps_previous else None,
        fewer_runs=fewer_runs_note(instance, record) if record.status == BackfillStatus.RUNNING else None,
        unpublished=(
            nothing_published(record.id, record.spec, states, ran, graph.node_count())
            if record.status == BackfillStatus.FAILED
            else None
        ),
    )


def resume_backfill(instance: dg.DagsterInstance, backfill_id: str, console: Console) -> RunOutcome | Published:
    """Finishes the backfill: runs every node it has not done (neither succeeded nor, for a
    --catch-up backfill, left alone as current when it started), then its gate and publish; a
    backfill whose coordinator died mid-publish or mid-rollback has that step finished (a
    rollback's result is `Published`, verb "rolled back"). A retract is finished as a retract
    (commands/retracting.py `resume_retract`, as a taken-over coordinator run does): running its
    graph's nodes would compute again what it removes."""
    refuse_unguarded_script("resume_backfill")
    record = _recorded(instance, backfill_id, C.RESUME)
    if record.status == BackfillStatus.ROLLING_BACK:  # its coordinator died mid-rollback
        return _rollback(publication_of(record, instance), instance, force=False)
    if record.is_retract:
        return resume_retract(instance, record).outcome
    graph = recorded_graph(record, instance)
    return execute_backfill(instance, record, graph, done_nodes(record, graph, instance), console)


def retry_backfill(instance: dg.DagsterInstance, backfill_id: str, console: Console) -> RunOutcome:
    """Re-runs the backfill's failed nodes and their descendants (nothing when none failed)."""
    refuse_unguarded_script("retry_backfill")
    record = _recorded(instance, backfill_id, C.RETRY)
    graph = recorded_graph(record, instance)
    if not any(state == NodeStatus.FAILED for state, _ in node_states(instance, record.id, graph).values()):
        return RunOutcome(record.id, f"backfill {record.id} has no failed nodes", succeeded=True)
    return execute_backfill(instance, record, graph, done_nodes(record, graph, instance), console)


def cancel_backfill(instance: dg.DagsterInstance, backfill_id: str) -> Canceled:
    """Stops the backfill: its live coordinator sees the status within a second and kills its
    workers (a dead one's workers died with it: processes/fork_server.py); runs in flight are
    canceled and the freeze lifted now, whether its coordinator is alive or not."""
    record = _recorded(instance, backfill_id, C.CANCEL)
    cancel(record.store, record.id)
    in_flight = cancel_in_flight(instance, record.id)
    unfreeze(instance, record.id)
    # Its coordinator, if alive, writes the same when it stops; if dead, nobody else would.
    mark_canceled(instance, record.id)
    return Canceled(record.id, in_flight)


def pause_backfill(instance: dg.DagsterInstance, backfill_id: str) -> PauseChanged:
    """Stops launching the backfill's new node runs; its runs in flight finish."""
    record = _recorded(instance, backfill_id, C.PAUSE)
    pausing.pause(record.store, record.id)
    return PauseChanged(record.id, paused=True)


def unpause_backfill(instance: dg.DagsterInstance, backfill_id: str) -> PauseChanged:
    """Launches a paused backfill's node runs again."""
    record = _recorded(instance, backfill_id, C.UNPAUSE)
    pausing.unpause(record.store, record.id)
    return PauseChanged(record.id, paused=False)


def claim_silent_backfills(instance: dg.DagsterInstance) -> tuple[TakeoverClaim, ...]:
    """The backfills whose coordinator fell silent that this caller claimed to resume under a
    new coordinator, each with its recorded spec (backfill/state/takeover_claims.py: one claim
    per backfill, whichever hosts ask at the same moment).

    Raises:
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
    """
    store = BackfillStore(instance)
    return tuple(
        TakeoverClaim(backfill_id, store.load(backfill_id).spec) for backfill_id in claim_takeovers(instance, store)
    )


def diff_backfill(instance: dg.DagsterInstance, backfill_id: str) -> DiffReport:
    """Per (asset, partition) of the staged data: old and new rows, measure sums, checksums. Reads only."""
    record = _recorded(instance, backfill_id)
    tables = []
    for table_stats in publication_of(record, instance).stats(old_of_every_table=True):
        asset = table_stats.table.asset.to_user_string()
        tables.append(TableDiff(asset, tuple(diff_rows(asset, table_stats.old, table_stats.new))))
    return DiffReport(record.id, record.status, tuple(tables))


def publish_backfill(instance: dg.DagsterInstance, backfill_id: str, force: bool = False) -> Published:
    """Publishes a staged backfill whose gate failed (with `force`, after review), whose
    publish was refused by a foreign commit (with `force`) or cut short.

    Raises:
        BackfillStateError: Its gate failed and `force` is not set; nothing was written.
        ApprovalError: Its gate failed and it requires approval: `approve_backfill` publishes it.
    """
    record = _recorded(instance, backfill_id, C.PUBLISH)
    publication = publication_of(record, instance)
    if record.status == BackfillStatus.GATE_FAILED and not force:
        raise BackfillStateError(
            f"backfill {record.id} failed its gate: review `backfill diff {record.id}`, then publish with --force"
        )
    if record.status == BackfillStatus.GATE_FAILED and approval_required(publication, instance):
        raise ApprovalError(
            f"backfill {record.id} failed its gate and requires approval: review `backfill diff {record.id}`, then "
            f"`partition-assets backfill approve {record.id} --by NAME --force`. Nothing was written."
        )
    with publication.held(instance, C.PUBLISH) as leases:
        versions = publish(publication, instance, leases, force=force)
    return Published(record.id, Committed.PUBLISHED, versions)


def approve_backfill(
    instance: dg.DagsterInstance,
    backfill_id: str,
    approver: str,
    force: bool = False,
    dagster_user: str | None = None,
) -> Published:
    """Approves the backfill in `approver`'s name and publishes it (after a failed gate only
    with `force`); `dagster_user` is the Dagster user the approval's run carries, where the
    instance knows one. See backfill/publishing/approval_steps.py for what is refused."""
    return approve_record(instance, _loaded(instance, backfill_id), approver, force, dagster_user)


def approve_record(
    instance: dg.DagsterInstance,
    record: BackfillRecord,
    approver: str,
    force: bool = False,
    dagster_user: str | None = None,
) -> Published:
    """`approve_backfill` of a record as its caller read it, however long ago: the approval
    claims the backfill and reads its record again before writing anything, so a record
    another process changed since is approved as it now stands, or refused."""
    _check_fits(instance, record, C.APPROVE)
    versions = approve(publication_of(record, instance), instance, approver, force, utc_now(), dagster_user)
    done = Committed.ROLLED_BACK if record.status == BackfillStatus.ROLLED_BACK else Committed.PUBLISHED
    return Published(record.id, done, versions, approved_by=approver)


def discard_backfill(instance: dg.DagsterInstance, backfill_id: str) -> Discarded:
    """Deletes a staged backfill's staged data; its tables are unchanged."""
    record = _recorded(instance, backfill_id, C.DISCARD)
    return Discarded(record.id, discard(publication_of(record, instance), instance))


def backfill_ledger(instance: dg.DagsterInstance, backfill_id: str) -> LedgerReport:
    """What the backfill read and wrote, per (asset, partition). Reads only."""
    record = _recorded(instance, backfill_id)
    publication = publication_of(record, instance)
    keeps_previous = record.spec.keep_previous is not None
    return LedgerReport(
        record.id, tuple(publication.ledger_entries()), _previous_versions(publication) if keeps_previous else None
    )


def rollback_backfill(
    instance: dg.DagsterInstance, backfill_id: str, force: bool = False, requested_by: str | None = None
) -> Published | RollbackRequested:
    """Restores the partitions a published backfill rewrote (with `force`, despite later
    commits to them). Under a deployment's approval policy, where its publish requires
    approval (approval_steps.rollback_requires_approval), a rollback not begun waits instead, in
    `rollback_awaiting_approval`, for `backfill approve` by an approver other than
    `requested_by` (default: the OS user); a rollback its tables would refuse is refused now.

    Raises:
        RollbackError (and its kinds): The tables refuse the rollback (undo_steps.check_rollback); nothing was written.
    """
    record = _recorded(instance, backfill_id, C.ROLLBACK)
    publication = publication_of(record, instance)
    if record.status != BackfillStatus.ROLLING_BACK and rollback_requires_approval(publication, instance):
        publication.check_rollback(force=force)  # refused now, not once approved
        request_rollback(publication, instance, launcher(requested_by, None), utc_now())
        return RollbackRequested(record.id)
    return _rollback(publication, instance, force)


def list_backfills(instance: dg.DagsterInstance, now: datetime | None = None) -> Lineup:
    """Every recorded backfill: status, priority, share of the capacity, queue position and
    window, seen at `now` (default the present). Reads only."""
    return Lineup(now or datetime.now(UTC), tuple(standings(instance, BackfillStore(instance))))


def _recorded(instance: dg.DagsterInstance, backfill_id: str, command: BackfillCommand | None = None) -> BackfillRecord:
    """The record of `backfill_id`, once `command` (None: one that only reads) fits it."""
    record = _loaded(instance, backfill_id)
    _check_fits(instance, record, command)
    return record


def _loaded(instance: dg.DagsterInstance, backfill_id: str) -> BackfillRecord:
    return BackfillStore(instance).load(checked_backfill_id(backfill_id))


def _check_fits(instance: dg.DagsterInstance, record: BackfillRecord, command: BackfillCommand | None) -> None:
    """Refuses `command` on `record` unless it fits: no live coordinator when it coordinates,
    a status it accepts."""
    if command in _COORDINATING:  # before anything below touches its runs or tables
        refuse_if_live(instance, record.id, command)
    if command in COMMANDS:  # refused by its status, too, before anything is read or written
        check_command(record.id, record.status, command)


def _rollback(publication: Publication, instance: dg.DagsterInstance, force: bool) -> Published:
    publication.check_rollback(force=force)  # a refused rollback takes no lease: it writes nothing
    with publication.held(instance, C.ROLLBACK) as leases:
        versions = publication.rollback(instance, force=force)
        release(leases)
    return Published(publication.record.id, Committed.ROLLED_BACK, versions)


def _previous_versions(publication: Publication) -> tuple[str, ...]:
    """A line per table whose version before this backfill is kept (--keep-previous)."""
    lines = []
    for table in publication.tables.values():
        if not table.table_format.capabilities.keep_previous:
            continue  # refused at launch: it kept nothing (BackfillTable.check_stageable)
        copy = cast(PreviousKeepingFormat, table.table_format).kept_previous(table.uri)
        if copy is not None and copy.backfill_id == publication.record.id:
            lines.append(
                f"previous version of {table.asset.to_user_string()} (v{copy.version}) kept as {copy.uri} "
                f"until {copy.expires_at.isoformat(timespec='seconds')} (vacuum drops it after)"
            )
    return tuple(lines or [f"no previous version kept by backfill {publication.record.id} (yet)"])
