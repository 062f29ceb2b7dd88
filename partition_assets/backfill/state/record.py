"""A backfill's record: its parameters beside the Dagster instance, its nodes' states in it.

The plan's parameters live in `$DAGSTER_HOME/partition_assets/backfills/<id>.json`
(the graph is recomputed from them). Each node's state is that of its latest run
tagged with the backfill id, so the instance stays the single truth: a node whose
run succeeded is never run again, whatever happened to the coordinator.
"""

import json
import logging
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from partition_assets.backfill.planning.graph import BackfillGraph, Node
from partition_assets.backfill.planning.keys import UNPARTITIONED
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.running.scheduling import NodeStatus
from partition_assets.errors import BackfillStateError, EnvironmentSetupError, UnknownBackfillError
from partition_assets.ids import checked_backfill_id
from partition_assets.run_tags import BACKFILL_ID_TAG, LAUNCHED_TAG, partitions_of_run

_log = logging.getLogger(__name__)

_RUN_STATES = {
    dg.DagsterRunStatus.SUCCESS: NodeStatus.SUCCEEDED,
    dg.DagsterRunStatus.FAILURE: NodeStatus.FAILED,
    dg.DagsterRunStatus.CANCELED: NodeStatus.FAILED,
}


@dataclass
class BackfillRecord:
    """A backfill's spec, where it stands, and what its publication has done so far.

    Status: running | canceled | failed | done (published per node) | gate_failed |
    publish_refused (a foreign commit; nothing published) | publishing | published |
    discarded | rolling_back | rolled_back.

    Raises:
        BackfillIdError: `id` cannot name a file.
    """

    spec: BackfillSpec
    status: str = "running"
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    # asset -> partition -> the published files its lease found when the backfill started
    fingerprints: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    # asset -> the table version its publish commit created
    published_versions: dict[str, int | None] = field(default_factory=dict)
    # asset -> partitions the backfill created (absent before it): a rollback removes them
    created: dict[str, list[str]] = field(default_factory=dict)
    # asset -> partition -> input asset -> the version pinned (--inputs-as-of); None until pinned
    pinned_inputs: dict[str, dict[str, dict[str, int]]] | None = None
    # The status as this object last read or wrote it: see `save`.
    _status_seen: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        checked_backfill_id(self.id)

    def save(self) -> None:
        """Writes the record atomically. A status this object did not change is not written
        back: the status saved meanwhile by another process (a `cancel`) stands, and this
        object takes it. Not guaranteed: two processes changing the status at the same
        moment (the later write wins; backfill/state/presence.py keeps two coordinators apart).

        Raises:
            EnvironmentSetupError: DAGSTER_HOME is not set.
        """
        path = record_path(self.id)
        path.parent.mkdir(parents=True, exist_ok=True)
        if self.status == self._status_seen and path.exists():
            self.status = json.loads(path.read_text()).get("status", self.status)
        self._status_seen = self.status
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        saved = {
            "id": self.id,
            "status": self.status,
            "spec": self.spec.to_json(),
            "fingerprints": self.fingerprints,
            "published_versions": self.published_versions,
            "created": self.created,
            "pinned_inputs": self.pinned_inputs,
        }
        temporary.write_text(json.dumps(saved, indent=2))
        temporary.replace(path)  # readers never see a half-written record

    @classmethod
    def load(cls, backfill_id: str) -> "BackfillRecord":
        """The record of `backfill_id`; UnknownBackfillError lists the recorded ids.

        Raises:
            UnknownBackfillError: No record of `backfill_id` is saved; the message lists the recorded ids.
            EnvironmentSetupError: DAGSTER_HOME is not set.
            BackfillIdError: `backfill_id` cannot name a file.
        """
        path = record_path(backfill_id)
        if not path.exists():
            known = sorted(p.stem for p in path.parent.glob("*.json")) if path.parent.exists() else []
            raise UnknownBackfillError(
                f"no backfill {backfill_id!r} is recorded under {path.parent}; "
                + (f"known: {', '.join(known[-20:])}" if known else "none is (check DAGSTER_HOME)")
            )
        saved = json.loads(path.read_text())
        # Records written before the spec existed hold its fields at the top level.
        spec = saved.pop("spec", None) or {k: v for k, v in saved.items() if k not in _RECORD_FIELDS}
        record = cls(
            BackfillSpec.from_json(spec),
            saved.get("status", "running"),
            saved["id"],
            saved.get("fingerprints", {}),
            saved.get("published_versions", {}),
            saved.get("created", {}),
            saved.get("pinned_inputs"),
        )
        record._status_seen = record.status
        return record


class SavedStatus:
    """The saved status of backfill `backfill_id`, read again only when its record file
    was replaced since the last read (`BackfillRecord.save` always replaces it): cheap
    enough to ask after every node result. A full load parses the whole record, whose
    lease fingerprints list every partition: 20 ms for a 365-day hourly backfill.

    Not guaranteed: a record edited in place within the same nanosecond timestamp and
    size is not seen; `save` never does that.

    Raises:
        EnvironmentSetupError: DAGSTER_HOME is not set.
        BackfillIdError: `backfill_id` cannot name a file.
    """

    def __init__(self, backfill_id: str) -> None:
        self._backfill_id = backfill_id
        self._path = record_path(backfill_id)
        self._read_from: tuple[int, int, int] | None = None
        self._status = ""

    def current(self) -> str:
        """The status as saved now; UnknownBackfillError when the record is gone.

        Raises:
            UnknownBackfillError: The record is gone; the message lists the recorded ids.
        """
        try:
            stat = self._path.stat()
        except FileNotFoundError:
            return BackfillRecord.load(self._backfill_id).status  # raises, naming the recorded ids
        # A replaced file is a new inode; its time and size tell an in-place edit too.
        identity = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if identity != self._read_from:
            self._status = BackfillRecord.load(self._backfill_id).status
            self._read_from = identity
        return self._status


# A backfill in one of these has nothing left to run or publish.
FINAL_STATUSES = ("done", "published", "discarded", "rolled_back")
# A cancel stops a backfill with nodes or a gate ahead; one publishing or rolling back is past it.
_PAST_CANCELING = (*FINAL_STATUSES, "publishing", "rolling_back")


def cancel(backfill_id: str) -> BackfillRecord:
    """Saves backfill `backfill_id` as canceled, from any thread or process: its coordinator
    reads it (`SavedStatus`), and the holder of its record takes it at its next save
    (`BackfillRecord.save`). BackfillStateError, nothing changed, when it is past canceling
    (publishing, published, rolling back or rolled back, done, discarded): a published
    backfill is undone by rollback. UnknownBackfillError when no record is saved.

    Raises:
        BackfillStateError: The backfill is past canceling; nothing was changed.
        UnknownBackfillError: No record of `backfill_id` is saved.
        EnvironmentSetupError: DAGSTER_HOME is not set.
        BackfillIdError: `backfill_id` cannot name a file.
    """
    record = BackfillRecord.load(backfill_id)
    if record.status in _PAST_CANCELING:
        raise BackfillStateError(
            f"backfill {backfill_id} is {record.status}: there is nothing to cancel"
            + (
                f"; undo what it published with `partition-assets backfill rollback {backfill_id}`"
                if record.status in ("published", "publishing")
                else ""
            )
            + ". Nothing was changed."
        )
    record.status = "canceled"
    record.save()
    return record


_RECORD_FIELDS = ("id", "status", "fingerprints", "published_versions", "created", "pinned_inputs")


def record_path(backfill_id: str) -> Path:
    """Where backfill `backfill_id`'s record is saved: `$DAGSTER_HOME/partition_assets/backfills/<id>.json`.

    Raises:
        EnvironmentSetupError: DAGSTER_HOME is not set.
        BackfillIdError: `backfill_id` cannot name a file.
    """
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        raise EnvironmentSetupError(
            "DAGSTER_HOME is not set: backfills are recorded beside the Dagster instance; "
            "export DAGSTER_HOME=<folder with dagster.yaml> (make dev uses .dagster_home)"
        )
    return Path(home) / "partition_assets" / "backfills" / f"{checked_backfill_id(backfill_id)}.json"


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
                    states.setdefault(Node(asset, partition), (_RUN_STATES.get(run.status, NodeStatus.RUNNING), run))
    return states


def _runs_of(instance: dg.DagsterInstance, backfill_id: str) -> Sequence[dg.DagsterRun]:
    return instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))


def cancel_in_flight(instance: dg.DagsterInstance, backfill_id: str) -> int:
    """Cancels the backfill's unfinished runs; returns how many. A run submitted through
    the run launcher is terminated by it (`cancel_launched_run`); any other (a local
    worker's, whose coordinator kills its workers) is marked canceled."""
    # Node runs only: a coordinator running as a Dagster job carries the tag too.
    unfinished = [run for run in _runs_of(instance, backfill_id) if run.asset_selection and not run.is_finished]
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


def succeeded_nodes(record: BackfillRecord, graph: BackfillGraph, instance: dg.DagsterInstance) -> set[Node]:
    """Nodes whose latest run in this backfill succeeded; runs a dead coordinator left
    in flight are canceled first, since nobody will finish them."""
    cancel_in_flight(instance, record.id)
    return {
        node for node, (state, _) in node_states(instance, record.id, graph).items() if state == NodeStatus.SUCCEEDED
    }
