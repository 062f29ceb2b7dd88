"""`DeltaFormat`: the TableFormat and StagingFormat façade of the package (see its docstring).

Each method imports the module doing its job when first called: the registry
(storage/table_formats.py) loads this class to find a lake's tables and their versions,
which `release show` does without Spark or Dagster (tables.py); a write loads them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

import pyarrow as pa

from partition_assets.storage.delta import tables
from partition_assets.storage.table_format import (
    DEFAULT_OPTIONS,
    FormatCapabilities,
    PublishResult,
    VacuumResult,
    WriteOptions,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from partition_assets.storage.backfill_staging import ListedStaging, PartitionRow, StagedTable
    from partition_assets.storage.delta.previous import PreviousCopy
    from partition_assets.storage.partition_scope import PartitionScope


class DeltaFormat:
    """TableFormat and StagingFormat: Delta Lake through delta-rs (a façade; see the module docstring)."""

    name = "delta"
    capabilities = FormatCapabilities(
        versions=True, staged_publish=True, rollback=True, schema_changes=True, keep_previous=True
    )

    def holds_table(self, table_uri: str) -> bool:
        return tables.holds_table(table_uri)

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
        from partition_assets.storage.delta import write

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
        from partition_assets.storage.delta import read

        return read.read_table(spark, table_uri, scope, version, timestamp)

    def missing_partitions(self, table_uri: str, scope: PartitionScope) -> set[PartitionRow]:
        from partition_assets.storage.delta import read

        return read.missing_partitions(table_uri, scope)

    def vacuum(self, table_uri: str, retention_hours: float, dry_run: bool) -> VacuumResult:
        """Deletes unreferenced data files and dead staging folders older than `retention_hours`
        (vacuum.vacuum_table).

        Raises:
            VacuumRetentionError: `checked_retention_hours` refuses `retention_hours`; nothing was deleted.
            TableNotFoundError: `table_uri` holds no Delta table; nothing was deleted.
        """
        from partition_assets.storage.delta import vacuum

        return vacuum.vacuum_table(table_uri, retention_hours, dry_run)

    def stage(
        self,
        frame: DataFrame,
        table_uri: str,
        scope: PartitionScope | None,
        options: WriteOptions,
        backfill_id: str,
    ) -> PublishResult:
        from partition_assets.storage.delta import stage

        return stage.stage_frame(frame, table_uri, scope, options, backfill_id)

    def stage_removal(
        self, table_uri: str, scope: PartitionScope | None, backfill_id: str, metadata: Mapping[str, str]
    ) -> None:
        from partition_assets.storage.delta import stage

        stage.stage_removal(table_uri, scope, backfill_id, metadata)

    def read_overlay(
        self, spark: SparkSession, table_uri: str, scope: PartitionScope | None, backfill_id: str
    ) -> DataFrame | None:
        from partition_assets.storage.delta import read

        return read.read_overlay(spark, table_uri, scope, backfill_id)

    def staged(self, table_uri: str, backfill_id: str) -> StagedTable | None:
        from partition_assets.storage.delta import log, read

        return read.staging_of(log.open_table(table_uri), table_uri, backfill_id)

    def schema(self, table_uri: str, version: int | None = None) -> pa.Schema | None:
        """The table's schema (partition columns included), latest or as of `version`; None
        when there is no table."""
        from partition_assets.storage.delta import log

        table = log.open_table(table_uri, version=version)
        return None if table is None else log.table_schema(table)[0]

    def version(self, table_uri: str) -> int | None:
        return tables.table_version(table_uri)

    def read_version(self, table_uri: str, version: int) -> pa.Table:
        return tables.read_version(table_uri, version)

    def version_at(self, table_uri: str, when: datetime) -> int | None:
        from partition_assets.storage.delta import log

        return log.version_at(table_uri, when)

    def published_version(self, table_uri: str, backfill_id: str) -> int | None:
        from partition_assets.storage.delta import log

        return log.published_version(table_uri, backfill_id)

    def partition_files(self, table_uri: str, scope: PartitionScope | None) -> dict[PartitionRow, frozenset[str]]:
        from partition_assets.storage.delta import log

        return log.partition_files(log.open_table(table_uri), scope)

    def publish_staged(
        self,
        table_uri: str,
        backfill_id: str,
        expected: Mapping[PartitionRow, frozenset[str]] | None,
        metadata: Mapping[str, str],
        listed: ListedStaging | None = None,
    ) -> PublishResult:
        from partition_assets.storage.delta import publish

        return publish.publish_staged(table_uri, backfill_id, expected, metadata, listed)

    def check_publish(
        self,
        table_uri: str,
        backfill_id: str,
        expected: Mapping[PartitionRow, frozenset[str]] | None,
        staged: StagedTable | None = None,
    ) -> None:
        from partition_assets.storage.delta import publish

        publish.check_publish(table_uri, backfill_id, expected, staged)

    def discard_staged(self, table_uri: str, backfill_id: str) -> int:
        """Deletes what the backfill staged for the table; the published table is untouched."""
        from partition_assets.storage.backfill_staging import delete_backfill

        return delete_backfill(table_uri, backfill_id)

    def rollback(self, table_uri: str, backfill_id: str, published_version: int, force: bool = False) -> PublishResult:
        from partition_assets.storage.delta import rollback

        return rollback.rollback_publish(table_uri, backfill_id, published_version, force)

    def check_rollback(self, table_uri: str, backfill_id: str, published_version: int, force: bool = False) -> None:
        from partition_assets.storage.delta import rollback

        rollback.check_rollback(table_uri, backfill_id, published_version, force)

    def check_one_schema(self, spark: Callable[[], SparkSession], table_uri: str, version: int) -> None:
        from partition_assets.storage.delta import schema_check

        schema_check.check_one_schema(spark, table_uri, version)

    def keep_previous(self, table_uri: str, version: int, backfill_id: str, expires_at: datetime) -> PreviousCopy:
        from partition_assets.storage.delta import previous

        return previous.keep_previous(table_uri, version, backfill_id, expires_at)

    def kept_previous(self, table_uri: str) -> PreviousCopy | None:
        from partition_assets.storage.delta import previous

        return previous.previous_copy(table_uri)
