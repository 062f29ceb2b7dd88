"""The first step of a retract (`backfill retract`): the removal of its partitions staged in
each table, as a staged backfill stages a rewrite (a manifest naming each partition, with no
file: storage/delta/stage.py `stage_removal`) of the partitions its record names (`retracted`,
recorded when the retract starts), which its rollback re-records as materialized. The steps after it are a
staged backfill's own (publication.py `retract`): the gate, the approval, the publish, Dagster's records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from partition_assets.backfill.publishing.backfill_stats import TableStats
from partition_assets.backfill.publishing.tables import Tables
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.deploy.versioning import GIT_SHA_METADATA


def stage_removals(record: BackfillRecord, tables: Tables, git_sha: str | None) -> None:
    """Stages, in each of `tables`, the removal of the partitions `record` retracts
    (`record.retracted`, with the commit metadata `git_sha`, the code location's commit, when
    known); staged again, the same removal replaces the first. Every retracted asset must have
    a table in `tables`.

    Raises:
        TableNotFoundError: A table does not exist; the tables before it hold their staged removals
            (`backfill discard` deletes them).
    """
    metadata = {GIT_SHA_METADATA: git_sha} if git_sha else {}
    for table in tables.values():
        partitions = record.retracted.get(table.asset.to_user_string())
        if partitions:
            scope = dataclasses.replace(table, partition_keys=tuple(partitions)).scope
            table.staging_format.stage_removal(table.uri, scope, record.id, metadata)


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
