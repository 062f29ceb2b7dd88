"""Reading a Delta table's rows with Spark, opening only the files of the partitions asked
for: the published table (latest, or as of a version or time), or the table as a backfill
sees it before publishing (its staged partitions over the published rest).

Not guaranteed: a frame is lazy: Spark opens the files its snapshot listed when it runs
the frame; if a later commit replaced them and a vacuum deleted them by then (older than
its retention), the read fails.
"""

from __future__ import annotations

import functools

from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from partition_assets.storage.backfill_staging import (
    PartitionRow,
    StagedTable,
    data_folder,
    read_staged,
    staged_file_location,
)
from partition_assets.storage.delta.log import open_table, table_schema
from partition_assets.storage.partition_scope import PartitionScope
from partition_assets.storage.write_staging import spark_path, spark_schema, table_filesystem


def read_table(
    spark: SparkSession,
    table_uri: str,
    scope: PartitionScope | None,
    version: int | None = None,
    timestamp: str | None = None,
) -> DataFrame | None:
    """`scope`'s rows (all when None) at the latest version, or as of `version` or ISO-8601
    `timestamp`; None when there is no table."""
    table = open_table(table_uri, version=version, timestamp=timestamp)
    return None if table is None else read_partitions(spark, table, scope)


def read_partitions(spark: SparkSession, table: DeltaTable, scope: PartitionScope | None) -> DataFrame:
    """The rows of `scope`'s partitions (all rows when None); only their files are opened."""
    schema = spark_schema(*table_schema(table))
    if scope is None:
        files = table.file_uris()
    else:
        files = table.file_uris(file_pruning_predicate=scope.delta_filter())
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).option("basePath", table.table_uri).parquet(*files)


def missing_partitions(table_uri: str, scope: PartitionScope) -> set[PartitionRow]:
    """The partitions of `scope` that hold no rows (all of them when there is no table)."""
    table = open_table(table_uri)
    if table is None:
        return set(scope.rows)
    present = table.partitions(file_pruning_predicate=scope.delta_filter())
    return set(scope.rows) - {tuple(p[c] for c in scope.columns) for p in present}


def staging_of(table: DeltaTable | None, table_uri: str, backfill_id: str) -> StagedTable | None:
    """The backfill's staging of the table, its schema extending the published one; None
    when it staged nothing there.

    Raises:
        BackfillIdError: `backfill_id` cannot name a folder.
    """
    return read_staged(table_uri, backfill_id, None if table is None else table_schema(table)[0])


def read_overlay(
    spark: SparkSession, table_uri: str, scope: PartitionScope | None, backfill_id: str
) -> DataFrame | None:
    """`scope`'s rows (all when None) as backfill `backfill_id` sees them: its staged
    files for the partitions it staged, the published files for the rest. Only those
    files are opened. None when neither the table nor a staging exists.

    The schema is the published table's plus the columns the staging adds (the
    staging's own when there is no table).

    Raises:
        BackfillIdError: `backfill_id` cannot name a folder.
    """
    table = open_table(table_uri)
    staged = staging_of(table, table_uri, backfill_id)
    if staged is None:
        return None if table is None else read_partitions(spark, table, scope)
    schema = spark_schema(staged.schema, staged.partition_columns)
    staged_rows = set(staged.files_by_partition)
    if scope is not None:
        staged_rows &= scope.rows
    from_data: list[str] = []
    from_layout: list[str] = []
    for row in sorted(staged_rows):
        for file in staged.files_by_partition[row]:
            location, in_layout = staged_file_location(staged, file)
            (from_layout if in_layout else from_data).append(spark_path(table_uri, location))
    _, data = data_folder(table_uri, backfill_id)
    _, root = table_filesystem(table_uri)
    published = [] if table is None else _published_file_uris(table, scope, staged_rows)
    parts = [(spark_path(table_uri, data), from_data), (spark_path(table_uri, root), from_layout + published)]
    frames = [spark.read.schema(schema).option("basePath", base).parquet(*files) for base, files in parts if files]
    if not frames:
        return spark.createDataFrame([], schema)
    return functools.reduce(DataFrame.unionByName, frames)


def _published_file_uris(table: DeltaTable, scope: PartitionScope | None, skipped: set[PartitionRow]) -> list[str]:
    """The published files of `scope` (all when None) outside the `skipped` partitions."""
    columns = tuple(table.metadata().partition_columns)
    if not columns:
        return [] if skipped else table.file_uris()
    wanted = scope.rows if scope is not None else {tuple(p[c] for c in columns) for p in table.partitions()}
    rest = frozenset(wanted - skipped)
    return table.file_uris(file_pruning_predicate=PartitionScope(columns, rest).delta_filter()) if rest else []
