"""Delta tables, written through staged files and read through partition pruning.

Publishing is one Delta commit (delta-rs) that adds the staged files and removes
every file of the partitions it replaces, so a reader sees the old version or
the new one, never a mix. No Delta jars are needed on Spark's classpath.

A backfill instead `stage`s its writes (files under `_backfills/<backfill_id>/`,
listed in manifests, see staged.py), reads them back through `read_overlay`, and
`publish_staged` commits every staged partition of a table at once, carrying the
application transaction `partition_assets/<backfill_id>` so a repeated publish
commits nothing. `rollback` restores what that commit replaced, from the log.

Not guaranteed: files moved into the table's layout by a write that then dies
or loses are orphans until `vacuum`; a merge that keeps losing to concurrent
writers of its partitions gives up after a few attempts
(ConcurrentPartitionWriteError); commit metadata is kept only in the Delta log.
A publish that adds columns makes two commits (the schema first). A rollback
re-adds files that a vacuum may delete between its check and its commit: keep
the vacuum retention longer than backfills may be rolled back. Files are
re-added with their row count as their only statistics.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import random
import time
import urllib.parse
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import DeltaTable, Schema
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError
from deltalake.transaction import (
    AddAction,
    CommitProperties,
    RemoveAction,
    Transaction,
    create_table_with_add_actions,
)
from pyspark.sql import DataFrame, SparkSession

from partition_assets.errors import (
    BackfillStateError,
    CommitError,
    ConcurrentPartitionWriteError,
    ForeignCommitError,
    PartitionScopeError,
    RollbackError,
    TableNotFoundError,
    TableSchemaError,
)
from partition_assets.storage.failpoints import failpoint
from partition_assets.storage.partition_scope import PartitionScope
from partition_assets.storage.schema import new_columns
from partition_assets.storage.staged import (
    BACKFILLS_DIR,
    PartitionRow,
    StagedTable,
    backfill_folder,
    backfill_ids,
    data_folder,
    delete_backfill,
    incoming_folder,
    listed_layout_paths,
    move_into_table_layout,
    read_staged,
    record_staging,
    staged_file_location,
    stale_backfill_folders,
)
from partition_assets.storage.staging import (
    StagedFile,
    StagedWrite,
    delete_dir,
    discard,
    move_into_layout,
    spark_path,
    sweep_staging,
    table_filesystem,
    with_partition_columns,
)
from partition_assets.storage.table_format import (
    DEFAULT_OPTIONS,
    PublishResult,
    VacuumResult,
    WriteOptions,
    checked_retention_hours,
    spark_schema,
    stage_validated,
)

_MAX_COMMIT_ATTEMPTS = 50
_MERGE_ATTEMPTS = 5
# Commit metadata naming the backfill a commit belongs to, and what it did.
_BACKFILL_KEY = "partition_assets.backfill_id"
_ACTION_KEY = "partition_assets.backfill_action"
_PUBLISH = "publish"
_ROLLBACK = "rollback"
_T = TypeVar("_T")
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
        Files a backfill's manifest lists are kept whatever their age: a publish
        may have moved them into the layout and not committed yet. The folders of
        published backfills go, and those of backfills killed before any manifest.
        delta-rs ages data files in whole hours: a retention is rounded up for them.
        """
        retention_hours = checked_retention_hours(retention_hours)
        table = open_table(table_uri)
        if table is None:
            raise TableNotFoundError(f"no Delta table at {table_uri}: check the path (it must hold _delta_log/)")
        unreferenced = table.vacuum(
            # Up, never down: a file younger than the retention asked for is never deleted.
            retention_hours=math.ceil(retention_hours),
            dry_run=True,
            enforce_retention_duration=False,
            full=True,  # also files never committed, which a killed write leaves
        )
        # Manifests first, then the log: a publish deletes its manifest only after its
        # commit, so each of its files is either listed or referenced by then.
        kept = listed_layout_paths(table_uri)
        table.update_incremental()
        kept.update(file.path for files in _files_by_partition(table).values() for file in files)
        fs, root = table_filesystem(table_uri)
        # The dry run also lists tombstoned files an earlier vacuum already deleted.
        data_files = [
            path
            for path in unreferenced
            if path not in kept and fs.get_file_info(f"{root}/{path}").type == pafs.FileType.File
        ]
        published = [b for b in backfill_ids(table_uri) if table.transaction_version(publish_app_id(b)) is not None]
        folders = [backfill_folder(table_uri, b)[1] for b in published]
        folders += [f for f in stale_backfill_folders(table_uri, retention_hours) if f not in folders]
        if not dry_run:
            for path in data_files:
                fs.delete_file(f"{root}/{path}")
            for folder in folders:
                delete_dir(fs, folder)
        return VacuumResult(data_files, sweep_staging(table_uri, retention_hours, dry_run) + folders)

    def stage(
        self,
        frame: DataFrame,
        table_uri: str,
        scope: PartitionScope | None,
        options: WriteOptions,
        backfill_id: str,
    ) -> PublishResult:
        """Stages `frame` as backfill `backfill_id`'s new content of `scope`'s partitions
        (the whole table when None, which must then be unpartitioned), committing nothing.

        Validated as `write` is (rows outside the scope, an empty frame unless allowed,
        the schema against the published table and the backfill's earlier stagings);
        with `options.merge_keys`, upserts into the overlay's rows of the scope. The
        files land under the table's `_backfills/<backfill_id>/`, unreferenced by the log
        and out of reach of vacuum; a manifest records them with `options.commit_metadata`
        (`StagedTable.metadata_by_partition`). Staging a partition again supersedes its
        earlier staging. The result's version is None.
        """
        table = open_table(table_uri)
        earlier = _read_staged(table, table_uri, backfill_id)
        if options.merge_keys:
            stored = self.read_overlay(frame.sparkSession, table_uri, scope, backfill_id)
            frame = _merge_rows(frame, stored, scope, list(options.merge_keys))

        def validate(write: StagedWrite) -> None:
            _check_schema(table, write, options.allow_new_columns)
            if table is None and earlier is not None:  # the first staging stands for the table
                new_columns(earlier.schema, earlier.partition_columns, write, options.allow_new_columns)

        write = stage_validated(frame, table_uri, scope, options, validate, incoming_folder(backfill_id))
        try:
            record_staging(write, backfill_id, scope.rows if scope else [()], options.commit_metadata)
        except BaseException:
            discard(write)
            raise
        return PublishResult.of([write], None, 0)

    def read_overlay(
        self, spark: SparkSession, table_uri: str, scope: PartitionScope | None, backfill_id: str
    ) -> DataFrame | None:
        """`scope`'s rows (all when None) as backfill `backfill_id` sees them: its staged
        files for the partitions it staged, the published files for the rest. Only those
        files are opened. None when neither the table nor a staging exists.

        The schema is the published table's plus the columns the staging adds (the
        staging's own when there is no table).
        """
        table = open_table(table_uri)
        staged = _read_staged(table, table_uri, backfill_id)
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

    def staged(self, table_uri: str, backfill_id: str) -> StagedTable | None:
        """What backfill `backfill_id` staged for the table; None when nothing."""
        table = open_table(table_uri)
        return _read_staged(table, table_uri, backfill_id)

    def version(self, table_uri: str) -> int | None:
        """The table's latest version; None when there is no table."""
        table = open_table(table_uri)
        return None if table is None else table.version()

    def version_at(self, table_uri: str, when: datetime) -> int | None:
        """The table's version as of `when` (the newest committed at or before it); None
        when the table did not exist then (or does not now)."""
        table = open_table(table_uri)
        if table is None:
            return None
        table.load_as_version(when)  # delta-rs answers version 0 for any earlier time, too
        first_commit = table.history()[-1] if table.version() == 0 else None
        if first_commit is not None and first_commit["timestamp"] > when.timestamp() * 1000:
            return None
        return table.version()

    def published_version(self, table_uri: str, backfill_id: str) -> int | None:
        """The version of backfill `backfill_id`'s publish commit; None when the table
        does not hold it (the log, not the backfill's folder, is the record)."""
        table = open_table(table_uri)
        if table is None or table.transaction_version(publish_app_id(backfill_id)) is None:
            return None
        return _backfill_commit_version(table, backfill_id, _PUBLISH)

    def partition_files(self, table_uri: str, scope: PartitionScope | None) -> dict[PartitionRow, frozenset[str]]:
        """The published files of each partition of `scope` (empty for a partition with
        none; every partition when None): the fingerprint a backfill's lease remembers."""
        return _partition_files(open_table(table_uri), scope)

    def publish_staged(
        self,
        table_uri: str,
        backfill_id: str,
        expected: Mapping[PartitionRow, frozenset[str]] | None,
        metadata: Mapping[str, str],
    ) -> PublishResult:
        """Publishes what backfill `backfill_id` staged in ONE commit: its staged files in,
        every published file of its staged partitions out, carrying the application
        transaction (publish_app_id(backfill_id), 1); creates the table when missing.

        Idempotent and resumable: when the table already holds the transaction, nothing
        is committed and the result is that commit's; a call killed part-way is finished
        by the next. New columns are added first, in a commit of their own. With
        `expected` (partition -> published files, as `partition_files` took them), any
        difference is a ForeignCommitError and nothing is committed; the staging is kept.
        The backfill's folder is deleted once published (the log keeps what rollback needs).
        """
        published = self.published_version(table_uri, backfill_id)
        if published is not None:
            delete_backfill(table_uri, backfill_id)  # a killed publish may have left it
            return _commit_effect(table_uri, published)
        table = open_table(table_uri)
        staged = _read_staged(table, table_uri, backfill_id)
        if staged is None:
            raise BackfillStateError(
                f"backfill {backfill_id} staged nothing for table {table_uri} (no manifest under "
                f"{BACKFILLS_DIR}/{backfill_id}/) and has not published to it: nothing was committed. "
                "Leave this table out of the publish, or run the backfill's nodes for it first."
            )
        write = staged.as_write()

        def check(current: DeltaTable | None) -> None:
            _check_unchanged(current, staged, expected)

        check(table)
        _check_schema(table, write, allow_new_columns=True)
        move_into_table_layout(staged)
        failpoint("publish_committing")
        version, removed = _commit(
            table,
            write,
            [_add_action(file) for file in write.files],
            staged.scope,
            _backfill_commit_metadata(metadata, backfill_id, _PUBLISH),
            True,
            check,
            Transaction(app_id=publish_app_id(backfill_id), version=1),
        )
        failpoint("publish_committed")
        delete_backfill(table_uri, backfill_id)
        return PublishResult.of([write], version, removed)

    def check_publish(self, table_uri: str, backfill_id: str, expected: Mapping[PartitionRow, frozenset[str]]) -> None:
        """Raises ForeignCommitError, committing nothing, when `publish_staged` with
        `expected` would refuse now; nothing when the backfill staged nothing here or has
        published already. Lets a multi-table publish refuse before committing any table."""
        if self.published_version(table_uri, backfill_id) is not None:
            return
        table = open_table(table_uri)
        staged = _read_staged(table, table_uri, backfill_id)
        if staged is not None:
            _check_unchanged(table, staged, expected)

    def discard_staged(self, table_uri: str, backfill_id: str) -> int:
        """Deletes what backfill `backfill_id` staged for the table (files and manifests);
        returns the number of data files deleted. Idempotent; the published table is untouched."""
        return delete_backfill(table_uri, backfill_id)

    def rollback(self, table_uri: str, backfill_id: str, published_version: int, force: bool = False) -> PublishResult:
        """Restores the partitions backfill `backfill_id` published at `published_version`
        to their files at `published_version - 1`, in one commit carrying the application
        transaction (rollback_app_id(backfill_id), 1); partitions the backfill created are
        removed. The partitions are read from the log (what that commit changed), so the
        backfill's manifests are not needed. Idempotent like publish_staged.

        RollbackError, nothing committed: see `check_rollback`.
        """
        plan = _RollbackPlan.of(table_uri, backfill_id, published_version)
        if plan.done_version is not None:
            return _commit_effect(table_uri, plan.done_version)

        def attempt(current: DeltaTable | None) -> int:
            assert current is not None  # a table never disappears from under a rollback
            plan.check_unchanged(current, force)
            removes = _remove_actions(current, plan.scope)
            read_version = current.version()
            current.create_write_transaction(
                [*(file.add() for file in plan.restored), *removes],
                mode="append",
                schema=current.schema(),
                partition_by=list(plan.columns) or None,
                commit_properties=CommitProperties(
                    custom_metadata=_backfill_commit_metadata({}, backfill_id, _ROLLBACK),
                    max_commit_retries=0,
                    app_transactions=[Transaction(app_id=rollback_app_id(backfill_id), version=1)],
                ),
            )
            return read_version + 1

        version = _with_commit_retries(table_uri, plan.table, attempt)
        return _commit_effect(table_uri, version)

    def check_rollback(self, table_uri: str, backfill_id: str, published_version: int, force: bool = False) -> None:
        """Raises RollbackError, committing nothing, when `rollback` would refuse: when
        `published_version` is not the backfill's publish commit; when a later commit
        changed those partitions (unless `force`, which discards that commit's changes to
        them); when a file to restore is gone. Lets a multi-table rollback refuse before
        committing any table."""
        plan = _RollbackPlan.of(table_uri, backfill_id, published_version)
        if plan.done_version is None:
            plan.check_unchanged(plan.table, force)


@dataclass
class _RollbackPlan:
    """What rolling back one table's publish commit restores, checked against the log."""

    table_uri: str
    backfill_id: str
    published_version: int
    table: DeltaTable
    done_version: int | None  # the rollback commit, when the table holds it already
    partitions: list[PartitionRow] = field(default_factory=list)
    restored: list[_LoggedFile] = field(default_factory=list)
    after: dict[PartitionRow, list[_LoggedFile]] = field(default_factory=dict)
    columns: tuple[str, ...] = ()

    @property
    def scope(self) -> PartitionScope | None:
        return PartitionScope(self.columns, frozenset(self.partitions)) if self.columns else None

    @classmethod
    def of(cls, table_uri: str, backfill_id: str, published_version: int) -> _RollbackPlan:
        table = open_table(table_uri)
        if table is None:
            raise RollbackError(f"no Delta table at {table_uri}: nothing to roll back; nothing was committed.")
        if table.transaction_version(rollback_app_id(backfill_id)) is not None:
            done = _backfill_commit_version(table, backfill_id, _ROLLBACK)
            return cls(table_uri, backfill_id, published_version, table, done)
        entry = next((e for e in table.history() if e.get("version") == published_version), {})
        if (entry.get(_BACKFILL_KEY), entry.get(_ACTION_KEY)) != (backfill_id, _PUBLISH):
            raise RollbackError(
                f"version {published_version} of table {table_uri} is not backfill {backfill_id}'s "
                "publish commit: pass the version its publish returned (see the backfill's "
                "ledger). Nothing was committed."
            )
        before = _files_by_partition(
            open_table(table_uri, version=published_version - 1) if published_version else None
        )
        after = _files_by_partition(open_table(table_uri, version=published_version))
        partitions = sorted(_changed_partitions(before, after))
        restored = [file for row in partitions for file in before.get(row, ())]
        fs, root = table_filesystem(table_uri)
        missing = [f for f in restored if fs.get_file_info(f"{root}/{f.path}").type != pafs.FileType.File]
        if missing:
            raise RollbackError(
                f"{len(missing)} of the {len(restored)} files backfill {backfill_id} replaced in "
                f"{table_uri} are gone (vacuumed, e.g. {missing[0].path}): the previous content "
                "cannot be restored; nothing was committed. Vacuum retention must exceed the time "
                "within which backfills may be rolled back."
            )
        columns = tuple(table.metadata().partition_columns)
        return cls(table_uri, backfill_id, published_version, table, None, partitions, restored, after, columns)

    def check_unchanged(self, current: DeltaTable, force: bool) -> None:
        """RollbackError unless `force` when a commit after the publish changed its partitions."""
        now = _files_by_partition(current)
        changed = sorted(row for row in self.partitions if _paths(now.get(row)) != _paths(self.after.get(row)))
        if changed and not force:
            raise RollbackError(
                f"partitions {PartitionScope(self.columns, frozenset(changed)).describe()} of "
                f"{self.table_uri} changed after backfill {self.backfill_id} published them at version "
                f"{self.published_version}; nothing was committed. Roll back with force "
                f"(`partition-assets backfill rollback {self.backfill_id} --force`) to discard those later "
                "changes too."
            )


def _read_staged(table: DeltaTable | None, table_uri: str, backfill_id: str) -> StagedTable | None:
    """The backfill's staging of the table, its schema extending the published one."""
    return read_staged(table_uri, backfill_id, None if table is None else _table_schema(table)[0])


def _published_file_uris(table: DeltaTable, scope: PartitionScope | None, skipped: set[PartitionRow]) -> list[str]:
    """The published files of `scope` (all when None) outside the `skipped` partitions."""
    columns = tuple(table.metadata().partition_columns)
    if not columns:
        return [] if skipped else table.file_uris()
    wanted = scope.rows if scope is not None else {tuple(p[c] for c in columns) for p in table.partitions()}
    rest = frozenset(wanted - skipped)
    return table.file_uris(file_pruning_predicate=PartitionScope(columns, rest).delta_filter()) if rest else []


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
    """`incoming` upserted into the stored rows of `scope`, and the files that read,
    for the commit to check they are still current."""
    stored = None if table is None else read_partitions(incoming.sparkSession, table, scope)
    merged = _merge_rows(incoming, stored, scope, keys)
    return merged, frozenset() if table is None else frozenset(r.path for r in _remove_actions(table, scope))


def _merge_rows(
    incoming: DataFrame, stored: DataFrame | None, scope: PartitionScope | None, keys: list[str]
) -> DataFrame:
    """`incoming` plus the `stored` rows whose keys it does not carry (an upsert).

    Keys match within a partition only, so a merge never touches other partitions.
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
        if {r.path for r in _remove_actions(current, scope)} != expected_files:
            raise ConcurrentPartitionWriteError(
                f"another writer changed {scope.describe() if scope else 'the table'} of "
                f"{first.table_uri} after this merge read it; nothing was committed"
            )

    adds = [_add_action(file) for write in writes for file in write.files]
    template = StagedWrite(first.table_uri, first.staging_dir, first.schema, first.partition_columns, ())
    version, removed = _commit(table, template, adds, scope, custom_metadata, allow_new_columns, check)
    return PublishResult.of(writes, version, removed)


def _commit(
    table: DeltaTable | None,
    template: StagedWrite,
    adds: list[AddAction],
    scope: PartitionScope | None,
    custom_metadata: Mapping[str, str],
    allow_new_columns: bool,
    check: Callable[[DeltaTable | None], None],
    app_transaction: Transaction | None = None,
) -> tuple[int, int]:
    """Commits `adds` (files already in the table's layout) and removes every file of
    `scope`, creating the table (with `template`'s schema and partitioning) when it does
    not exist; returns the new version and the number of files removed.

    `check` runs on the snapshot each attempt commits on top of, and may refuse it.
    Commits are serialized: on a concurrent commit the table is brought up to
    date and the commit retried, so writers of disjoint partitions all land and,
    of two writers of the same partition, the later one wins whole. New nullable
    columns are added first, in a commit of their own; old rows read them as null.
    """
    partition_by = list(template.partition_columns) or None
    transactions = [app_transaction] if app_transaction else None

    def attempt(current: DeltaTable | None) -> tuple[int, int]:
        check(current)
        if current is None:
            failpoint("committing")
            create_table_with_add_actions(
                template.table_uri,
                Schema.from_arrow(template.schema),
                adds,
                mode="error",
                partition_by=partition_by,
                commit_properties=CommitProperties(
                    custom_metadata=dict(custom_metadata), app_transactions=transactions
                ),
            )
            return 0, 0
        added = new_columns(*_table_schema(current), template, allow_new_columns)
        if added:
            current.alter.add_columns(list(Schema.from_arrow(pa.schema(added)).fields))
        removes = _remove_actions(current, scope)
        read_version = current.version()
        failpoint("committing")
        current.create_write_transaction(
            [*adds, *removes],
            mode="append",
            schema=current.schema(),
            partition_by=partition_by,
            commit_properties=CommitProperties(
                custom_metadata=dict(custom_metadata), max_commit_retries=0, app_transactions=transactions
            ),
        )
        failpoint("committed")
        return read_version + 1, len(removes)

    return _with_commit_retries(template.table_uri, table, attempt)


def _with_commit_retries(table_uri: str, table: DeltaTable | None, attempt: Callable[[DeltaTable | None], _T]) -> _T:
    """`attempt` (one commit on top of the snapshot it is given), retried on a fresh
    snapshot while concurrent commits take the version it read."""
    for number in range(1, _MAX_COMMIT_ATTEMPTS + 1):
        try:
            return attempt(table)
        except CommitFailedError:
            pass  # another commit took the version this one read: retry on top of it
        except DeltaError:
            # A concurrent first write may have created the table since this one looked.
            if table is not None or not DeltaTable.is_deltatable(table_uri):
                raise
        time.sleep(random.uniform(0.01, 0.05) * number)
        if table is None:
            table = open_table(table_uri)
        else:
            table.update_incremental()
    raise CommitError(
        f"{_MAX_COMMIT_ATTEMPTS} commits to {table_uri} lost to concurrent writers; the "
        "table is unchanged (files moved into its layout are orphans until vacuum). Run it again."
    )


def _check_schema(table: DeltaTable | None, staged: StagedWrite, allow_new_columns: bool) -> None:
    """Raises TableSchemaError when publishing `staged` would break the table's schema."""
    if table is not None:
        new_columns(*_table_schema(table), staged, allow_new_columns)


def _check_unchanged(
    current: DeltaTable | None, staged: StagedTable, expected: Mapping[PartitionRow, frozenset[str]] | None
) -> None:
    """ForeignCommitError when a staged partition's published files are no longer `expected`
    (None: anything goes, as with --force)."""
    if expected is None:
        return
    found = _partition_files(current, staged.scope)
    changed = sorted(
        row for row in staged.files_by_partition if found.get(row, frozenset()) != expected.get(row, frozenset())
    )
    if changed:
        shown = PartitionScope(staged.partition_columns, frozenset(changed)).describe()
        raise ForeignCommitError(
            f"partitions {shown} of table {staged.table_uri} changed since backfill {staged.backfill_id} "
            "started (a commit outside the backfill replaced their files); nothing was published to "
            "this table and the staged data is kept. Check the table's history, then publish with "
            "--force to overwrite that commit, or discard the backfill."
        )


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


@dataclass(frozen=True)
class _LoggedFile:
    """A data file as a snapshot's add action records it."""

    path: str  # decoded, relative to the table: what actions take
    size: int
    num_records: int
    modification_time: int
    partition_values: dict[str, str]

    def add(self) -> AddAction:
        """The add action that brings this file back into the table unchanged."""
        return AddAction(
            path=self.path,
            size=self.size,
            partition_values=self.partition_values,
            modification_time=self.modification_time,
            data_change=True,
            stats=json.dumps({"numRecords": self.num_records}),
        )


def _files_by_partition(table: DeltaTable | None) -> dict[PartitionRow, list[_LoggedFile]]:
    """The snapshot's files grouped by partition, from one pass over its add actions
    (delta-rs prunes file URIs, not actions); () holds every file of an unpartitioned table."""
    if table is None:
        return {}
    columns = table.metadata().partition_columns
    files: dict[PartitionRow, list[_LoggedFile]] = defaultdict(list)
    for row in pa.table(table.get_add_actions(flatten=True)).to_pylist():
        partition = {column: _logged_value(row[f"partition.{column}"]) for column in columns}
        files[tuple(partition[column] for column in columns)].append(
            _LoggedFile(
                # get_add_actions gives the log's URI-encoded path; actions take it decoded.
                path=urllib.parse.unquote(row["path"]),
                size=row["size_bytes"],
                num_records=row["num_records"] or 0,
                modification_time=row["modification_time"],
                partition_values=partition,
            )
        )
    return dict(files)


def _logged_value(value: Any) -> Any:
    """A partition value as the log writes it: get_add_actions types it (a date partition
    column gives a `date`), while scopes and remove actions hold the log's text. Strings
    and nulls pass as they are."""
    return value.isoformat() if isinstance(value, date) and not isinstance(value, datetime) else value


def _partition_files(table: DeltaTable | None, scope: PartitionScope | None) -> dict[PartitionRow, frozenset[str]]:
    found = {} if scope is None else {row: frozenset[str]() for row in scope.rows}
    for row, files in _files_by_partition(table).items():
        if scope is None or row in scope.rows:
            found[row] = frozenset(file.path for file in files)
    return found


def _remove_actions(table: DeltaTable, scope: PartitionScope | None) -> list[RemoveAction]:
    """Removes for every file of `scope`'s partitions (all files when None)."""
    deletion_clock_ms = int(time.time() * 1000)
    return [
        RemoveAction(
            path=file.path,
            data_change=True,
            deletion_timestamp=deletion_clock_ms,
            size=file.size,
            partition_values=dict[str, str | None](file.partition_values),
        )
        for row, files in _files_by_partition(table).items()
        if scope is None or row in scope.rows
        for file in files
    ]


def publish_app_id(backfill_id: str) -> str:
    """The application transaction id of a backfill's publish commits."""
    return f"partition_assets/{backfill_id}"


def rollback_app_id(backfill_id: str) -> str:
    """The application transaction id of a backfill's rollback commits."""
    return f"partition_assets/{backfill_id}/rollback"


def _backfill_commit_metadata(metadata: Mapping[str, str], backfill_id: str, action: str) -> dict[str, str]:
    return {**metadata, _BACKFILL_KEY: backfill_id, _ACTION_KEY: action}


def _backfill_commit_version(table: DeltaTable, backfill_id: str, action: str) -> int:
    """The version of the backfill's `action` commit, found by its commit metadata."""
    for entry in table.history():
        if entry.get(_BACKFILL_KEY) == backfill_id and entry.get(_ACTION_KEY) == action:
            return int(entry["version"])
    raise CommitError(
        f"table {table.table_uri} holds backfill {backfill_id}'s {action} transaction but its "
        "log no longer has that commit's info (old log entries were cleaned up); nothing was "
        "committed. Read the version from the backfill's ledger instead."
    )


def _changed_partitions(
    before: Mapping[PartitionRow, list[_LoggedFile]], after: Mapping[PartitionRow, list[_LoggedFile]]
) -> set[PartitionRow]:
    return {row for row in before.keys() | after.keys() if _paths(before.get(row)) != _paths(after.get(row))}


def _paths(files: list[_LoggedFile] | None) -> frozenset[str]:
    return frozenset(file.path for file in files or ())


def _commit_effect(table_uri: str, version: int) -> PublishResult:
    """What the commit at `version` changed: the files it added and removed."""
    before = _files_by_partition(open_table(table_uri, version=version - 1) if version > 0 else None)
    after = _files_by_partition(open_table(table_uri, version=version))
    rows: Counter[PartitionRow] = Counter()
    added = removed = 0
    for row in _changed_partitions(before, after):
        old, new = _paths(before.get(row)), _paths(after.get(row))
        removed += len(old - new)
        for file in after.get(row, ()):
            if file.path not in old:
                added += 1
                rows[row] += file.num_records
    return PublishResult(table_uri, version, added, removed, sum(rows.values()), dict(rows))
