"""Delta tables, written through staged files and read through partition pruning.

Publishing is one Delta commit (delta-rs) that adds the staged files and removes
every file of the partitions it replaces, so a reader sees the old version or
the new one, never a mix. No Delta jars are needed on Spark's classpath.

Not guaranteed: files moved into the table's layout by a write that then dies
or loses are orphans until `vacuum`; a merge that keeps losing to concurrent
writers of its partitions gives up after a few attempts
(ConcurrentPartitionWriteError); commit metadata is kept only in the Delta log.
"""

import json
import logging
import random
import time
import urllib.parse
from collections.abc import Sequence
from datetime import datetime

import pyarrow as pa
from deltalake import DeltaTable, Schema
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError
from deltalake.transaction import (
    AddAction,
    CommitProperties,
    RemoveAction,
    create_table_with_add_actions,
)
from pyspark.sql import DataFrame, SparkSession

from partition_assets.errors import (
    CommitError,
    ConcurrentPartitionWriteError,
    PartitionScopeError,
    TableNotFoundError,
    TableSchemaError,
)
from partition_assets.storage.failpoints import failpoint
from partition_assets.storage.partition_scope import PartitionScope
from partition_assets.storage.schema import new_columns
from partition_assets.storage.staging import (
    StagedFile,
    StagedWrite,
    discard,
    move_into_layout,
    sweep_staging,
    with_partition_columns,
)
from partition_assets.storage.table_format import (
    DEFAULT_OPTIONS,
    PublishResult,
    VacuumResult,
    WriteOptions,
    spark_schema,
    stage_validated,
)

_MAX_COMMIT_ATTEMPTS = 50
_MERGE_ATTEMPTS = 5
_log = logging.getLogger(__name__)


class DeltaFormat:
    """TableFormat: Delta Lake through delta-rs."""

    name = "delta"

    def write(
        self,
        frame: DataFrame,
        table_uri: str,
        scope: PartitionScope | None,
        options: WriteOptions = DEFAULT_OPTIONS,
    ) -> PublishResult:
        """Replaces exactly `scope`'s partitions (the whole table when None) with
        `frame` in one commit; with `options.merge_keys`, upserts into them instead.

        A merge whose partitions another writer changed before it committed is
        read and merged again, up to a few times; then ConcurrentPartitionWriteError.
        """
        for attempt in range(1, _MERGE_ATTEMPTS):
            try:
                return self._write_once(frame, table_uri, scope, options)
            except ConcurrentPartitionWriteError:
                _log.info("%s changed while merging; merging again (%d)", table_uri, attempt)
        return self._write_once(frame, table_uri, scope, options)

    def _write_once(
        self, frame: DataFrame, table_uri: str, scope: PartitionScope | None, options: WriteOptions
    ) -> PublishResult:
        table = open_table(table_uri)  # the one snapshot the merge, validation and commit start from
        expected_files = None
        if options.merge_keys:
            frame, expected_files = _merge(table, scope, frame, list(options.merge_keys))
        staged = stage_validated(
            frame,
            table_uri,
            scope,
            options,
            lambda write: _check_schema(table, write, options.allow_new_columns),
        )
        return _publish(
            table,
            [staged],
            scope,
            dict(options.commit_metadata),
            options.allow_new_columns,
            expected_files,
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
        if table is None:
            return set(scope.rows)
        present = table.partitions(file_pruning_predicate=scope.delta_filter())
        return set(scope.rows) - {tuple(p[c] for c in scope.columns) for p in present}

    def vacuum(self, table_uri: str, retention_hours: float, dry_run: bool) -> VacuumResult:
        """Deletes data files the log no longer references (replaced, or never
        committed) and staging folders, older than `retention_hours`.

        The window protects writes in flight (their files are not committed yet)
        and readers of older versions (time travel): keep it longer than both.
        """
        table = open_table(table_uri)
        if table is None:
            raise TableNotFoundError(f"no Delta table at {table_uri}: check the path (it must hold _delta_log/)")
        data_files = table.vacuum(
            retention_hours=int(retention_hours),
            dry_run=dry_run,
            enforce_retention_duration=False,
            full=True,  # also files never committed, which a killed write leaves
        )
        return VacuumResult(list(data_files), sweep_staging(table_uri, retention_hours, dry_run))


def replace_partitions(
    staged: StagedWrite | Sequence[StagedWrite],
    scope: PartitionScope | None,
    custom_metadata: dict[str, str] | None = None,
    allow_new_columns: bool = False,
) -> PublishResult:
    """Publishes staged writes of one table in one commit that replaces exactly the
    partitions in `scope` (the whole table when None): e.g. every partition of a
    backfill, staged one by one and published together after an audit.

    A write that breaks the table's schema (TableSchemaError) is refused before
    anything is published, and then every staged write is deleted.
    """
    writes = [staged] if isinstance(staged, StagedWrite) else list(staged)
    first = writes[0]
    if any((w.table_uri, w.partition_columns) != (first.table_uri, first.partition_columns) for w in writes):
        for write in writes:
            discard(write)
        raise TableSchemaError(
            "staged writes published together must share a table and its partition columns: "
            "publish each table's writes in their own call. Nothing was written."
        )
    table = open_table(first.table_uri)
    try:
        for write in writes:
            _check_schema(table, write, allow_new_columns)
    except BaseException:
        for write in writes:
            discard(write)
        raise
    return _publish(table, writes, scope, custom_metadata or {}, allow_new_columns, None)


def open_table(table_uri: str, version: int | None = None, timestamp: str | None = None) -> DeltaTable | None:
    """The table at its latest version, or as of `version` or ISO-8601 `timestamp`."""
    try:
        table = DeltaTable(table_uri, version=version)
    except DeltaTableNotFoundError:
        return None
    if timestamp is not None:
        table.load_as_version(datetime.fromisoformat(timestamp))
    return table


def read_partitions(spark: SparkSession, table: DeltaTable, scope: PartitionScope | None) -> DataFrame:
    """The rows of `scope`'s partitions (all rows when None); only their files are opened."""
    schema = spark_schema(pa.schema(table.schema().to_arrow()), table.metadata().partition_columns)
    if scope is None:
        files = table.file_uris()
    else:
        files = table.file_uris(file_pruning_predicate=scope.delta_filter())
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).option("basePath", table.table_uri).parquet(*files)


def _merge(
    table: DeltaTable | None, scope: PartitionScope | None, incoming: DataFrame, keys: list[str]
) -> tuple[DataFrame, frozenset[str]]:
    """`incoming` plus the stored rows of `scope` whose keys it does not carry (an
    upsert), and the files that read, for the commit to check they are still current.

    Keys match within a partition only, so a merge never touches other partitions.
    """
    unknown = [key for key in keys if key not in incoming.columns]
    if unknown:
        raise PartitionScopeError(
            f"merge key(s) {unknown} are not columns of the frame {incoming.columns}: "
            "fix asset metadata merge_keys. Nothing was written."
        )
    if table is None:
        return incoming, frozenset()
    incoming = with_partition_columns(incoming, scope)
    match_on = [*keys, *(scope.columns if scope else ())]
    stored = read_partitions(incoming.sparkSession, table, scope)
    kept = stored.join(incoming.select(*match_on).distinct(), on=match_on, how="left_anti")
    merged = incoming.unionByName(kept, allowMissingColumns=True)
    return merged, frozenset(r.path for r in _remove_actions(table, scope))


def _publish(
    table: DeltaTable | None,
    writes: list[StagedWrite],
    scope: PartitionScope | None,
    custom_metadata: dict[str, str],
    allow_new_columns: bool,
    expected_files: frozenset[str] | None,
) -> PublishResult:
    """Moves the validated `writes` into the table's layout and commits them,
    removing every file of `scope`; with `expected_files` (what a merge read),
    only if those are still the scope's files, else ConcurrentPartitionWriteError.

    Commits are serialized: on a concurrent commit the table is brought up to
    date and the commit retried, so writers of disjoint partitions all land and,
    of two writers of the same partition, the later one wins whole. New nullable
    columns are added first, in a commit of their own; old rows read them as null.
    """
    for write in writes:
        move_into_layout(write)
    first = writes[0]
    adds = [_add_action(file) for write in writes for file in write.files]
    partition_by = list(first.partition_columns) or None
    for attempt in range(1, _MAX_COMMIT_ATTEMPTS + 1):
        try:
            if table is None:
                failpoint("committing")
                create_table_with_add_actions(
                    first.table_uri,
                    Schema.from_arrow(first.schema),
                    adds,
                    mode="error",
                    partition_by=partition_by,
                    commit_properties=CommitProperties(custom_metadata=custom_metadata),
                )
                return PublishResult.of(writes, 0, 0)
            added = new_columns(*_table_schema(table), first, allow_new_columns)
            if added:
                table.alter.add_columns(list(Schema.from_arrow(pa.schema(added)).fields))
            removes = _remove_actions(table, scope)
            if expected_files is not None and {r.path for r in removes} != expected_files:
                raise ConcurrentPartitionWriteError(
                    f"another writer changed {scope.describe() if scope else 'the table'} of "
                    f"{first.table_uri} after this merge read it; nothing was committed"
                )
            read_version = table.version()
            failpoint("committing")
            table.create_write_transaction(
                [*adds, *removes],
                mode="append",
                schema=table.schema(),
                partition_by=partition_by,
                commit_properties=CommitProperties(custom_metadata=custom_metadata, max_commit_retries=0),
            )
            failpoint("committed")
            return PublishResult.of(writes, read_version + 1, len(removes))
        except CommitFailedError:
            pass  # another commit took the version this one read: retry on top of it
        except DeltaError:
            # A concurrent first write may have created the table since this one looked.
            if table is not None or not DeltaTable.is_deltatable(first.table_uri):
                raise
        time.sleep(random.uniform(0.01, 0.05) * attempt)
        if table is None:
            table = open_table(first.table_uri)
        else:
            table.update_incremental()
    raise CommitError(
        f"{_MAX_COMMIT_ATTEMPTS} commits to {first.table_uri} lost to concurrent writers; the "
        "table is unchanged (the staged files are orphans until vacuum). Run the write again."
    )


def _check_schema(table: DeltaTable | None, staged: StagedWrite, allow_new_columns: bool) -> None:
    """Raises TableSchemaError when publishing `staged` would break the table's schema."""
    if table is not None:
        new_columns(*_table_schema(table), staged, allow_new_columns)


def _table_schema(table: DeltaTable) -> tuple[pa.Schema, tuple[str, ...]]:
    return pa.schema(table.schema().to_arrow()), tuple(table.metadata().partition_columns)


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


def _remove_actions(table: DeltaTable, scope: PartitionScope | None) -> list[RemoveAction]:
    """Removes for every file of `scope`'s partitions (all files when None), from
    one pass over the snapshot's add actions (delta-rs prunes file URIs, not actions)."""
    columns = table.metadata().partition_columns
    deletion_clock_ms = int(time.time() * 1000)
    removes = []
    for row in pa.table(table.get_add_actions(flatten=True)).to_pylist():
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
