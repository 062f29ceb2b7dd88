"""`backfill retract`: partitions removed from their tables and marked not materialized in the
instance, as a new staged backfill (its record, leases, gate, one commit per table, ledger rows),
so that `backfill rollback <id>` brings them back, rows and materializations.

The partitions are the spec's selection, range or keys (backfill/planning/retraction.py says
which must be materialized, and when a downstream partition refuses the retract); every
refusal comes before anything is recorded or written.

A retract is a staged backfill like the others, recorded as a retract from its first save
(its record's `retracted`): the approval policy gates it (`awaiting_approval`, then `backfill
approve` publishes it), and every surface that continues a backfill (`backfill resume`, a
re-executed or taken-over coordinator run) continues it as a retract (`resume_retract`), never by
running its graph's nodes. Its publish wipes its partitions from Dagster's records before its
status says `published`: one killed in between stays `publishing`, and resume finishes the wipe.

Not guaranteed: between its first table commit and the wipe, readers of Dagster's records
(the UI, `--catch-up`) see its partitions materialized while the tables hold no rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import dagster as dg

from partition_assets.backfill.commands.results import RemovedPartition, Retracted
from partition_assets.backfill.model import BackfillCommand, BackfillStatus
from partition_assets.backfill.planning.instance_state import graph_of, materialized_nodes
from partition_assets.backfill.planning.retraction import describe_nodes, retracted_nodes
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing.approval_steps import publication_of
from partition_assets.backfill.publishing.approval_wait import approval_required, start_waiting
from partition_assets.backfill.publishing.originals import originals
from partition_assets.backfill.publishing.provenance import provenance_to_json
from partition_assets.backfill.publishing.publication import Publication, staged_publication
from partition_assets.backfill.publishing.stages import publish
from partition_assets.backfill.publishing.tables import BackfillTable
from partition_assets.backfill.state.approval import launcher, utc_now
from partition_assets.backfill.state.record import BackfillRecord, by_asset, nodes_of
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.backfill.state.stored_plan import stored_plan
from partition_assets.code_location import load_definitions
from partition_assets.errors import RetractError
from partition_assets.storage.leases import Lease, park
from partition_assets.storage.table_format import StagingFormat


def retract_partitions(spec: BackfillSpec, instance: dg.DagsterInstance, launched_by: str | None = None) -> Retracted:
    """Removes the partitions `spec` selects (`spec.downstream`: and the materialized ones
    derived from them) from their tables, one commit per table, and marks them not
    materialized in `instance`; returns what it removed. Only the selection, its range or keys,
    `downstream` and `module` of `spec` count. `launched_by` names who retracts (default: the OS user).
    Where approval is required (the deployment's policy, the assets' metadata:
    backfill/state/approval.py), it stops staged and gated, `awaiting_approval`, for an approver
    other than `launched_by` to publish it with `backfill approve`, as any backfill does.

    Raises:
        BackfillPlanError: The selection is empty or matches no asset, a key is no partition of the
            selected assets, or the range holds none; nothing was recorded or written.
        NotMaterializedError: A selected partition was never materialized; nothing was written.
        DownstreamReadersError: Without `downstream`, a materialized downstream partition reads
            a selected one; nothing was written.
        RetractError: An asset is not stored in a table a staged backfill can commit (Delta through a
            partition_assets IO manager); nothing was written.
        UnsupportedByFormatError: A table is Parquet, which cannot stage a removal; nothing was written.
        PartitionLeasedError, CoordinatorLiveError: Another writer holds the partitions; nothing was written.
    """
    selected = graph_of(dataclasses.replace(spec, downstream=False), instance)
    reach = graph_of(dataclasses.replace(spec, downstream=True), instance)
    nodes = retracted_nodes(selected, reach, materialized_nodes(reach, instance), spec.downstream)
    # The partitions it removes are in its record from its first save: whatever stops it, it stays a retract.
    graph = reach if spec.downstream else selected
    record = BackfillRecord(
        spec,
        store=BackfillStore(instance),
        launched_by=launcher(launched_by, None),
        retracted=by_asset(nodes),
        stored_plan=stored_plan(graph),
    )
    publication = staged_publication(record, load_definitions(spec.module), graph)
    unstored = [node for node in nodes if node.asset not in publication.tables]
    if unstored:
        raise RetractError(
            f"cannot retract {describe_nodes(unstored)}: no partition_assets IO manager stores the asset in a "
            "table, so there are no rows to remove. Retract only assets stored as Delta tables. Nothing was written."
        )
    _staging_formats(publication.tables.values())  # refuses Parquet before any lease
    # What made them, before the retract wipes them from the instance: what its rollback restores.
    found = originals(instance, graph)
    record.restored_provenance = provenance_to_json({node: found[node] for node in nodes if node in found})
    return _retract(publication, instance, BackfillCommand.RETRACT)


def resume_retract(instance: dg.DagsterInstance, record: BackfillRecord) -> Retracted:
    """Finishes the recorded retract `record` as a retract, from where it stopped, never by
    running its graph's nodes (that would compute again what it removes): stopped before its
    publish (killed, canceled, failed), its removals are staged again and gated, then it
    publishes or awaits approval as `retract_partitions` does; stopped publishing, its publish
    is finished, the wipe of its partitions from Dagster's records included. Every surface that
    continues a backfill calls this for a retract: `backfill resume`, a re-executed or
    taken-over coordinator run (commands/engine_run.py). The caller checked that its status
    may be resumed.

    Raises:
        IllegalTransitionError: Its status may not be resumed (e.g. it awaits approval); nothing was written.
        CoordinatorLiveError: Another process coordinates it; nothing was written.
    """
    return _retract(publication_of(record, instance), instance, BackfillCommand.RESUME)


def _retract(publication: Publication, instance: dg.DagsterInstance, action: BackfillCommand) -> Retracted:
    """The retract of `publication` run by `action`, as its coordinator, from its status on."""
    record = publication.record
    required = approval_required(publication, instance)  # a malformed policy refuses before any lease
    publishing = record.status == BackfillStatus.PUBLISHING  # its tables' commits began: only the publish is left
    entering = BackfillStatus.PUBLISHING if publishing else BackfillStatus.RUNNING
    with publication.held(instance, action, entering=entering) as leases, _parked_if_stopped(leases):
        if publishing:
            versions = publish(publication, instance, leases)
            unknown_rows = (
                RemovedPartition(n.asset.to_user_string(), n.partition, None) for n in nodes_of(record.retracted)
            )
            return Retracted(record.id, tuple(unknown_rows), versions, ())
        record.move_to(BackfillStatus.RUNNING, action)  # a canceled or failed one runs on
        retraction = publication.retract()
        removed = tuple(RemovedPartition(asset, partition, rows) for asset, partition, rows in retraction.removed)
        checks = retraction.gate.checks
        if required:
            start_waiting(publication, instance, utc_now())
            record.move_to(BackfillStatus.AWAITING_APPROVAL, action)
            park(leases)
            return Retracted(record.id, removed, {}, checks, awaiting_approval=True)
        versions = publish(publication, instance, leases)
    return Retracted(record.id, removed, versions, checks)


@contextmanager
def _parked_if_stopped(leases: list[Lease]) -> Iterator[None]:
    """However a retract stops short (an error, an interrupt), its partitions stay leased
    (parked), as a staged backfill's do, until its resume or discard."""
    try:
        yield
    except BaseException:
        park(leases)
        raise


def _staging_formats(tables: Iterable[BackfillTable]) -> list[StagingFormat]:
    """Each table's format; UnsupportedByFormatError for one that cannot stage a removal
    (Parquet: `BackfillTable.staging_format` refuses it), called before any lease is taken."""
    return [table.staging_format for table in tables]
