"""The first step of a retract (`backfill retract`): the removal of its partitions staged in
each table, as a staged backfill stages a rewrite (a manifest naming each partition, with no
file: storage/delta/stage.py `stage_removal`), and the partitions recorded in the backfill's
record (`retracted`), which its rollback re-records as materialized. The steps after it are a
staged backfill's own (publication.py `retract`): the gate, the publish, Dagster's records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from partition_assets.backfill.planning.graph import Node
from partition_assets.backfill.publishing.backfill_stats import TableStats
from partition_assets.backfill.publishing.tables import Tables
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.deploy.versioning import GIT_SHA_METADATA


def stage_removals(record: BackfillRecord, tables: Tables, nodes: Sequence[Node], git_sha: str | None) -> None:
    """Stages, in each of `tables`, the removal of its asset's `nodes` (with the commit
    metadata `git_sha`, the code location's commit, when known) and records them in `record`
    as `retracted`. Every node's asset must have a table in `tables`.

    Raises:
        TableNotFoundError: A table does not exist; the tables before it hold their staged removals
            (`backfill discard` deletes them).
    """
    by_asset: dict[str, list[str]] = {}
    for node in nodes:
        by_asset.setdefault(node.asset.to_user_string(), []).append(node.partition)
    metadata = {GIT_SHA_METADATA: git_sha} if git_sha else {}
    for table in tables.values():
        partitions = by_asset.get(table.asset.to_user_string())
        if partitions:
            scope = dataclasses.replace(table, partition_keys=tuple(partitions)).scope
            table.staging_format.stage_removal(table.uri, scope, record.id, metadata)
    record.retracted = by_asset
    record.save()


def rows_removed(stats: Sequence[TableStats]) -> list[tuple[str, str, int]]:
    """(asset, partition, rows it held) of every partition a retract's staging empties, from
    its tables' statistics (taken with the old content of every table), upstream first."""
    removed = []
    for table_stats in stats:
        table = table_stats.table
        for row in sorted(table_stats.partitions):
            old = table_stats.old.get(row)
            removed.append((table.asset.to_user_string(), table.partition_key(row), old.rows if old else 0))
    return removed
