"""`backfill extend`: widens the time range of a recorded backfill that stopped short of
publishing (paused with its coordinator stopped, canceled, failed, or awaiting approval), so
that its one staged publish covers the whole new range, one commit per table.

The planner runs once, on the widened spec; the new plan replaces the stored one
(backfill/state/stored_plan.py) and must hold every node of it. Under the backfill's claim (no
coordinator may run it meanwhile: backfill/state/presence.py), it leases the partitions of the
new range, parked until `resume` (refused, nothing written, where another writer holds one:
storage/leases.py), fingerprints the published files of the partitions it adds, and records the
new spec and plan by compare-and-set. One awaiting approval waits paused: its approval, its
freeze and what its gate evaluated are dropped, since its gate judges the whole range again. Its
nodes that succeeded stay done: `backfill resume` runs the others, then gates and publishes.

Not guaranteed: only a time range (`--start`, `--end`) widens; a spec of keys or of every
partition is refused. The Dagster backfill the webserver shows for it keeps its first target.
"""

from __future__ import annotations

import dataclasses

import dagster as dg

from partition_assets.backfill.commands.results import Extended
from partition_assets.backfill.model import BackfillCommand, PublishMode
from partition_assets.backfill.planning.instance_state import graph_of, nodes_to_skip
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing.approval_wait import discard_approval_freeze
from partition_assets.backfill.publishing.publication import Publication, staged_publication
from partition_assets.backfill.publishing.publish_step import published_files
from partition_assets.backfill.state.presence import coordinating
from partition_assets.backfill.state.record import BackfillRecord, finished_nodes, skipped_as_current
from partition_assets.backfill.state.skipped_ranges import stored_skipped
from partition_assets.backfill.state.status import COMMANDS, check_command
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.backfill.state.stored_plan import recorded_graph, stored_plan
from partition_assets.code_location import load_definitions
from partition_assets.errors import ExtendError
from partition_assets.ids import checked_backfill_id
from partition_assets.storage.leases import Lease, acquire, check_write, park

C = BackfillCommand


def extend_backfill(
    instance: dg.DagsterInstance, backfill_id: str, start: str | None = None, end: str | None = None
) -> Extended:
    """Widens backfill `backfill_id`'s time range to `start` (default: its own) .. `end`
    (default: its own), inclusive, as the module docstring says.

    Raises:
        IllegalTransitionError: Its status is not extended (running, publishing, published, final, ...);
            nothing was written.
        CoordinatorLiveError: A coordinator runs it (one paused keeps it); nothing was written.
        ExtendError: A retract; a spec with no time range; neither `start` nor `end`; a range that
            shrinks or does not widen; a new plan that drops nodes of the stored one. Nothing was written.
        PartitionLeasedError: Another writer holds partitions of the new range; nothing was written.
        BackfillPlanError: The planner refuses the widened spec; nothing was written.
    """
    store = BackfillStore(instance)
    record = store.load(checked_backfill_id(backfill_id))
    check_command(record.id, record.status, C.EXTEND)  # before anything is claimed or planned
    _widened(record, start, end)
    with coordinating(instance, record.id, C.EXTEND):
        record.reload()  # under the claim: another command may have moved or extended it meanwhile
        check_command(record.id, record.status, C.EXTEND)
        spec = _widened(record, start, end)
        graph = graph_of(spec, instance)  # the planner runs here, and for a new backfill only
        before = recorded_graph(record, instance)
        dropped = set(before.nodes()) - set(graph.nodes())
        if dropped:
            node = min(dropped)
            raise ExtendError(
                f"backfill {record.id}: the plan of {spec.start}..{spec.end} lacks {len(dropped)} of its nodes "
                f"(e.g. {node.asset.to_user_string()}[{node.partition}]): its code location changed since it "
                f"started. Nothing was written; finish it as it is (`partition-assets backfill resume {record.id}`) "
                "and start another backfill."
            )
        added = set(graph.nodes()) - set(before.nodes())
        publication = staged_publication(record, load_definitions(spec.module), graph)
        leases = _leased(publication)  # refused here, before the record changes
        fingerprints = {asset: {**files, **record.fingerprints.get(asset, {})} for asset, files in leases.items()}
        target = COMMANDS[C.EXTEND][record.status]
        if record.status != target:  # awaiting approval: its gate judges the whole range again
            record.move_to(target, C.EXTEND)
            discard_approval_freeze(instance, record.id)
        skips = nodes_to_skip(spec, graph, instance) & added  # --catch-up: what it leaves alone as current
        record.spec = spec
        record.stored_plan = stored_plan(graph)
        record.fingerprints = fingerprints
        record.skipped = stored_skipped(graph, {*skipped_as_current(record, before), *skips})
        record.gated_staging = {}
        record.approval = None
        record.save()
    pending = graph.node_count() - len(finished_nodes(record, graph, instance))
    return Extended(record.id, str(spec.start), str(spec.end), len(added), graph.node_count(), pending, record.status)


def _widened(record: BackfillRecord, start: str | None, end: str | None) -> BackfillSpec:
    """`record`'s spec over `start`..`end` (each its own when None), once that widens its range.

    Raises:
        ExtendError: See `extend_backfill`.
        BackfillPlanError: `start` or `end` is no time (BackfillSpec.time_range).
    """
    spec = record.spec
    fix = "Nothing was written; start another backfill for other partitions with `partition-assets backfill run`."
    if record.is_retract:
        raise ExtendError(f"backfill {record.id} is a retract: it removes partitions and is never extended. {fix}")
    before = spec.time_range()
    if before is None:
        raise ExtendError(
            f"backfill {record.id} names its partitions by keys or takes every partition, not by a time range "
            f"(--start/--end): only a time range is extended. {fix}"
        )
    if start is None and end is None:
        raise ExtendError(f"backfill {record.id}: give --start or --end (or both) to extend it to. {fix}")
    widened = dataclasses.replace(spec, start=start or spec.start, end=end or spec.end)
    after = widened.time_range()
    assert after is not None  # both bounds are given
    if after.start > before.start or after.end < before.end:
        raise ExtendError(
            f"backfill {record.id} covers {spec.start}..{spec.end}: {widened.start}..{widened.end} would shrink it; "
            f"extend only widens a range (an earlier --start, a later --end). {fix}"
        )
    if after == before:
        raise ExtendError(f"backfill {record.id} covers {spec.start}..{spec.end} already. {fix}")
    return widened


def _leased(publication: Publication) -> dict[str, dict[str, list[str]]]:
    """Leases the partitions of `publication`'s tables for its backfill, parked (a staged
    backfill's staging stays protected until it is resumed, published or discarded; one
    publishing per node leases as its runs write, so it is only checked); returns the published
    files of each table's partitions, by asset.

    Raises:
        PartitionLeasedError: Another writer holds some of them; nothing was written (a lease
            taken before the refusal is parked, as the backfill's own).
    """
    backfill_id = publication.record.id
    tables = list(publication.tables.values())
    for table in tables:  # every table checked before any lease is written
        check_write(table.uri, table.scope, backfill_id)
    if publication.record.spec.publish == PublishMode.staged:
        taken: list[Lease] = []
        try:
            for table in tables:
                taken.append(acquire(table.uri, backfill_id, "backfill", table.scope))
        finally:
            park(taken)
    return {table.asset.to_user_string(): published_files(table) for table in tables}
