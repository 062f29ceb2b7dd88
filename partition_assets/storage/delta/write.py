"""Writing a frame to a Delta table: stage it, validate it, publish it in one commit.

`write_frame` replaces exactly a scope's partitions (the whole table when None) with a
frame, or upserts into them on merge keys; `replace_partitions` publishes several
staged writes of one table in one commit (write-audit-publish). The frame is staged and
validated first (rows outside the scope, an empty frame unless allowed, the schema);
any error before publishing leaves the table unchanged and no staged files.

Not guaranteed: files moved into the table's layout by a write that then dies or loses
are orphans until `vacuum`; a merge that keeps losing to concurrent writers of its
partitions gives up after a few attempts (ConcurrentPartitionWriteError); commit
metadata is kept only in the Delta log.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from deltalake import DeltaTable
from pyspark.sql import DataFrame

from partition_assets.errors import ConcurrentPartitionWriteError, PartitionScopeError, TableSchemaError
from partition_assets.storage.delta.commit import add_action, check_schema, commit, remove_actions
from partition_assets.storage.delta.log import open_table
from partition_assets.storage.delta.read import read_partitions
from partition_assets.storage.partition_scope import PartitionScope
from partition_assets.storage.table_format import DEFAULT_OPTIONS, PublishResult, WriteOptions
from partition_assets.storage.write_staging import (
    StagedWrite,
    discard,
    move_into_layout,
    stage_validated,
    with_partition_columns,
)

_MERGE_ATTEMPTS = 5
_log = logging.getLogger(__name__)


def write_frame(
    frame: DataFrame,
    table_uri: str,
    scope: PartitionScope | None,
    options: WriteOptions = DEFAULT_OPTIONS,
) -> PublishResult:
    """Replaces exactly `scope`'s partitions (the whole table when None) with
    `frame` in one commit; with `options.merge_keys`, upserts into them instead.

    A merge whose partitions another writer changed before it committed is
    read and merged again, up to a few times; then ConcurrentPartitionWriteError.

    Raises:
        PartitionScopeError: The frame does not fit `scope` (a row outside it, a null partition
            value, a partition column missing for several partitions or neither a string nor a
            date), has no rows and `options.allow_empty` is not set, or lacks a merge key column.
        TableSchemaError: The frame drops or retypes a column of the table, is partitioned
            differently, or adds columns without `options.allow_new_columns`.
        ConcurrentPartitionWriteError: A merge's partitions kept changing before it committed.
        CommitError: The commit lost to concurrent writers 50 times; the table is unchanged.
    """
    for attempt in range(1, _MERGE_ATTEMPTS):
        try:
            return _write_once(frame, table_uri, scope, options)
        except ConcurrentPartitionWriteError:
            _log.info("%s changed while merging; merging again (%d)", table_uri, attempt)
    return _write_once(frame, table_uri, scope, options)


def _write_once(frame: DataFrame, table_uri: str, scope: PartitionScope | None, options: WriteOptions) -> PublishResult:
    table = open_table(table_uri)  # the one snapshot the merge, validation and commit start from
    expected_files = None
    if options.merge_keys:
        frame, expected_files = _merge(table, scope, frame, list(options.merge_keys))
    staged = stage_validated(
        frame,
        table_uri,
        scope,
        options,
        lambda write: check_schema(table, write, options.allow_new_columns),
    )
    return _publish(
        table,
        [staged],
        scope,
        dict(options.commit_metadata),
        options.allow_new_columns,
        expected_files,
    )


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

    Raises:
        TableSchemaError: The writes are of different tables or partition columns, or one breaks
            the table's schema; every staged write is deleted.
        CommitError: The commit lost to concurrent writers 50 times; the table is unchanged.
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
            check_schema(table, write, allow_new_columns)
    except BaseException:
        for write in writes:
            discard(write)
        raise
    return _publish(table, writes, scope, custom_metadata or {}, allow_new_columns, None)


def merge_rows(
    incoming: DataFrame, stored: DataFrame | None, scope: PartitionScope | None, keys: list[str]
) -> DataFrame:
    """`incoming` plus the `stored` rows whose keys it does not carry (an upsert).

    Keys match within a partition only, so a merge never touches other partitions.

    Raises:
        PartitionScopeError: A merge key is no column of `incoming`, or `incoming` does not fit
            `scope` (see write_staging.with_partition_columns).
    """
    unknown = [key for key in keys if key not in incoming.columns]
    if unknown:
        raise PartitionScopeError(
            f"merge key(s) {unknown} are not columns of the frame {incoming.columns}: "
            "fix asset metadata merge_keys. Nothing was written."
        )
    if stored is None:
        return incoming
    incoming = with_partition_columns(incoming, scope)
    match_on = [*keys, *(scope.columns if scope else ())]
    kept = stored.join(incoming.select(*match_on).distinct(), on=match_on, how="left_anti")
    return incoming.unionByName(kept, allowMissingColumns=True)


def _merge(
    table: DeltaTable | None, scope: PartitionScope | None, incoming: DataFrame, keys: list[str]
) -> tuple[DataFrame, frozenset[str]]:
    """`incoming` upserted into the stored rows of `scope`, and the files that read,
    for the commit to check they are still current."""
    stored = None if table is None else read_partitions(incoming.sparkSession, table, scope)
    merged = merge_rows(incoming, stored, scope, keys)
    return merged, frozenset() if table is None else frozenset(r.path for r in remove_actions(table, scope))


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
    """
    for write in writes:
        move_into_layout(write)
    first = writes[0]

    def check(current: DeltaTable | None) -> None:
        if current is None or expected_files is None:
            return
        if {r.path for r in remove_actions(current, scope)} != expected_files:
            raise ConcurrentPartitionWriteError(
                f"another writer changed {scope.describe() if scope else 'the table'} of "
                f"{first.table_uri} after this merge read it; nothing was committed"
            )

    adds = [add_action(file) for write in writes for file in write.files]
    template = StagedWrite(first.table_uri, first.staging_dir, first.schema, first.partition_columns, ())
    version, removed = commit(table, template, adds, scope, custom_metadata, allow_new_columns, check)
    return PublishResult.of(writes, version, removed)
