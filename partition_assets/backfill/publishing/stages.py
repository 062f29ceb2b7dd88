"""The stages of a staged backfill's publishing, in order, as data (after SQLMesh's
plan/stages.py): `PUBLISH_STAGES` is the one list. Each stage is a function of the few
inputs it reads (the list shows which) that returns a small result; the stage runner
(stage_runner.py) walks the list, records in the backfill's record the last stage finished
(`publish_stage`) and resumes from the first unfinished one after a crash.

1. gate: the gate evaluated on the staged data (gate_step.py: the ledger's `staged` rows,
   the fingerprint of each staging), shown where Dagster shows it; a failed gate stops the
   backfill `gate_failed` (GateFailedError), a cancel meanwhile stops it `canceled`, lapsed
   leases fail it (LeaseLapsedError).
2. approval: a backfill that requires approval stops here, `awaiting_approval`, its leases
   parked and its assets frozen (approval_wait.py), until `backfill approve` publishes it.
3. commit_tables: one commit per table, upstream first, the release log's begin before the
   first (publish_step.py, which says what it checks and refuses first); the status
   `publishing`.
4. release: the release log's release (release_steps.py): readers through the library now
   read every table as after.
5. dagster_records: one publish run recording the materializations (dagster_events.py); a
   retract's partitions wiped.
6. ledger: the ledger's `published` rows.
7. notify: the notification hook hears `published` (notify.py).
8. published: the status `published`; the leases released.

Every surface that publishes walks this list: the coordinator from the gate once its nodes
are done (`walk_after_nodes`), `backfill publish`, `approve` and a retract from the table
commits (`publish`). Each stage is resumable: a table committed, the release and the publish
run are found in the tables' logs, the release log and the instance and not made twice;
and a stage the record says finished is not run again.

Not guaranteed: a stage killed after it took effect and before the record says so runs again on
resume: the ledger's `published` rows are then appended twice (`Ledger.latest` shows the
newest), the hook may hear `published` twice; the release log records the release twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import cached_property

import dagster as dg

from partition_assets.backfill.model import BackfillCommand, BackfillStatus, Node
from partition_assets.backfill.publishing import release_steps
from partition_assets.backfill.publishing.approval_wait import (
    approval_required,
    discard_approval_freeze,
    record_wait,
    start_waiting,
)
from partition_assets.backfill.publishing.backfill_stats import TableStats
from partition_assets.backfill.publishing.dagster_events import record_materializations, record_retraction
from partition_assets.backfill.publishing.gate_evaluation import GateCheck, format_checks
from partition_assets.backfill.publishing.gate_step import GateOutcome
from partition_assets.backfill.publishing.ledger_writes import append_status, latest
from partition_assets.backfill.publishing.notify import EventKind
from partition_assets.backfill.publishing.publication import Publication
from partition_assets.backfill.publishing.publish_step import PendingTable, commit_tables, describe_versions
from partition_assets.backfill.publishing.stage_runner import (
    RecordedProgress,
    Stage,
    StageResult,
    StageState,
    Walk,
    first_unfinished,
    stage_states,
    walk,
)
from partition_assets.backfill.publishing.tables import Tables
from partition_assets.backfill.state.approval import utc_now
from partition_assets.backfill.state.ledger import Ledger, LedgerEntry, LedgerStatus
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.errors import GateFailedError, LeaseLapsedError
from partition_assets.storage.failpoints import failpoint
from partition_assets.storage.leases import Lease, park, release

_CHECKS_SHOWN = 3
# The statuses a coordinator that died walking the stages leaves: where its resume goes on walking.
_WALKING = (BackfillStatus.RUNNING, BackfillStatus.PAUSED, BackfillStatus.PUBLISHING)


class PublishStage(StrEnum):
    """The publishing stages' names, as records keep them (`BackfillRecord.publish_stage`)."""

    GATE = "gate"
    APPROVAL = "approval"
    COMMIT_TABLES = "commit_tables"
    RELEASE = "release"
    DAGSTER_RECORDS = "dagster_records"
    LEDGER = "ledger"
    NOTIFY = "notify"
    PUBLISHED = "published"


def _ignore(_: object) -> None:
    return None


@dataclass(frozen=True)
class PublishInputs:
    """What the stages read, for one walk: the `publication` (record, tables, ledger, lake),
    the `instance`, the `leases` it holds; `force` (publish despite a failed gate or commits made
    outside it); the ledger rows an approval just wrote (`approved_rows`); for the gate, the
    statistics computed while the nodes ran (`ahead`) and the nodes skipped (`skipped`); where
    the gate's outcome is shown (`on_gate`) and a line per phase goes (`on_phase`); the tables still
    to publish as an approval just read and checked their staging (`approved_staging`; None: the
    table commits read them). The gate of the walk keeps the ledger rows it appended here (`gated`)."""

    publication: Publication
    instance: dg.DagsterInstance
    leases: list[Lease]
    force: bool = False
    approved_rows: Sequence[LedgerEntry] | None = None
    ahead: Mapping[dg.AssetKey, TableStats | None] | None = None
    skipped: Collection[Node] = ()
    on_gate: Callable[[GateOutcome], None] = _ignore
    on_phase: Callable[[str], None] = _ignore
    approved_staging: Sequence[PendingTable] | None = None
    # The ledger rows the gate of this walk appended (`gated`), for the stages after it.
    _gated_rows: list[Sequence[LedgerEntry]] = field(default_factory=list, init=False, repr=False, compare=False)

    def gated(self, result: Gated | Stopped) -> Gated | Stopped:
        """The gate stage's `result`, the ledger rows it appended kept for the stages after it."""
        if isinstance(result, Gated):
            self._gated_rows[:] = [result.outcome.rows]
        return result

    @cached_property
    def ledger_rows(self) -> Sequence[LedgerEntry]:
        """The backfill's latest ledger rows, once per walk: those the approval (`approved_rows`) or
        the gate of this walk just wrote (a second's read of 9,125 rows spared), else read."""
        if self.approved_rows is not None:
            return self.approved_rows
        if self._gated_rows:
            return self._gated_rows[0]
        return latest(self.publication.ledger, self.publication.record.id)


# -- each stage's result -------------------------------------------------------------------


@dataclass(frozen=True)
class Gated(StageResult):
    outcome: GateOutcome


@dataclass(frozen=True)
class Stopped(StageResult):
    """The backfill stopped short of publishing: canceled meanwhile. Its leases are parked."""

    goes_on = False
    status: BackfillStatus


@dataclass(frozen=True)
class NoApprovalRequired(StageResult):
    pass


@dataclass(frozen=True)
class AwaitingApproval(StageResult):
    """The backfill waits for an approval since `since`; its leases are parked."""

    goes_on = False
    since: datetime


@dataclass(frozen=True)
class TablesCommitted(StageResult):
    versions: Mapping[str, int | None]


@dataclass(frozen=True)
class Released(StageResult):
    versions: Mapping[str, int | None]


@dataclass(frozen=True)
class DagsterRecorded(StageResult):
    retraction_wiped: bool


@dataclass(frozen=True)
class LedgerWritten(StageResult):
    rows: int


@dataclass(frozen=True)
class Notified(StageResult):
    heard: bool  # False: no hook, or one that raised (notify.py)


@dataclass(frozen=True)
class StatusPublished(StageResult):
    versions: Mapping[str, int | None]


# -- the stages ------------------------------------------------------------------------------


def gate(
    publication: Publication,
    leases: list[Lease],
    ahead: Mapping[dg.AssetKey, TableStats | None] | None,
    skipped: Collection[Node],
    on_gate: Callable[[GateOutcome], None],
    on_phase: Callable[[str], None],
) -> Gated | Stopped:
    """Gates a staged backfill whose nodes all succeeded or were skipped (the ledger's rows
    name those: `skipped`), unless it lost its leases (checked before and after) or was
    canceled meanwhile.

    Raises:
        GateFailedError: A check failed: the backfill is `gate_failed`, its leases parked, nothing published.
        LeaseLapsedError: Its leases lapsed: it failed, its leases parked, nothing published.
    """
    record = publication.record
    _check_held(publication, leases)
    started = time.monotonic()
    outcome = publication.gate(ahead, skipped)
    on_gate(outcome)
    checks, failed = outcome.checks, list(outcome.failed)
    if checks:  # no gate declared: nothing to say
        passed = len(checks) - len(failed)
        on_phase(f"gate: {passed} of {len(checks)} checks passed ({time.monotonic() - started:.1f} s)")
    if failed:
        if not record.move_unless_canceled(BackfillStatus.GATE_FAILED, BackfillCommand.COORDINATE):
            return _stopped(publication, leases)
        record_wait(record, utc_now())  # its --approval-expires runs from now for `approve --force`
        _stop(publication, leases, "gate_failed", f"{len(failed)} checks failed")
        raise GateFailedError(gate_failure(record.id, failed))
    if record.stored_status() == BackfillStatus.CANCELED:
        return _stopped(publication, leases)
    _check_held(publication, leases)
    return Gated(outcome)


def await_approval(
    publication: Publication, instance: dg.DagsterInstance, leases: list[Lease], on_phase: Callable[[str], None]
) -> NoApprovalRequired | AwaitingApproval | Stopped:
    """Parks a gated backfill that requires approval in `awaiting_approval`, its leases
    parked and its assets frozen, for `backfill approve` (or discard, or expiry) to end."""
    if not approval_required(publication, instance):
        return NoApprovalRequired()
    record = publication.record
    since = utc_now()
    start_waiting(publication, instance, since)
    if not record.move_unless_canceled(BackfillStatus.AWAITING_APPROVAL, BackfillCommand.COORDINATE):
        discard_approval_freeze(instance, record.id)
        return _stopped(publication, leases)
    park(leases)
    on_phase(
        f"gate passed; awaiting approval: `partition-assets backfill approve {record.id} --by NAME` "
        f"publishes it (the Launchpad's backfill_approve job too), `partition-assets backfill discard "
        f"{record.id}` drops it"
    )
    return AwaitingApproval(since)


def commit(
    record: BackfillRecord, tables: Tables, lake: str | None, force: bool, read: Sequence[PendingTable] | None
) -> TablesCommitted:
    """See publish_step.commit_tables."""
    return TablesCommitted(commit_tables(record, tables, lake, force, read))


def release_tables(record: BackfillRecord, tables: Tables, lake: str | None) -> Released:
    """The release log's release of the publish: every table at the version it published."""
    release_steps.release(lake, release_steps.ReleaseOperation.PUBLISH, record.id, tables, record.published_versions)
    return Released(dict(record.published_versions))


def record_in_dagster(
    instance: dg.DagsterInstance, publication: Publication, rows: Sequence[LedgerEntry]
) -> DagsterRecorded:
    """The publish run's materializations (dagster_events.record_materializations: skipped when
    an earlier one succeeded); a retract's partitions wiped, before its status says published."""
    record = publication.record
    record_materializations(instance, record, publication.definitions, publication.graph, publication.tables, rows)
    if record.is_retract:  # a kill before the wipe is resumed here
        failpoint("retract_wiping")
        record_retraction(instance, record)
    return DagsterRecorded(record.is_retract)


def write_ledger(ledger: Ledger | None, record: BackfillRecord, rows: Sequence[LedgerEntry]) -> LedgerWritten:
    """The ledger's `published` rows (ledger_writes.append_status)."""
    return LedgerWritten(len(append_status(ledger, record, LedgerStatus.PUBLISHED, rows=rows)))


def announce(publication: Publication) -> Notified:
    """The notification hook hears `published`."""
    return Notified(publication.notify("published", f"{len(publication.tables)} tables"))


def mark_published(record: BackfillRecord, leases: list[Lease]) -> StatusPublished:
    """The status `published`; the leases released."""
    record.move_to(BackfillStatus.PUBLISHED, BackfillCommand.PUBLISH)
    release(leases)
    return StatusPublished(dict(record.published_versions))


P = PublishStage
PUBLISH_STAGES: tuple[Stage[PublishInputs], ...] = (
    Stage(
        P.GATE,
        "the gate evaluated on the staged data (ledger: staged rows); a failed gate stops it",
        lambda i: i.gated(gate(i.publication, i.leases, i.ahead, i.skipped, i.on_gate, i.on_phase)),
    ),
    Stage(
        P.APPROVAL,
        "waits for `backfill approve` when approval is required",
        lambda i: await_approval(i.publication, i.instance, i.leases, i.on_phase),
    ),
    Stage(
        P.COMMIT_TABLES,
        "one commit per table, upstream first (release log: begin)",
        lambda i: commit(i.publication.record, i.publication.tables, i.publication.lake, i.force, i.approved_staging),
    ),
    Stage(
        P.RELEASE,
        "the release log releases every table at once",
        lambda i: release_tables(i.publication.record, i.publication.tables, i.publication.lake),
    ),
    Stage(
        P.DAGSTER_RECORDS,
        "one publish run records the materializations in Dagster",
        lambda i: record_in_dagster(i.instance, i.publication, i.ledger_rows),
    ),
    Stage(
        P.LEDGER,
        "the ledger's published rows",
        lambda i: write_ledger(i.publication.ledger, i.publication.record, i.ledger_rows),
    ),
    Stage(P.NOTIFY, "the notification hook hears `published`", lambda i: announce(i.publication)),
    Stage(
        P.PUBLISHED,
        "the status says published; the leases are released",
        lambda i: mark_published(i.publication.record, i.leases),
    ),
)


# -- the walks -------------------------------------------------------------------------------


def start_after_nodes(record: BackfillRecord, entered: BackfillStatus, nodes_left: bool) -> str | None:
    """Where the coordinator's walk starts once its nodes are done, decided before they run: the
    gate, unless its coordinator died walking (it `entered` running, paused or publishing) and
    no node is left to run: then the first stage not finished (none before the table commits
    when it was publishing; None: every one finished). Walking from the gate, the record
    forgets the stages an earlier walk finished now, before a node stages new data."""
    if entered not in _WALKING or (nodes_left and entered != BackfillStatus.PUBLISHING):
        if record.publish_stage is not None:
            RecordedProgress(record).record(None)
        return P.GATE
    at_least = P.COMMIT_TABLES if entered == BackfillStatus.PUBLISHING else P.GATE
    return first_unfinished(PUBLISH_STAGES, record.publish_stage, at_least)


def walk_after_nodes(inputs: PublishInputs, start: str | None) -> Walk | None:
    """The coordinator's walk from `start` (`start_after_nodes`; None: nothing left)."""
    if start is None:
        return None
    return walk(PUBLISH_STAGES, inputs, RecordedProgress(inputs.publication.record), start)


def publish(
    publication: Publication,
    instance: dg.DagsterInstance,
    leases: list[Lease],
    force: bool = False,
    approved_rows: Sequence[LedgerEntry] | None = None,
    approved_staging: Sequence[PendingTable] | None = None,
) -> dict[str, int | None]:
    """Publishes: walks the stages from the table commits on (a publish cut short: from the
    first it had not finished), which release `leases` once the status says published;
    returns the published versions. `approved_rows`: the ledger's latest rows of the backfill
    when the caller just wrote them (an approval), else read once; `approved_staging`: the
    tables still to publish with their staging as the caller just read and checked it (an
    approval), else read by the table commits. Idempotent (see the module docstring)."""
    record = publication.record
    start = first_unfinished(PUBLISH_STAGES, record.publish_stage, P.COMMIT_TABLES)
    if start is not None:
        inputs = PublishInputs(
            publication, instance, leases, force=force, approved_rows=approved_rows, approved_staging=approved_staging
        )
        walk(PUBLISH_STAGES, inputs, RecordedProgress(record), start)
    return dict(record.published_versions)


def published_line(record: BackfillRecord, walked: Walk) -> str:
    """`published: a v3, b v7 (1.2 s: commit_tables 1.0 s, ...)`: the wall seconds of the stages
    from the table commits on."""
    publish_part = {P.GATE, P.APPROVAL}
    seconds = {name: spent for name, spent in walked.clock.seconds.items() if name not in publish_part}
    split = ", ".join(f"{name} {spent:.1f} s" for name, spent in seconds.items())
    return f"published: {describe_versions(record.published_versions)} ({sum(seconds.values()):.1f} s: {split})"


def stage_lines(record: BackfillRecord) -> list[str]:
    """A line per publishing stage with its state for `record`'s backfill (done, next or pending),
    for `backfill status --verbose`; a record of an earlier release that published shows every one done."""
    last = record.publish_stage
    if last is None and record.status == BackfillStatus.PUBLISHED:
        last = P.PUBLISHED
    states = stage_states(PUBLISH_STAGES, last)
    width = max(len(state) for state in StageState)
    return [
        f"  {number}. {state:<{width}}  {stage.name}: {stage.does}"
        for number, (stage, state) in enumerate(states, start=1)
    ]


# -- shared by the gate and approval stages --------------------------------------------------


def _check_held(publication: Publication, leases: list[Lease]) -> None:
    """Fails the backfill (LeaseLapsedError, nothing published) when its leases lapsed."""
    try:
        publication.check_held()
    except LeaseLapsedError as error:
        publication.record.move_unless_canceled(BackfillStatus.FAILED, BackfillCommand.COORDINATE)
        _stop(publication, leases, "failed", str(error))
        raise


def _stopped(publication: Publication, leases: list[Lease]) -> Stopped:
    """A backfill canceled meanwhile, stopped: its leases parked, the hook told."""
    _stop(publication, leases, "canceled", "")
    return Stopped(BackfillStatus.CANCELED)


def _stop(publication: Publication, leases: list[Lease], kind: EventKind, detail: str) -> None:
    """A staged backfill that stops short of publishing keeps its partitions leased (parked)
    until it is published, resumed or discarded."""
    park(leases)
    publication.notify(kind, detail)


def gate_failure(backfill_id: str, failed: Sequence[GateCheck]) -> str:
    """What failed the gate, and the three ways on."""
    shown = format_checks(failed[:_CHECKS_SHOWN])
    more = f"\n... and {len(failed) - _CHECKS_SHOWN} more" if len(failed) > _CHECKS_SHOWN else ""
    return (
        f"{shown}{more}\nbackfill {backfill_id}: the validation gate failed ({len(failed)} checks); nothing was "
        f"published. Review `partition-assets backfill diff {backfill_id}`, then `backfill publish {backfill_id} "
        f"--force` or `backfill discard {backfill_id}`."
    )
