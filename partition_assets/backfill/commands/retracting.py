"""`backfill retract`: partitions removed from their tables and marked not materialized in the
instance, as a new staged backfill (its record, leases, gate, one commit per table, ledger rows),
so that `backfill rollback <id>` brings them back, rows and materializations.

The partitions are the spec's selection, range or keys (backfill/planning/retraction.py says
which must be materialized, and when a downstream partition refuses the retract); every
refusal comes before anything is recorded or written.

Not guaranteed: a retract killed after its staging and before its publish leaves its record
`running` with the removals staged: `partition-assets backfill discard <id>` deletes them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import dagster as dg

from partition_assets.backfill.commands.results import RemovedPartition, Retracted
from partition_assets.backfill.model import BackfillCommand
from partition_assets.backfill.planning.instance_state import graph_of, materialized_nodes
from partition_assets.backfill.planning.retraction import describe_nodes, retracted_nodes
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing.originals import originals
from partition_assets.backfill.publishing.provenance import provenance_to_json
from partition_assets.backfill.publishing.publication import staged_publication
from partition_assets.backfill.publishing.tables import BackfillTable
from partition_assets.backfill.state.approval import launcher
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.code_location import load_definitions
from partition_assets.errors import RetractError
from partition_assets.storage.leases import release
from partition_assets.storage.table_format import StagingFormat


def retract_partitions(spec: BackfillSpec, instance: dg.DagsterInstance, launched_by: str | None = None) -> Retracted:
    """Removes the partitions `spec` selects (`spec.downstream`: and the materialized ones
    derived from them) from their tables, one commit per table, and marks them not
    materialized in `instance`; returns what it removed. Only the selection, its range or keys,
    `downstream` and `module` of `spec` count. `launched_by` names who retracts (default: the OS user).

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
    record = BackfillRecord(spec, store=BackfillStore(instance), launched_by=launcher(launched_by, None))
    publication = staged_publication(record, load_definitions(spec.module), reach if spec.downstream else selected)
    unstored = [node for node in nodes if node.asset not in publication.tables]
    if unstored:
        raise RetractError(
            f"cannot retract {describe_nodes(unstored)}: no partition_assets IO manager stores the asset in a "
            "table, so there are no rows to remove. Retract only assets stored as Delta tables. Nothing was written."
        )
    _staging_formats(publication.tables.values())  # refuses Parquet before any lease
    # What made them, before the retract wipes them from the instance: what its rollback restores.
    found = originals(instance, reach if spec.downstream else selected)
    record.restored_provenance = provenance_to_json({node: found[node] for node in nodes if node in found})
    with publication.held(instance, BackfillCommand.RETRACT) as leases:
        retraction = publication.retract(instance, nodes)
        release(leases)
    return Retracted(
        record.id,
        tuple(RemovedPartition(asset, partition, rows) for asset, partition, rows in retraction.removed),
        retraction.versions,
        retraction.gate.checks,
    )


def _staging_formats(tables: Iterable[BackfillTable]) -> list[StagingFormat]:
    """Each table's format; UnsupportedByFormatError for one that cannot stage a removal
    (Parquet: `BackfillTable.staging_format` refuses it), called before any lease is taken."""
    return [table.staging_format for table in tables]
