"""The statistics of a staged backfill's tables: per rewritten partition, the old
(published) and the new (staged) rows, checksum, measure sums and key checks, read
by Spark table by table; `StatsAhead` computes a table's as soon as its asset's last
node is done, beside the other runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql.types import DataType

from partition_assets.backfill.model import Node, NodeResult
from partition_assets.backfill.planning.gate_rules import Gate, apply_overrides, gate_of
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.planning.node_runs import asset_counts
from partition_assets.backfill.publishing.partition_stats import PartitionStats, mapped_to_old, partition_stats
from partition_assets.backfill.publishing.tables import BackfillTable, Tables
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.storage.backfill_staging import StagedTable, StagingFingerprint, staging_fingerprint
from partition_assets.storage.partition_scope import PartitionScope
from partition_assets.storage.schema_change import ColumnMapping


@dataclass(frozen=True)
class TableStats:
    """The old (published) and new (staged) content of a table's rewritten partitions."""

    table: BackfillTable
    partitions: frozenset[tuple[str, ...]]  # every partition the backfill staged, emptied ones too
    old: dict[tuple[str, ...], PartitionStats]  # {} when not asked for (a table without a gate)
    new: dict[tuple[str, ...], PartitionStats]
    # per partition, the commit metadata of its staging: run id, input versions, git SHA
    provenance: Mapping[tuple[str, ...], Mapping[str, str]]
    # the staging these stats were computed on, taken before it was read
    staging: StagingFingerprint


class StatsAhead:
    """Computes a table's gate stats as soon as every node of its asset has succeeded,
    while the backfill's other nodes still run, so that the gate after the last node
    reads only the tables that finished last. One table at a time, beside the runs."""

    def __init__(
        self,
        record: BackfillRecord,
        tables: Tables,
        graph: BackfillGraph,
        done: Iterable[Node],
    ) -> None:
        self._record = record
        self._tables = tables
        self._remaining = Counter(node.asset for node in graph.nodes())
        self._remaining.subtract(asset_counts(done))
        self._pool = ThreadPoolExecutor(max_workers=1)
        self._futures: dict[dg.AssetKey, Future] = {}
        for asset in tables:
            self._submit_when_done(asset)

    def finished(self, result: NodeResult) -> None:
        """Counts a node's result; its table's stats start once its asset has no node left."""
        if result.succeeded:
            self._remaining[result.node.asset] -= 1
            self._submit_when_done(result.node.asset)

    def results(self) -> dict[dg.AssetKey, TableStats | None]:
        """The stats computed so far (waiting for those under way)."""
        return {asset: future.result() for asset, future in self._futures.items()}

    def close(self) -> None:
        """Drops what has not started and waits for what has (one table's Spark job)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _submit_when_done(self, asset: dg.AssetKey) -> None:
        table = self._tables.get(asset)
        if table is not None and self._remaining[asset] <= 0 and asset not in self._futures:
            self._futures[asset] = self._pool.submit(table_stats, self._record, table)


def stats_of(
    record: BackfillRecord,
    tables: Tables,
    old_of_every_table: bool = False,
    ahead: Mapping[dg.AssetKey, TableStats | None] | None = None,
) -> list[TableStats]:
    """New stats of every partition `record`'s backfill staged in `tables`, table by table, and old ones
    for the tables with a gate (for every table with `old_of_every_table`); tables in
    `ahead` (see `StatsAhead`) are not read again. Tables are read concurrently:
    each is a small Spark job, dominated by its round trips."""
    ahead = ahead or {}
    with ThreadPoolExecutor(max_workers=_STATS_THREADS) as pool:
        futures = [
            pool.submit(table_stats, record, table, old_of_every_table)
            for table in tables.values()
            if table.asset not in ahead
        ]
        computed = [future.result() for future in futures]
    return [stats for stats in [*ahead.values(), *computed] if stats is not None]


def table_stats(record: BackfillRecord, table: BackfillTable, with_old: bool = False) -> TableStats | None:
    """The table's stats (see `stats_of`); None when the backfill staged nothing there."""
    staged = table.staging_format.staged(table.uri, record.id)
    return None if staged is None else _stats_of_staged(record, table, staged, with_old)


def _stats_of_staged(record: BackfillRecord, table: BackfillTable, staged: StagedTable, with_old: bool) -> TableStats:
    fingerprint = staging_fingerprint(staged)  # before reading it: a change from now on fails the publish
    partitions = frozenset(staged.files_by_partition)
    gate = gate_of_table(table, record.spec.gate)
    measures = tuple(gate.measures) if gate else ()
    keys = tuple(gate.keys) if gate else ()
    scope = None if table.partitions_def is None else PartitionScope(table.columns, partitions)
    spark = table.spark.spark_session
    new_frame = table.staging_format.read_overlay(spark, table.uri, scope, record.id)
    old_frame = table.table_format.read(spark, table.uri, scope) if with_old or gate is not None else None
    # A schema change compares through the declared mapping, column by column.
    by_column = False
    if new_frame is not None and old_frame is not None and _types(new_frame) != _types(old_frame):
        by_column = True
        new_frame = mapped_to_old(new_frame, old_frame.schema, ColumnMapping.from_metadata(table.metadata))
    new = partition_stats(new_frame, table.columns, measures, keys, by_column) if new_frame is not None else {}
    old = partition_stats(old_frame, table.columns, measures, keys, by_column) if old_frame is not None else {}
    return TableStats(table, partitions, old, new, staged.metadata_by_partition, fingerprint)


def _types(frame: DataFrame) -> dict[str, DataType]:
    return {f.name: f.dataType for f in frame.schema.fields}


def gate_of_table(table: BackfillTable, overrides: Sequence[str]) -> Gate | None:
    """The table's gate (declared, with the backfill's `overrides`: its spec's `gate`), its
    columns named as in the published schema: a measure or key on a column the asset declares
    renamed compares under the old name (split columns are compared as the old one, their sum)."""
    gate = apply_overrides(gate_of(table.metadata), table.asset.to_user_string(), overrides)
    mapping = ColumnMapping.from_metadata(table.metadata)
    if gate is None or not mapping.renamed:
        return gate
    return replace(
        gate,
        measures={mapping.old_column_of(column): budget for column, budget in gate.measures.items()},
        keys=tuple(mapping.old_column_of(column) for column in gate.keys),
    )


_STATS_THREADS = 4
