"""Delta tables through delta-rs, written through staged files and read through partition
pruning; no Delta jars are needed on Spark's classpath.

`DeltaFormat` is the TableFormat (and StagingFormat) the IO managers and the backfill
engine call; each of its methods hands over to the module doing that one job, whose
docstrings state the contracts:

- write.py: a frame replaces (or merges into) a scope's partitions in one commit;
- read.py: a scope's rows, as published or as a backfill's staging overlays them;
- stage.py: a frame staged for a backfill, committed only when it publishes;
- publish.py: everything a backfill staged for a table, in one idempotent commit;
- rollback.py: a backfill's publish commit undone, from the log;
- schema_check.py: a table proved to read in one schema after a commit that changed it;
- vacuum.py: unreferenced files and dead staging folders deleted after a retention;
- log.py: the Delta log read: files by partition, app transactions, commit effects;
- commit.py: the one commit all of them make, retried against concurrent writers.

Not guaranteed: DeltaFormat keeps no state between calls: each opens the table afresh,
so two calls may see different versions (a check and the commit it guards each check
the version they act on).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from partition_assets.storage.backfill_staging import PartitionRow, StagedTable, delete_backfill
from partition_assets.storage.delta import log, publish, read, rollback, schema_check, stage, vacuum, write
from partition_assets.storage.delta_tables import table_version
from partition_assets.storage.partition_scope import PartitionScope
from partition_assets.storage.table_format import DEFAULT_OPTIONS, PublishResult, VacuumResult, WriteOptions


class DeltaFormat:
    """TableFormat and StagingFormat: Delta Lake through delta-rs (a façade; see the module docstring)."""

    name = "delta"

    def write(
        self,
        frame: DataFrame,
        table_uri: str,
        scope: PartitionScope | None,
        options: WriteOptions = DEFAULT_OPTIONS,
    ) -> PublishResult:
        """Replaces exactly `scope`'s partitions (the whole table when None) with `frame` in one
        commit, or upserts into them with `options.merge_keys` (write.write_frame).

        Raises:
            PartitionScopeError: The frame does not fit `scope`, has no rows and
                `options.allow_empty` is not set, or lacks a merge key column; nothing was written.
            TableSchemaError: The frame breaks the table's schema or partitioning; nothing was written.
            ConcurrentPartitionWriteError: A merge's partitions kept changing before it committed.
            CommitError: The commit lost to concurrent writers 50 times; the table is unchanged.
        """
        return write.write_frame(frame, table_uri, scope, options)

    def read(
        self,
        spark: SparkSession,
        table_uri: str,
        scope: PartitionScope | None,
        *,
        version: int | None = None,
        timestamp: str | None = None,
    ) -> DataFrame | None:
        """`scope`'s rows (all when None) at the latest version, or as of `version` or ISO-8601
        `timestamp`, opening only their files (read.read_table); None when there is no table."""
        return read.read_table(spark, table_uri, scope, version, timestamp)

    def missing_partitions(self, table_uri: str, scope: PartitionScope) -> set[PartitionRow]:
        return read.missing_partitions(table_uri, scope)

    def vacuum(self, table_uri: str, retention_hours: float, dry_run: bool) -> VacuumResult:
        """Deletes unreferenced data files and dead staging folders older than `retention_hours`
        (vacuum.vacuum_table).

        Raises:
            VacuumRetentionError: `checked_retention_hours` refuses `retention_hours`; nothing was deleted.
            TableNotFoundError: `table_uri` holds no Delta table; nothing was deleted.
        """
        return vacuum.vacuum_table(table_uri, retention_hours, dry_run)

    def stage(
        self,
        frame: DataFrame,
        table_uri: str,
        scope: PartitionScope | None,
        options: WriteOptions,
        backfill_id: str,
    ) -> PublishResult:
        return stage.stage_frame(frame, table_uri, scope, options, backfill_id)

    def stage_removal(
        self, table_uri: str, scope: PartitionScope | None, backfill_id: str, metadata: Mapping[str, str]
    ) -> None:
        stage.stage_removal(table_uri, scope, backfill_id, metadata)

    def read_overlay(
        self, spark: SparkSession, table_uri: str, scope: PartitionScope | None, backfill_id: str
    ) -> DataFrame | None:
        return read.read_overlay(spark, table_uri, scope, backfill_id)

    def staged(self, table_uri: str, backfill_id: str) -> StagedTable | None:
        return read.staging_of(log.open_table(table_uri), table_uri, backfill_id)

    def schema(self, table_uri: str, version: int | None = None) -> pa.Schema | None:
        """The table's schema (partition columns included), latest or as of `version`; None
        when there is no table."""
        table = log.open_table(table_uri, version=version)
        return None if table is None else log.table_schema(table)[0]

    def version(self, table_uri: str) -> int | None:
        return table_version(table_uri)

    def version_at(self, table_uri: str, when: datetime) -> int | None:
        return log.version_at(table_uri, when)

    def published_version(self, table_uri: str, backfill_id: str) -> int | None:
        return log.published_version(table_uri, backfill_id)

    def partition_files(self, table_uri: str, scope: PartitionScope | None) -> dict[PartitionRow, frozenset[str]]:
        return log.partition_files(log.open_table(table_uri), scope)

    def publish_staged(
        self,
        table_uri: str,
        backfill_id: str,
        expected: Mapping[PartitionRow, frozenset[str]] | None,
        metadata: Mapping[str, str],
    ) -> PublishResult:
        return publish.publish_staged(table_uri, backfill_id, expected, metadata)

    def check_publish(
        self, table_uri: str, backfill_id: str, expected: Mapping[PartitionRow, frozenset[str]] | None
    ) -> None:
        publish.check_publish(table_uri, backfill_id, expected)

    def discard_staged(self, table_uri: str, backfill_id: str) -> int:
        """Deletes what the backfill staged for the table; the published table is untouched."""
        return delete_backfill(table_uri, backfill_id)

    def rollback(self, table_uri: str, backfill_id: str, published_version: int, force: bool = False) -> PublishResult:
        return rollback.rollback_publish(table_uri, backfill_id, published_version, force)

    def check_rollback(self, table_uri: str, backfill_id: str, published_version: int, force: bool = False) -> None:
        rollback.check_rollback(table_uri, backfill_id, published_version, force)

    def check_one_schema(self, spark: Callable[[], SparkSession], table_uri: str, version: int) -> None:
        schema_check.check_one_schema(spark, table_uri, version)
