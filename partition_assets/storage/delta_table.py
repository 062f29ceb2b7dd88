"""Delta tables, written through staged files and read through partition pruning.

Publishing is one Delta commit (delta-rs) that adds the staged files and removes
every file of the partitions it replaces, so a reader sees the old version or
the new one, never a mix. No Delta jars are needed on Spark's classpath.
"""

import json
import random
import time
import urllib.parse
from collections.abc import Sequence
from datetime import datetime

import pyarrow as pa
from deltalake import DeltaTable, Schema
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import (
    AddAction,
    CommitProperties,
    RemoveAction,
    create_table_with_add_actions,
)
from pyspark.sql import DataFrame, SparkSession

from partition_assets.errors import ConcurrentPartitionWriteError
from partition_assets.storage.failpoints import failpoint
from partition_assets.storage.partition_scope import PartitionScope, PartitionScopeError
from partition_assets.storage.schema import new_columns
from partition_assets.storage.staging import (
    StagedFile,
    StagedWrite,
    move_into_layout,
    with_partition_columns,
)
from partition_assets.storage.table_format import PublishResult, spark_schema

_MAX_COMMIT_ATTEMPTS = 50


def replace_partitions(
    staged: StagedWrite | Sequence[StagedWrite],
    scope: PartitionScope | None,
    custom_metadata: dict[str, str] | None = None,
    allow_new_columns: bool = False,
    expected_files: frozenset[str] | None = None,
) -> PublishResult:
    """Publishes `staged` in one commit that replaces exactly the partitions in `scope`
    (the whole table when `scope` is None). Several staged writes of one table
    publish together, e.g. every partition of a backfill after validation.

    Commits are serialized: on any concurrent commit the replaced files are
    re-read and the commit retried, so writers of disjoint partitions all land
    and, of two writers of the same partition, the later one wins whole.
    New nullable columns are added first, in a commit of their own, when
    `allow_new_columns`; old rows read them as null. With `expected_files` (the
    scope's files a merge read) the commit refuses to replace anything else.
    """
    writes = [staged] if isinstance(staged, StagedWrite) else list(staged)
    staged = writes[0]
    if any((w.table_uri, w.partition_columns) != (staged.table_uri, staged.partition_columns) for w in writes):
        raise ValueError("staged writes published together must share a table and its partitioning")
    adds = [_add_action(file) for write in writes for file in write.files]
    for attempt in range(_MAX_COMMIT_ATTEMPTS):
        table = open_table(staged.table_uri)
        try:
            if table is None and expected_files:
                raise ConcurrentPartitionWriteError(f"table {staged.table_uri} disappeared")
            if table is None:
                create_table_with_add_actions(
                    staged.table_uri,
                    Schema.from_arrow(staged.schema),
                    adds,
                    mode="error",
                    partition_by=list(staged.partition_columns) or None,
                    commit_properties=CommitProperties(custom_metadata=custom_metadata or {}),
                )
                return PublishResult(0, len(adds), 0)
            added = _new_columns(table, staged, allow_new_columns)
            if added:
                table.alter.add_columns(list(Schema.from_arrow(pa.schema(added)).fields))
            removes = _remove_actions(table, scope)
            if expected_files is not None and {r.path for r in removes} != expected_files:
                raise ConcurrentPartitionWriteError(
                    f"another writer changed {scope.describe() if scope else 'the table'} of "
                    f"{staged.table_uri} after this merge read it"
                )
            read_version = table.version()
            failpoint("committing")
            table.create_write_transaction(
                [*adds, *removes],
                mode="append",
                schema=table.schema(),
                partition_by=list(staged.partition_columns) or None,
                commit_properties=CommitProperties(
                    custom_metadata=custom_metadata or {}, max_commit_retries=0
                ),
            )
            failpoint("committed")
            return PublishResult(read_version + 1, len(adds), len(removes))
        except (CommitFailedError, DeltaError) as error:
            if not _is_conflict(error) or attempt == _MAX_COMMIT_ATTEMPTS - 1:
                raise
            time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
    raise AssertionError("unreachable")



def open_table(
    table_uri: str, version: int | None = None, timestamp: str | None = None
) -> DeltaTable | None:
    """The table at its latest version, or as of `version` or ISO-8601 `timestamp`."""
    try:
        table = DeltaTable(table_uri, version=version)
    except TableNotFoundError:
        return None
    if timestamp is not None:
        table.load_as_version(datetime.fromisoformat(timestamp))
    return table


def read_partitions(
    spark: SparkSession, table: DeltaTable, scope: PartitionScope | None
) -> DataFrame:
    """The rows of `scope`'s partitions (all rows when None); only their files are opened."""
    schema = spark_schema(
        pa.schema(table.schema().to_arrow()), table.metadata().partition_columns
    )
    if scope is None:
        files = table.file_uris()
    else:
        files = table.file_uris(file_pruning_predicate=scope.delta_filter())
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).option("basePath", table.table_uri).parquet(*files)


def partitions_without_files(table: DeltaTable, scope: PartitionScope) -> set[tuple[str, ...]]:
    present = {
        tuple(partition[column] for column in scope.columns)
        for partition in _active_partitions(table)
    }
    return set(scope.rows) - present


def _add_action(file: StagedFile) -> AddAction:
    return AddAction(
        path=file.path,
        size=file.size,
        partition_values=file.partition_values,
        # Delta requires a modification time; it is file metadata, not asset logic.
        modification_time=int(time.time() * 1000),
        data_change=True,
        stats=json.dumps({"numRecords": file.num_records}),
    )


def _active_files(table: DeltaTable) -> list[dict]:
    return pa.table(table.get_add_actions(flatten=True)).to_pylist()


def _active_partitions(table: DeltaTable) -> list[dict[str, str | None]]:
    columns = table.metadata().partition_columns
    return [
        {column: row[f"partition.{column}"] for column in columns} for row in _active_files(table)
    ]


def _remove_actions(table: DeltaTable, scope: PartitionScope | None) -> list[RemoveAction]:
    columns = table.metadata().partition_columns
    deletion_clock_ms = int(time.time() * 1000)
    removes = []
    for row in _active_files(table):
        partition = {column: row[f"partition.{column}"] for column in columns}
        if scope is None or scope.contains(partition):
            removes.append(
                RemoveAction(
                    # get_add_actions gives the log's URI-encoded path; actions take it decoded.
                    path=urllib.parse.unquote(row["path"]),
                    data_change=True,
                    deletion_timestamp=deletion_clock_ms,
                    size=row["size_bytes"],
                    partition_values=partition,
                )
            )
    return removes


def _new_columns(table: DeltaTable, staged: StagedWrite, allow_new_columns: bool) -> list:
    return new_columns(
        pa.schema(table.schema().to_arrow()),
        tuple(table.metadata().partition_columns),
        staged,
        allow_new_columns,
    )


def _is_conflict(error: Exception) -> bool:
    text = str(error).lower()
    # A concurrent first write may have created the table since we looked.
    return isinstance(error, CommitFailedError) or any(
        word in text for word in ("conflict", "version", "already exists")
    )


class DeltaFormat:
    """TableFormat: Delta Lake through delta-rs."""

    name = "delta"

    def validate(self, staged: StagedWrite, allow_new_columns: bool) -> None:
        table = open_table(staged.table_uri)
        if table is not None:
            _new_columns(table, staged, allow_new_columns)

    def merge(
        self,
        spark: SparkSession,
        table_uri: str,
        scope: PartitionScope | None,
        incoming: DataFrame,
        keys: list[str],
    ) -> tuple[DataFrame, frozenset[str]]:
        """`incoming` plus the stored rows of `scope` whose keys it does not carry (an upsert).

        Keys match within a partition only, so a merge never touches other
        partitions. Returns the frame and the files it read, for the commit to check.
        """
        unknown = [key for key in keys if key not in incoming.columns]
        if unknown:
            raise PartitionScopeError(
                f"merge key(s) {unknown} are not columns of the frame {incoming.columns}: "
                "fix asset metadata merge_keys. Nothing was written."
            )
        table = open_table(table_uri)
        if table is None:
            return incoming, frozenset()
        incoming = with_partition_columns(incoming, scope)
        match_on = [*keys, *(scope.columns if scope else ())]
        stored = read_partitions(spark, table, scope)
        kept = stored.join(incoming.select(*match_on).distinct(), on=match_on, how="left_anti")
        merged = incoming.unionByName(kept, allowMissingColumns=True)
        return merged, frozenset(r.path for r in _remove_actions(table, scope))

    def publish(
        self,
        staged: StagedWrite,
        scope: PartitionScope | None,
        *,
        run_id: str,
        allow_new_columns: bool,
        expected_files: frozenset[str] | None = None,
    ) -> PublishResult:
        move_into_layout(staged)
        return replace_partitions(
            staged,
            scope,
            {"dagster_run_id": run_id},
            allow_new_columns=allow_new_columns,
            expected_files=expected_files,
        )

    def read(
        self,
        spark: SparkSession,
        table_uri: str,
        scope: PartitionScope | None,
        *,
        version: int | None = None,
        timestamp: str | None = None,
    ) -> DataFrame | None:
        table = open_table(table_uri, version=version, timestamp=timestamp)
        return None if table is None else read_partitions(spark, table, scope)

    def missing_partitions(self, table_uri: str, scope: PartitionScope) -> set[tuple[str, ...]]:
        table = open_table(table_uri)
        return set(scope.rows) if table is None else partitions_without_files(table, scope)
