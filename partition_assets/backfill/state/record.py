"""A backfill's record: its parameters and progress in the Dagster instance's database
(backfill/state/store.py), its nodes' states in the instance's runs.

The plan is kept: its parameters (the spec) and its nodes and edges (`stored_plan`:
backfill/state/stored_plan.py), from which every command rebuilds the graph. Each node's state is
that of its latest run tagged with the backfill id and proving its coordinator launched it
(dagster_instance/lease_proof.py), so the instance stays the single truth: a node whose run succeeded
is never run again, whatever happened to the coordinator.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

import dagster as dg

from partition_assets.backfill.model import Approval, BackfillCommand, BackfillStatus, Node, NodeStatus
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.planning.keys import UNPARTITIONED
from partition_assets.backfill.planning.node_runs import DoneNodes
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.state.skipped_ranges import SkippedNodes, StoredSkipped
from partition_assets.dagster_instance.lease_proof import proven_backfills
from partition_assets.errors import IllegalTransitionError
from partition_assets.ids import checked_backfill_id
from partition_assets.run_tags import BACKFILL_ID_TAG, IN_FLIGHT_STATUSES, LAUNCHED_TAG, SKIPPED_TAG, partitions_of_run
from partition_assets.state_formats import FORMAT_FIELD, RECORD_FORMAT, checked_format

if TYPE_CHECKING:
    from partition_assets.backfill.state.store import BackfillStore

_log = logging.getLogger(__name__)

_RUN_STATES = {
    dg.DagsterRunStatus.SUCCESS: NodeStatus.SUCCEEDED,
    dg.DagsterRunStatus.FAILURE: NodeStatus.FAILED,
    dg.DagsterRunStatus.CANCELED: NodeStatus.FAILED,
}


@dataclass
class BackfillRecord:
    """A backfill's spec, where it stands (`status`: backfill/state/status.py), and what its
    publication has done so far; bound to the `store` that keeps it.

    `status` is the status as this object last read or changed it: `move_to` changes it in
    the store (a compare-and-set), `save` writes every other field and never the status.

    Raises:
        BackfillIdError: `id` cannot name a backfill.
    """

    spec: BackfillSpec
    status: BackfillStatus = BackfillStatus.RUNNING
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    # asset -> partition -> the published files its lease found when the backfill started
    fingerprints: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    # asset -> the table version its publish commit created
    published_versions: dict[str, int | None] = field(default_factory=dict)
    # asset -> partitions the backfill created (absent before it): a rollback removes them
    created: dict[str, list[str]] = field(default_factory=dict)
    # asset -> partition -> input asset -> the version pinned (--inputs-as-of); None until pinned
    pinned_inputs: dict[str, dict[str, dict[str, int]]] | None = None
    # when it waited for approval, who approved it (backfill/state/approval.py); None until it waits
    approval: Approval | None = None
    # who launched it (backfill/state/approval.py `launcher`); None for records of earlier releases
    launched_by: str | None = None
    # asset -> the fingerprint of its staging that the gate evaluated (storage/backfill_staging.py):
    # a publish commits that staging or nothing
    gated_staging: dict[str, dict[str, str | int]] = field(default_factory=dict)
    # asset -> the partitions a retract removes (`backfill retract`), recorded when it starts: a
    # record with any is a retract, which every command continues as one; a rollback re-records them
    retracted: dict[str, list[str]] = field(default_factory=dict)
    # asset -> the commit, code version and runtime that made its partitions' content before the
    # backfill replaced it, grouped (backfill/publishing/provenance.py): what a rollback restores.
    # None until the backfill starts, and in records of earlier releases (nothing known).
    restored_provenance: dict[str, list[dict]] | None = None
    # asset -> the partitions a --catch-up backfill left alone as current when it started: never
    # run by it, also when resumed (`done_nodes`); as stored (backfill/state/skipped_ranges.py:
    # runs of its stored plan's partitions, or keys listed in records of earlier releases)
    skipped: StoredSkipped = field(default_factory=dict)
    # who asked for its rollback under an approval policy, when, who approved it; None until asked
    rollback_approval: Approval | None = None
    # its graph's nodes and edges (backfill/state/stored_plan.py), stored when it starts or is
    # extended; None in records of earlier releases until a command plans them once
    stored_plan: dict | None = None
    # the last publishing stage its publish finished (backfill/publishing/stages.py): where a
    # resumed publish goes on; None before its first stage, and in records of earlier releases
    publish_stage: str | None = None
    store: BackfillStore = field(kw_only=True, repr=False, compare=False)
    # The fields as stored when this object read or last wrote them (None: never stored):
    # `save` writes only over those (BackfillStore.save).
    stored_body: str | None = field(default=None, kw_only=True, repr=False, compare=False)

    def __post_init__(self) -> None:
        checked_backfill_id(self.id)

    def save(self) -> None:
        """Writes every field but the status (inserting the record, with its status, the first
        time), over the fields as this object read them (see BackfillStore.save).

        Raises:
            RecordChangedError: Another process wrote the record since this object read it; nothing was written.
        """
        self.store.save(self)

    def reload(self) -> None:
        """Takes every field, the status included, as stored now (another process may have changed them).

        Raises:
            UnknownBackfillError: The record was never saved.
        """
        stored = self.store.load(self.id)
        for name in (f.name for f in fields(self) if f.name != "store"):
            setattr(self, name, getattr(stored, name))

    def move_to(self, target: BackfillStatus, action: BackfillCommand) -> None:
        """Changes the stored status to `target` (see BackfillStore.transition), and this object's with it.

        Raises:
            IllegalTransitionError: The stored status may not become `target`; nothing was written.
            UnknownBackfillError: The record was never saved.
        """
        self.store.transition(self.id, target, action)
        self.status = target

    def move_unless_canceled(self, target: BackfillStatus, action: BackfillCommand) -> bool:
        """`move_to`, but False when a cancel got there first (the compare-and-set refuses
        canceled -> `target`), which then stands.

        Raises:
            IllegalTransitionError: The stored status, not canceled, may not become `target`; nothing was written.
        """
        try:
            self.move_to(target, action)
        except IllegalTransitionError:
            if self.stored_status() != BackfillStatus.CANCELED:
                raise
            return False
        return True

    @property
    def is_retract(self) -> bool:
        """Whether the backfill removes partitions (`backfill retract`) rather than computing them."""
        return bool(self.retracted)

    def stored_status(self) -> BackfillStatus:
        """The status as stored now (another process may have changed it); this object takes it."""
        self.status = self.store.status(self.id)
        return self.status

    def to_json(self) -> dict:
        """Every field but the id and status, as stored, in this release's format (state_formats.py)."""
        return {
            FORMAT_FIELD: RECORD_FORMAT,
            "spec": self.spec.to_json(),
            "fingerprints": self.fingerprints,
            "published_versions": self.published_versions,
            "created": self.created,
            "pinned_inputs": self.pinned_inputs,
            # {} when none, as records of earlier releases hold it
            "approval": self.approval.to_json() if self.approval else {},
            "launched_by": self.launched_by,
            "gated_staging": self.gated_staging,
            "retracted": self.retracted,
            "restored_provenance": self.restored_provenance,
            "skipped": self.skipped,
            "rollback_approval": self.rollback_approval.to_json() if self.rollback_approval else {},
            "plan": self.stored_plan,
            "publish_stage": self.publish_stage,
        }

    @classmethod
    def from_json(cls, saved: dict, status: BackfillStatus, backfill_id: str, store: BackfillStore) -> BackfillRecord:
        """The record `to_json` wrote, in this release's format or an older one (or a record file
        of an earlier release: see store.py).

        Raises:
            StateFormatError: `saved` is in a format newer than this release reads; nothing was written.
        """
        check_record_format(saved, backfill_id)
        # Records written before the spec existed hold its fields at the top level.
        spec = saved.get("spec") or {k: v for k, v in saved.items() if k not in _RECORD_FIELDS}
        return cls(
            BackfillSpec.from_json(spec),
            status,
            backfill_id,
            saved.get("fingerprints", {}),
            saved.get("published_versions", {}),
            saved.get("created", {}),
            saved.get("pinned_inputs"),
            Approval.from_json(saved.get("approval")),
            saved.get("launched_by"),
            saved.get("gated_staging", {}),
            saved.get("retracted", {}),
            saved.get("restored_provenance"),
            saved.get("skipped", {}),
            Approval.from_json(saved.get("rollback_approval")),
            saved.get("plan"),
            saved.get("publish_stage"),
            store=store,
        )


def check_record_format(saved: Mapping, backfill_id: str) -> None:
    """StateFormatError when the record body `saved` is in a format newer than this release reads."""
    checked_format(saved, RECORD_FORMAT, f"the record of backfill {backfill_id}")


def cancel(store: BackfillStore, backfill_id: str) -> None:
    """Sets backfill `backfill_id` canceled, from any thread, process or host: its
    coordinator reads the stored status after every node. A backfill past canceling
    (publishing, published, rolling back, or final) is refused, naming the command that fits.

    Raises:
        IllegalTransitionError: The backfill may not be canceled; nothing was written.
        UnknownBackfillError: No record of `backfill_id`.
    """
    store.transition(backfill_id, BackfillStatus.CANCELED, BackfillCommand.CANCEL)


_RECORD_FIELDS = ("id", "status", "fingerprints", "published_versions", "created", "pinned_inputs")


def node_states(
    instance: dg.DagsterInstance, backfill_id: str, graph: BackfillGraph
) -> dict[Node, tuple[NodeStatus, dg.DagsterRun]]:
    """The state of each node of `graph` from its latest run tagged with `backfill_id`;
    a run over a partition range stands for every node of the range."""
    states: dict[Node, tuple[NodeStatus, dg.DagsterRun]] = {}
    for run in _runs_of(instance, backfill_id):  # newest first
        for asset in run.asset_selection or ():
            asset_slice = graph.slices.get(asset)
            if asset_slice is None:  # the asset is no longer in the backfill's graph
                continue
            for partition in partitions_of_run(run, asset_slice.partitions_def) or [UNPARTITIONED]:
                if partition in asset_slice.index_of:
                    states.setdefault(Node(asset, partition), (_run_state(run), run))
    return states


def with_nodes_settled_without_run(graph: BackfillGraph, states: dict[Node, NodeStatus]) -> dict[Node, NodeStatus]:
    """`states` (of the nodes that ran), and each node with no run downstream of a failed or
    blocked one as blocked, else of a skipped one as skipped: the coordinator settled it
    without a run, a failure winning over a skip (running/scheduling.py, running/skips.py)."""
    shown = dict(states)
    if not {NodeStatus.FAILED, NodeStatus.BLOCKED, NodeStatus.SKIPPED} & set(states.values()):
        return shown  # no node settles without a run: no pass over the whole graph
    for node in graph.nodes():  # parents before their children
        if node in shown:
            continue
        parents = {shown.get(parent) for parent in graph.upstream(node)}
        if parents & {NodeStatus.FAILED, NodeStatus.BLOCKED}:
            shown[node] = NodeStatus.BLOCKED
        elif NodeStatus.SKIPPED in parents:
            shown[node] = NodeStatus.SKIPPED
    return shown


def _run_state(run: dg.DagsterRun) -> NodeStatus:
    """The state of the nodes of `run`: skipped when it succeeded without its output (SKIPPED_TAG)."""
    if run.status == dg.DagsterRunStatus.SUCCESS and run.tags.get(SKIPPED_TAG):
        return NodeStatus.SKIPPED
    return _RUN_STATES.get(run.status, NodeStatus.RUNNING)


def _runs_of(instance: dg.DagsterInstance, backfill_id: str) -> Sequence[dg.DagsterRun]:
    """The backfill's node runs, newest first: the runs tagged with its id that prove their
    coordinator launched them (dagster_instance/lease_proof.py). A run that only carries its tags (a
    node run re-executed from the UI, tags typed in the Launchpad) wrote as a production run:
    it is none of the backfill's nodes, whatever it did."""
    return _proven_of(
        instance, backfill_id, instance.get_run_records(dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
    )


def _proven_of(instance: dg.DagsterInstance, backfill_id: str, records: Sequence[dg.RunRecord]) -> list[dg.DagsterRun]:
    """The runs of `records` that prove they are node runs of backfill `backfill_id`."""
    proven = proven_backfills(instance, records)
    return [record.dagster_run for record in records if proven.get(record.dagster_run.run_id) == backfill_id]


def _unfinished_runs_of(instance: dg.DagsterInstance, backfill_id: str) -> list[dg.DagsterRun]:
    """The backfill's node runs not finished, found by their status and the tags their run
    record holds, not by the instance's tag index: a worker killed as it created its run may
    leave a run without its tags there (Dagster writes them by a second statement), which a
    run's tags filter never finds (bench/soak/, seed 23)."""
    unfinished = instance.get_run_records(dg.RunsFilter(statuses=list(IN_FLIGHT_STATUSES)))
    claimed = [record for record in unfinished if record.dagster_run.tags.get(BACKFILL_ID_TAG) == backfill_id]
    return _proven_of(instance, backfill_id, claimed)


def cancel_in_flight(instance: dg.DagsterInstance, backfill_id: str) -> int:
    """Cancels the backfill's unfinished runs; returns how many. A run submitted through
    the run launcher is terminated by it (`cancel_launched_run`); any other (a local
    worker's, whose coordinator kills its workers) is marked canceled."""
    # Node runs only: a coordinator running as a Dagster job carries the tag too.
    unfinished = [run for run in _unfinished_runs_of(instance, backfill_id) if run.asset_selection]
    for run in unfinished:
        if run.tags.get(LAUNCHED_TAG) and cancel_launched_run(instance, run.run_id):
            continue
        current = instance.get_run_by_id(run.run_id)
        if current is not None and not current.is_finished:  # one that finished meanwhile keeps its status
            instance.report_run_canceled(current, message=f"backfill {backfill_id} canceled")
    return len(unfinished)


def cancel_launched_run(instance: dg.DagsterInstance, run_id: str) -> bool:
    """Asks the instance's run coordinator to cancel `run_id` (dequeue it, or have the run
    launcher terminate it); False when it could not, e.g. the launcher's code server is gone."""
    try:
        return instance.run_coordinator.cancel_run(run_id)
    except dg.DagsterError as error:  # the launcher cannot reach the run: the caller marks it canceled
        _log.warning("run %s: the run launcher could not terminate it (%s)", run_id, error)
        return False


def done_nodes(record: BackfillRecord, graph: BackfillGraph, instance: dg.DagsterInstance) -> DoneNodes:
    """The nodes of `graph` a resumed (or retried, or taken over) backfill does not run: those
    its record says a --catch-up start left alone as current (`skipped`, as recorded then, never
    judged again), and those whose latest run in this backfill succeeded; runs a dead
    coordinator left in flight are canceled first, since nobody will finish them."""
    cancel_in_flight(instance, record.id)
    return finished_nodes(record, graph, instance)


def finished_nodes(record: BackfillRecord, graph: BackfillGraph, instance: dg.DagsterInstance) -> DoneNodes:
    """`done_nodes` as they stand now, canceling nothing: reads only. The current ones stay the
    runs the record stores (a node made for none of them)."""
    succeeded = {
        node for node, (state, _) in node_states(instance, record.id, graph).items() if state == NodeStatus.SUCCEEDED
    }
    return DoneNodes(succeeded, skipped_as_current(record, graph))


def skipped_as_current(record: BackfillRecord, graph: BackfillGraph) -> SkippedNodes:
    """The nodes of `graph` a --catch-up start left alone as current (`skipped`, as recorded
    then), read as the runs the record stores."""
    return SkippedNodes.of(record.skipped, graph, record.id)


def by_asset(nodes: Iterable[Node]) -> dict[str, list[str]]:
    """`nodes` as a record keeps them: asset -> its partitions, in the order given."""
    grouped: dict[str, list[str]] = {}
    for node in nodes:
        grouped.setdefault(node.asset.to_user_string(), []).append(node.partition)
    return grouped


def nodes_of(grouped: Mapping[str, Sequence[str]]) -> list[Node]:
    """The nodes a record keeps as asset -> partitions (`by_asset`); each asset's key parsed once."""
    nodes: list[Node] = []
    for asset, partitions in grouped.items():
        key = dg.AssetKey.from_user_string(asset)
        nodes.extend(Node(key, partition) for partition in partitions)
    return nodes
