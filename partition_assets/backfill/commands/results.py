"""What each command returns: a typed result per operation, which every surface renders.

The command line prints a result (cli/backfill.py), a Launchpad job logs it and fails its
run when it says the command did not succeed (automation/operations.py), a Python caller
reads its fields. `message` is the one line both surfaces show, worded once, here.

Not guaranteed: a result is a snapshot taken when the command returned; the backfill's
record may change right after (another command, its coordinator).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

import dagster as dg

from partition_assets.backfill.model import BackfillStatus, Node, NodeStatus, PublishMode
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.planning.policy_runs import AssetRuns
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing.diff import DiffRow
from partition_assets.backfill.publishing.gate_evaluation import GateCheck, format_checks
from partition_assets.backfill.publishing.publish_step import describe_versions
from partition_assets.backfill.publishing.schema_plan import TableSchemaPlan
from partition_assets.backfill.publishing.stages import stage_lines
from partition_assets.backfill.running.lineup import Standing
from partition_assets.backfill.state.ledger import LedgerEntry
from partition_assets.backfill.state.record import BackfillRecord, skipped_as_current
from partition_assets.backfill.state.skipped_ranges import SkippedNodes


@dataclass(frozen=True)
class BackfillPlan:
    """A planned backfill (`plan_backfill`): its graph and what it would cost; nothing launched."""

    spec: BackfillSpec
    graph: BackfillGraph
    seconds_per_node: Mapping[dg.AssetKey, float]  # as earlier engine runs measured them, 1 s when unknown
    critical_path: tuple[Node, ...]
    critical_seconds: float
    impacted: Mapping[dg.AssetKey, int]  # assets outside the selection reading rewritten partitions: how many
    schema_changes: tuple[TableSchemaPlan, ...]
    current_nodes: int  # nodes catch-up would skip (0 without --catch-up)
    # Per asset: its BackfillPolicy, the partitions the backfill runs (catch-up's current ones left
    # out) and the runs it makes of them (planning/policy_runs.py).
    asset_runs: Mapping[dg.AssetKey, AssetRuns] = field(default_factory=dict)

    @property
    def work_seconds(self) -> float:
        """The seconds of every node that runs (its asset's `asset_runs` partitions)."""
        return sum(runs.partitions * self.seconds_per_node[key] for key, runs in self.asset_runs.items())

    @property
    def eta_seconds(self) -> float:
        """The longer of the critical path and the work spread over the backfill's slots."""
        return max(self.critical_seconds, self.work_seconds / self.spec.max_parallel)


@dataclass(frozen=True)
class RunOutcome:
    """How a run of the backfill's nodes ended (run, resume, retry, adopt): `message` is its
    summary, or why it stopped short of publishing, or why it ran nothing."""

    backfill_id: str
    message: str
    succeeded: bool


@dataclass(frozen=True)
class DetachedRun:
    """A backfill handed to the instance's run launcher (`run --detach`)."""

    backfill_id: str
    run_id: str

    @property
    def message(self) -> str:
        return (
            f"backfill {self.backfill_id} handed to the run launcher: coordinator run {self.run_id}; follow it with "
            f"`partition-assets backfill status {self.backfill_id}`"
        )


@dataclass(frozen=True)
class StatusReport:
    """Where a recorded backfill stands (`backfill_status`), per node and as a whole."""

    record: BackfillRecord
    graph: BackfillGraph
    node_states: dict[Node, NodeStatus]  # nodes with no run yet are absent
    launch: str | None  # when it launches next, for a paused or windowed backfill
    silence: str | None  # its coordinator has gone silent: what to do
    previous_versions: tuple[str, ...] | None  # with --keep-previous: the versions kept
    fewer_runs: str | None = None  # running with fewer runs at a time than --max-parallel: how many and why
    unpublished: str | None = None  # a staged backfill that failed: nothing published, and what publishes it

    @property
    def title(self) -> str:
        what = "retract of " if self.record.retracted else ""
        return f"backfill {self.record.id} ({self.record.status}): {what}{self.record.spec.describe()}"

    @property
    def current(self) -> SkippedNodes:
        """The nodes a --catch-up start left alone as current: no run of them comes (not missing)."""
        return skipped_as_current(self.record, self.graph)

    @property
    def retracted_lines(self) -> list[str]:
        """For a retract (which runs no node: its map shows no run), a line per asset naming
        the partitions it removed: `retracted: daily_orders 2024-03-03, 2024-03-04`."""
        return [f"retracted: {asset} {', '.join(keys)}" for asset, keys in self.record.retracted.items()]

    @property
    def failed_lines(self) -> list[str]:
        """A line per asset whose latest run of some partitions failed, naming those partition
        keys in partition order: `failed: daily_orders 2024-03-06` (a range run that failed was
        run again in halves, so these are the partitions that fail on their own)."""
        return self._lines_of(NodeStatus.FAILED)

    @property
    def blocked_lines(self) -> list[str]:
        """A line per asset with partitions blocked behind a failed node (never run: Dagster's
        partition status reads them failed, publishing/dagster_events.py `record_failures`),
        naming them in partition order: `blocked: arrivals_doubled 2024-01-03`."""
        return self._lines_of(NodeStatus.BLOCKED)

    @property
    def skipped_lines(self) -> list[str]:
        """A line per asset with skipped partitions (no output yielded, by it or upstream:
        running/skips.py), naming them in partition order: `skipped: arrivals 2024-01-02`."""
        return self._lines_of(NodeStatus.SKIPPED)

    @property
    def stage_lines(self) -> list[str]:
        """Its publishing stages in order (backfill/publishing/stages.py), each `done`, `next`
        or `pending` as its record says, under a heading line; a backfill publishing per node has none."""
        if self.record.spec.publish != PublishMode.staged:
            return ["publishing stages: none (it publishes per node, as each node run writes)"]
        return ["publishing stages:", *stage_lines(self.record)]

    def _lines_of(self, status: NodeStatus) -> list[str]:
        """A line per asset of the graph with nodes in `status`, its partitions in the graph's
        order; from the nodes that have a state, not from every partition of the graph."""
        partitions: dict[dg.AssetKey, list[str]] = {}
        for node, state in self.node_states.items():
            if state == status:
                partitions.setdefault(node.asset, []).append(node.partition)
        lines = []
        for asset, asset_slice in self.graph.slices.items():
            index_of = asset_slice.index_of
            keys = sorted((key for key in partitions.get(asset, ()) if key in index_of), key=index_of.__getitem__)
            if keys:
                lines.append(f"{status.value}: {asset.to_user_string()} {', '.join(keys)}")
        return lines


class Committed(StrEnum):
    """What a command's commit of the backfill's tables did: published it or rolled it back."""

    PUBLISHED = "published"
    ROLLED_BACK = "rolled back"


@dataclass(frozen=True)
class Published:
    """A publish, approval or rollback that committed the backfill's tables: {table: version};
    `approved_by` names the approver when an approval did it."""

    backfill_id: str
    done: Committed
    versions: Mapping[str, int | None]
    approved_by: str | None = None

    @property
    def verb(self) -> str:
        """ "published", "rolled back", or "approved by NAME and " either."""
        return self.done if self.approved_by is None else f"approved by {self.approved_by} and {self.done}"

    @property
    def message(self) -> str:
        return f"backfill {self.backfill_id} {self.verb}: {describe_versions(dict(self.versions))}"


@dataclass(frozen=True)
class RollbackRequested:
    """A rollback that requires approval, recorded and awaiting it: nothing restored yet."""

    backfill_id: str

    @property
    def message(self) -> str:
        return (
            f"backfill {self.backfill_id}'s rollback is awaiting approval (nothing restored yet): `partition-assets "
            f"backfill approve {self.backfill_id} --by NAME` rolls it back"
        )


@dataclass(frozen=True)
class RemovedPartition:
    """A partition a retract removes from its table, and the rows it held (None: not known, a
    retract resumed after its first table commit)."""

    asset: str
    partition: str
    rows: int | None


@dataclass(frozen=True)
class Retracted:
    """A retract (`retract_partitions`, or one resumed): the partitions it removes, one commit per
    table (`versions`: {table: version}; none while it awaits approval), and its gate's checks
    (failed ones are rows going to zero)."""

    backfill_id: str
    removed: tuple[RemovedPartition, ...]
    versions: Mapping[str, int | None]
    gate_checks: tuple[GateCheck, ...]
    awaiting_approval: bool = False

    @property
    def lines(self) -> tuple[str, ...]:
        """One line per removed partition (rows before -> 0), then the gate's failed checks."""
        verb = "to remove" if self.awaiting_approval else "removed"
        removed = tuple(
            f"{verb} {f'{p.asset} {p.partition}'.rstrip()}" + ("" if p.rows is None else f": {p.rows} rows -> 0")
            for p in self.removed
        )
        failed = format_checks(self.gate_checks)
        return removed + ((f"gate (recorded in the ledger; a retract publishes anyway):\n{failed}",) if failed else ())

    @property
    def outcome(self) -> RunOutcome:
        """This retract as the result of a command that continues a backfill (resume, a coordinator run)."""
        return RunOutcome(self.backfill_id, self.message, succeeded=True)

    @property
    def message(self) -> str:
        if self.awaiting_approval:
            return (
                f"backfill {self.backfill_id} retracts {len(self.removed)} partitions once approved (nothing removed "
                f"yet): `partition-assets backfill approve {self.backfill_id} --by NAME` removes them, "
                f"`partition-assets backfill discard {self.backfill_id}` drops the retract"
            )
        return (
            f"backfill {self.backfill_id} retracted {len(self.removed)} partitions: "
            f"{describe_versions(dict(self.versions))}; `partition-assets backfill rollback {self.backfill_id}` "
            "brings them back"
        )


@dataclass(frozen=True)
class Discarded:
    backfill_id: str
    staged_files_deleted: int

    @property
    def message(self) -> str:
        return (
            f"backfill {self.backfill_id} discarded: {self.staged_files_deleted} staged files deleted; "
            "the tables are unchanged"
        )


@dataclass(frozen=True)
class Canceled:
    backfill_id: str
    runs_canceled: int

    @property
    def message(self) -> str:
        return f"backfill {self.backfill_id} canceled; {self.runs_canceled} runs in flight canceled"


@dataclass(frozen=True)
class PauseChanged:
    """A backfill paused or unpaused; `paused` says which."""

    backfill_id: str
    paused: bool

    @property
    def message(self) -> str:
        if self.paused:
            return f"backfill {self.backfill_id} paused: it launches nothing new, its runs in flight finish"
        return f"backfill {self.backfill_id} unpaused: it launches its nodes again"


@dataclass(frozen=True)
class Extended:
    """A backfill whose time range `extend_backfill` widened to `start`..`end`: `added` nodes
    joined its plan of `nodes`, `pending` of which its `resume` runs (the others are done)."""

    backfill_id: str
    start: str
    end: str
    added: int
    nodes: int
    pending: int
    status: BackfillStatus

    @property
    def message(self) -> str:
        return (
            f"backfill {self.backfill_id} extended to {self.start}..{self.end} ({self.status.value}): {self.added} "
            f"nodes joined its plan of {self.nodes}; `partition-assets backfill resume {self.backfill_id}` runs the "
            f"{self.pending} not done, then gates and publishes the whole range"
        )


@dataclass(frozen=True)
class TableDiff:
    """One table's staged rows against its published ones, per partition."""

    asset: str
    rows: tuple[DiffRow, ...]


@dataclass(frozen=True)
class DiffReport:
    """A staged backfill's diff; no tables when it has no staged data (its `status` says why)."""

    backfill_id: str
    status: BackfillStatus
    tables: tuple[TableDiff, ...]


@dataclass(frozen=True)
class LedgerReport:
    """What a backfill read and wrote, per (asset, partition); with --keep-previous, the
    versions it kept."""

    backfill_id: str
    entries: tuple[LedgerEntry, ...]
    previous_versions: tuple[str, ...] | None


@dataclass(frozen=True)
class Lineup:
    """Every recorded backfill's standing at `at` (`list_backfills`), oldest first."""

    at: datetime
    standings: tuple[Standing, ...]


@dataclass(frozen=True)
class TakeoverClaim:
    """A backfill whose coordinator fell silent, claimed by this caller to resume under a new
    coordinator (`claim_silent_backfills`), with its recorded spec."""

    backfill_id: str
    spec: BackfillSpec
