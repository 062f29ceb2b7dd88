"""A table format that is not Delta, to prove the TableFormat seam (issue 53): a table is a
folder of Parquet files in a Hive layout and a numbered list of snapshots, each a JSON file
`_snapshots/<version>.json` naming every file of every partition at that version. A commit
writes the next snapshot, created only when no writer created that number first (O_EXCL:
one guarded transition). A backfill's staging is the library's own (storage/backfill_staging.py);
its publish is one snapshot, its rollback another restoring the partitions it replaced.

It keeps versions, publishes staged backfills and rolls them back; it has no schema changes,
no merges and no kept previous versions (FormatCapabilities), so it also shows what a format
lacking a capability answers. `SparkSnapshotIOManager` picks it for the assets it stores, as
SparkDeltaIOManager picks Delta; defining the class registers the format
(storage/table_formats.py), so vacuum and the release log's readers find its tables.

Not guaranteed: local folders only (O_EXCL); a snapshot's files are read by Spark when the
frame runs, after a vacuum may have deleted those no snapshot names.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from partition_assets.errors import (
    BackfillStateError,
    ForeignCommitError,
    ReleaseExpiredError,
    RollbackError,
    TableNotFoundError,
    UnsupportedByFormatError,
)
from partition_assets.storage.backfill_staging import (
    ListedStaging,
    PartitionRow,
    StagedTable,
    data_folder,
    delete_backfill,
    delete_published_backfill,
    incoming_folder,
    list_staging,
    move_into_table_layout,
    read_staged,
    record_staging,
    staged_file_location,
)
from partition_assets.storage.io_manager import SparkTableIOManager
from partition_assets.storage.partition_scope import PartitionScope
from partition_assets.storage.schema import check_partitioning, new_columns
from partition_assets.storage.table_format import (
    DEFAULT_OPTIONS,
    FormatCapabilities,
    PublishResult,
    TableFormat,
    VacuumResult,
    WriteOptions,
    checked_retention_hours,
)
from partition_assets.storage.write_staging import (
    StagedWrite,
    discard,
    move_into_layout,
    spark_path,
    spark_schema,
    stage_validated,
    sweep_staging,
)

SNAPSHOTS_DIR = "_snapshots"
WRITE, PUBLISH, ROLLBACK = "write", "publish", "rollback"


@dataclass(frozen=True)
class Snapshot:
    """One version of a table: its schema, partitioning, each partition's files (paths under
    the table's folder), and what made it (`action`, the backfill, the partitions it changed)."""

    version: int
    schema: pa.Schema
    partition_columns: tuple[str, ...]
    files: Mapping[PartitionRow, tuple[str, ...]]
    committed_at: float  # seconds since the epoch, by the writer's clock
    action: str = WRITE
    backfill_id: str | None = None
    changed: tuple[PartitionRow, ...] = field(default_factory=tuple)


def _root(table_uri: str) -> str:
    return pafs.FileSystem.from_uri(table_uri)[1]


def _snapshot_path(table_uri: str, version: int) -> str:
    return f"{_root(table_uri)}/{SNAPSHOTS_DIR}/{version:010d}.json"


def snapshots(table_uri: str) -> list[Snapshot]:
    """Every snapshot of the table, oldest first (none when there is no table)."""
    folder = f"{_root(table_uri)}/{SNAPSHOTS_DIR}"
    if not os.path.isdir(folder):
        return []
    return [_load(f"{folder}/{name}") for name in sorted(os.listdir(folder)) if name.endswith(".json")]


def _load(path: str) -> Snapshot:
    with open(path) as handle:
        raw = json.load(handle)
    schema = pa.ipc.read_schema(pa.py_buffer(bytes.fromhex(raw["schema"])))
    return Snapshot(
        raw["version"],
        schema,
        tuple(raw["partition_columns"]),
        {tuple(row): tuple(paths) for row, paths in raw["files"]},
        raw["committed_at"],
        raw["action"],
        raw["backfill_id"],
        tuple(tuple(row) for row in raw["changed"]),
    )


def _latest(table_uri: str) -> Snapshot | None:
    found = snapshots(table_uri)
    return found[-1] if found else None


def _at(table_uri: str, version: int) -> Snapshot:
    path = _snapshot_path(table_uri, version)
    if not os.path.exists(path):
        raise ReleaseExpiredError(f"snapshot table {table_uri} has no version {version}; nothing was read.")
    return _load(path)


def _commit(table_uri: str, after: Snapshot | None, snapshot: Snapshot) -> Snapshot:
    """Writes `snapshot` as the version after `after`; refused when another writer made it first."""
    path = _snapshot_path(table_uri, snapshot.version)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    body = {
        "version": snapshot.version,
        "schema": snapshot.schema.serialize().to_pybytes().hex(),
        "partition_columns": list(snapshot.partition_columns),
        "files": [[list(row), list(paths)] for row, paths in sorted(snapshot.files.items())],
        "committed_at": snapshot.committed_at,
        "action": snapshot.action,
        "backfill_id": snapshot.backfill_id,
        "changed": [list(row) for row in snapshot.changed],
    }
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        raise ForeignCommitError(
            f"snapshot table {table_uri}: version {snapshot.version} was committed by another writer after "
            f"version {-1 if after is None else after.version}; nothing was committed. Run again."
        ) from None
    with os.fdopen(descriptor, "w") as handle:
        json.dump(body, handle)
    return snapshot


def _next(
    after: Snapshot | None,
    schema: pa.Schema,
    columns: tuple[str, ...],
    files: Mapping[PartitionRow, tuple[str, ...]],
    action: str,
    backfill_id: str | None,
    changed: tuple[PartitionRow, ...],
) -> Snapshot:
    version = 0 if after is None else after.version + 1
    kept = {row: paths for row, paths in files.items() if paths}
    now = time.time()  # bookkeeping time of the commit, not asset logic
    return Snapshot(version, schema, columns, kept, now, action, backfill_id, tuple(sorted(changed)))


class SnapshotFormat:
    """TableFormat and StagingFormat: Parquet files listed by numbered JSON snapshots (see the module docstring)."""

    name = "snapshots"
    capabilities = FormatCapabilities(versions=True, staged_publish=True, rollback=True)

    def holds_table(self, table_uri: str) -> bool:
        return bool(snapshots(table_uri))

    # TableFormat

    def write(
        self,
        frame: DataFrame,
        table_uri: str,
        scope: PartitionScope | None,
        options: WriteOptions = DEFAULT_OPTIONS,
    ) -> PublishResult:
        _refuse_merge(table_uri, options)
        before = _latest(table_uri)

        def validate(staged: StagedWrite) -> None:
            if before is not None:
                new_columns(before.schema, before.partition_columns, staged, options.allow_new_columns)

        staged = stage_validated(frame, table_uri, scope, options, validate)
        move_into_layout(staged)  # unreferenced until the snapshot names them
        replaced = scope.rows if scope is not None else frozenset(before.files if before else ())
        incoming: dict[PartitionRow, list[str]] = {row: [] for row in replaced}
        for file in staged.files:
            incoming.setdefault(tuple(file.partition_values[c] for c in staged.partition_columns), []).append(file.path)
        kept = {row: paths for row, paths in (before.files if before else {}).items() if scope is not None}
        files = {**kept, **{row: tuple(paths) for row, paths in incoming.items()}}
        removed = sum(len(before.files.get(row, ())) for row in incoming) if before else 0
        schema = _extended(before, staged.schema)
        snapshot = _next(before, schema, staged.partition_columns, files, WRITE, None, tuple(incoming))
        return PublishResult.of([staged], _commit(table_uri, before, snapshot).version, removed)

    def read(
        self,
        spark: SparkSession,
        table_uri: str,
        scope: PartitionScope | None,
        *,
        version: int | None = None,
        timestamp: str | None = None,
    ) -> DataFrame | None:
        if timestamp is not None:
            version = self.version_at(table_uri, datetime.fromisoformat(timestamp))
            if version is None:
                return None
        snapshot = _latest(table_uri) if version is None else _at(table_uri, version)
        if snapshot is None:
            return None
        rows = [row for row in snapshot.files if scope is None or row in scope.rows]
        paths = [spark_path(table_uri, f"{_root(table_uri)}/{p}") for row in rows for p in snapshot.files[row]]
        return _spark_read(
            spark, snapshot.schema, snapshot.partition_columns, spark_path(table_uri, _root(table_uri)), paths
        )

    def missing_partitions(self, table_uri: str, scope: PartitionScope) -> set[PartitionRow]:
        snapshot = _latest(table_uri)
        return set(scope.rows) - set(snapshot.files if snapshot else ())

    def vacuum(self, table_uri: str, retention_hours: float, dry_run: bool) -> VacuumResult:
        """Deletes the data files no snapshot names, older than `retention_hours`, and dead staging."""
        retention_hours = checked_retention_hours(retention_hours)
        found = snapshots(table_uri)
        if not found:
            raise TableNotFoundError(f"no snapshot table at {table_uri}; nothing was deleted")
        named = {path for snapshot in found for paths in snapshot.files.values() for path in paths}
        root = _root(table_uri)
        cutoff = time.time() - retention_hours * 3600
        unnamed = []
        for folder, subfolders, names in os.walk(root):
            subfolders[:] = [name for name in subfolders if not name.startswith(("_", "."))]
            for name in names:
                path = f"{folder}/{name}"
                if name.endswith(".parquet") and os.path.relpath(path, root) not in named:
                    if os.path.getmtime(path) < cutoff:
                        unnamed.append(path)
        if not dry_run:
            for path in unnamed:
                os.remove(path)
        return VacuumResult(unnamed, sweep_staging(table_uri, retention_hours, dry_run))

    # VersionedFormat

    def version(self, table_uri: str) -> int | None:
        snapshot = _latest(table_uri)
        return None if snapshot is None else snapshot.version

    def version_at(self, table_uri: str, when: datetime) -> int | None:
        older = [s.version for s in snapshots(table_uri) if s.committed_at <= when.timestamp()]
        return max(older, default=None)

    def read_version(self, table_uri: str, version: int) -> pa.Table:
        snapshot = _at(table_uri, version)
        root = _root(table_uri)
        paths = [f"{root}/{path}" for paths in snapshot.files.values() for path in paths]
        partitioning = pads.partitioning(
            pa.schema([snapshot.schema.field(c) for c in snapshot.partition_columns]), flavor="hive"
        )
        dataset = pads.dataset(paths, schema=snapshot.schema, partitioning=partitioning, partition_base_dir=root)
        return dataset.to_table()

    def schema(self, table_uri: str, version: int | None = None) -> pa.Schema | None:
        snapshot = _latest(table_uri) if version is None else _at(table_uri, version)
        return None if snapshot is None else snapshot.schema

    # StagingFormat

    def stage(
        self,
        frame: DataFrame,
        table_uri: str,
        scope: PartitionScope | None,
        options: WriteOptions,
        backfill_id: str,
    ) -> PublishResult:
        _refuse_merge(table_uri, options)
        published = _latest(table_uri)
        earlier = self.staged(table_uri, backfill_id)

        def validate(write: StagedWrite) -> None:
            if published is not None:
                new_columns(published.schema, published.partition_columns, write, options.allow_new_columns)
            elif earlier is not None:
                check_partitioning(earlier.partition_columns, write)

        write = stage_validated(frame, table_uri, scope, options, validate, incoming_folder(backfill_id))
        try:
            schema = None if published is None else published.schema
            record_staging(write, backfill_id, scope.rows if scope else [()], options.commit_metadata, schema)
        except BaseException:
            discard(write)
            raise
        return PublishResult.of([write], None, 0)

    def stage_removal(
        self, table_uri: str, scope: PartitionScope | None, backfill_id: str, metadata: Mapping[str, str]
    ) -> None:
        published = _latest(table_uri)
        if published is None:
            raise TableNotFoundError(f"no snapshot table at {table_uri}: nothing to remove; nothing was staged")
        root = _root(table_uri)
        removal = StagedWrite(
            table_uri,
            f"{root}/{incoming_folder(backfill_id)}/removal",
            published.schema,
            published.partition_columns,
            (),
        )
        record_staging(removal, backfill_id, scope.rows if scope else [()], metadata, published.schema)

    def read_overlay(
        self, spark: SparkSession, table_uri: str, scope: PartitionScope | None, backfill_id: str
    ) -> DataFrame | None:
        staged = self.staged(table_uri, backfill_id)
        published = _latest(table_uri)
        if staged is None:
            return self.read(spark, table_uri, scope)
        root = _root(table_uri)
        wanted = set(staged.files_by_partition) | set(published.files if published else ())
        rows = [row for row in wanted if scope is None or row in scope.rows]
        staged_paths: list[str] = []
        published_paths: list[str] = []
        for row in rows:
            if row in staged.files_by_partition:
                for file in staged.files_by_partition[row]:
                    location, in_layout = staged_file_location(staged, file)
                    (published_paths if in_layout else staged_paths).append(location)
            elif published is not None:
                published_paths += [f"{root}/{path}" for path in published.files[row]]
        _, data = data_folder(table_uri, backfill_id)
        frames = [
            _spark_read(
                spark,
                staged.schema,
                staged.partition_columns,
                spark_path(table_uri, base),
                [spark_path(table_uri, p) for p in paths],
            )
            for base, paths in ((data, staged_paths), (root, published_paths))
            if paths
        ]
        if not frames:
            return _spark_read(spark, staged.schema, staged.partition_columns, spark_path(table_uri, root), [])
        result = frames[0]
        for frame in frames[1:]:
            result = result.unionByName(frame)
        return result

    def staged(self, table_uri: str, backfill_id: str) -> StagedTable | None:
        published = _latest(table_uri)
        return read_staged(table_uri, backfill_id, None if published is None else published.schema)

    def partition_files(self, table_uri: str, scope: PartitionScope | None) -> dict[PartitionRow, frozenset[str]]:
        snapshot = _latest(table_uri)
        files = snapshot.files if snapshot else {}
        return {row: frozenset(paths) for row, paths in files.items() if scope is None or row in scope.rows}

    def publish_staged(
        self,
        table_uri: str,
        backfill_id: str,
        expected: Mapping[PartitionRow, frozenset[str]] | None,
        metadata: Mapping[str, str],
        listed: ListedStaging | None = None,
    ) -> PublishResult:
        done = _find(table_uri, PUBLISH, backfill_id)
        if done is not None:
            return _result(table_uri, done, None)
        staged = self.staged(table_uri, backfill_id) if listed is None else listed.staged
        if staged is None:
            raise BackfillStateError(f"backfill {backfill_id} staged nothing for {table_uri} and has not published it")
        self.check_publish(table_uri, backfill_id, expected, staged)
        before = _latest(table_uri)
        move_into_table_layout(list_staging(staged) if listed is None else listed)
        new_files = {row: tuple(file.path for file in files) for row, files in staged.files_by_partition.items()}
        files = {**(before.files if before else {}), **new_files}
        snapshot = _next(before, staged.schema, staged.partition_columns, files, PUBLISH, backfill_id, tuple(new_files))
        committed = _commit(table_uri, before, snapshot)
        delete_published_backfill(table_uri, backfill_id)
        return _result(table_uri, committed, before)

    def check_publish(
        self,
        table_uri: str,
        backfill_id: str,
        expected: Mapping[PartitionRow, frozenset[str]] | None,
        staged: StagedTable | None = None,
    ) -> None:
        staged = self.staged(table_uri, backfill_id) if staged is None else staged
        if staged is None or expected is None:
            return
        current = self.partition_files(table_uri, staged.scope)
        changed = [
            row for row in staged.files_by_partition if current.get(row, frozenset()) != expected.get(row, frozenset())
        ]
        if changed:
            raise ForeignCommitError(
                f"snapshot table {table_uri}: partitions {sorted(changed)} changed outside backfill {backfill_id} "
                "since it started; nothing was committed and the staging is kept. Publish with --force to "
                "overwrite them."
            )

    def published_version(self, table_uri: str, backfill_id: str) -> int | None:
        done = _find(table_uri, PUBLISH, backfill_id)
        return None if done is None else done.version

    def discard_staged(self, table_uri: str, backfill_id: str) -> int:
        return delete_backfill(table_uri, backfill_id)

    def rollback(self, table_uri: str, backfill_id: str, published_version: int, force: bool = False) -> PublishResult:
        done = _find(table_uri, ROLLBACK, backfill_id)
        if done is not None:
            return _result(table_uri, done, None)
        self.check_rollback(table_uri, backfill_id, published_version, force)
        publish, latest = _at(table_uri, published_version), _latest(table_uri)
        assert latest is not None  # check_rollback found the publish
        before = _at(table_uri, published_version - 1) if published_version > 0 else None
        restored = {row: (before.files.get(row, ()) if before else ()) for row in publish.changed}
        files = {**latest.files, **restored}
        schema = before.schema if before else latest.schema
        snapshot = _next(latest, schema, latest.partition_columns, files, ROLLBACK, backfill_id, publish.changed)
        return _result(table_uri, _commit(table_uri, latest, snapshot), latest)

    def check_rollback(self, table_uri: str, backfill_id: str, published_version: int, force: bool = False) -> None:
        found = {s.version: s for s in snapshots(table_uri)}
        publish = found.get(published_version)
        if publish is None or publish.action != PUBLISH or publish.backfill_id != backfill_id:
            raise RollbackError(
                f"version {published_version} of {table_uri} is not backfill {backfill_id}'s publish; "
                "nothing was committed."
            )
        later = [s for v, s in found.items() if v > published_version and set(s.changed) & set(publish.changed)]
        if later and not force:
            raise RollbackError(
                f"versions {[s.version for s in later]} of {table_uri} changed partitions backfill {backfill_id} "
                "published since; nothing was committed. Roll back with --force to discard them."
            )
        before = found.get(published_version - 1)
        root = _root(table_uri)
        gone = [
            p
            for row in publish.changed
            for p in (before.files.get(row, ()) if before else ())
            if not os.path.exists(f"{root}/{p}")
        ]
        if gone:
            raise RollbackError(f"files {gone} of {table_uri} to restore were deleted (vacuum); nothing was committed.")

    def check_one_schema(self, spark: Callable[[], SparkSession], table_uri: str, version: int) -> None:
        """Nothing to check: without `schema_changes`, a commit only adds nullable columns."""


def _refuse_merge(table_uri: str, options: WriteOptions) -> None:
    if options.merge_keys:
        raise UnsupportedByFormatError(
            f"snapshot table {table_uri} cannot merge (merge_keys); drop them or store the asset as Delta. "
            "Nothing was written."
        )


def _extended(before: Snapshot | None, incoming: pa.Schema) -> pa.Schema:
    if before is None:
        return incoming
    return pa.schema([*before.schema, *(f.with_nullable(True) for f in incoming if f.name not in before.schema.names)])


def _find(table_uri: str, action: str, backfill_id: str) -> Snapshot | None:
    return next((s for s in snapshots(table_uri) if s.action == action and s.backfill_id == backfill_id), None)


def _result(table_uri: str, snapshot: Snapshot, before: Snapshot | None) -> PublishResult:
    """What `snapshot` changed (`before`: the snapshot it followed; None: not known, none counted removed)."""
    removed = sum(len(before.files.get(row, ())) for row in snapshot.changed) if before else 0
    root = _root(table_uri)
    rows = {
        row: sum(pq.read_metadata(f"{root}/{path}").num_rows for path in snapshot.files.get(row, ()))
        for row in snapshot.changed
    }
    added = sum(len(snapshot.files.get(row, ())) for row in snapshot.changed)
    return PublishResult(table_uri, snapshot.version, added, removed, sum(rows.values()), rows)


def _spark_read(
    spark: SparkSession, schema: pa.Schema, columns: tuple[str, ...], base: str, paths: list[str]
) -> DataFrame:
    spark_types = spark_schema(schema, columns)
    if not paths:
        return spark.createDataFrame([], spark_types)
    return spark.read.schema(spark_types).option("basePath", base).parquet(*paths)


class SparkSnapshotIOManager(SparkTableIOManager):
    """Tables in the snapshot format: what a user defines to pick a format of their own."""

    table_format: ClassVar[TableFormat] = SnapshotFormat()
