"""Parquet tables: Hive-style `col=value/` folders, replaced partition by partition.

What it guarantees, and what it does not (Delta does all of these):
- a write is validated in full before anything is published: bad rows, schema
  drift or an empty frame change nothing;
- each partition folder is swapped by two renames (old folder out, new folder
  in): a reader listing in between sees that partition empty, and a reader of
  several partitions may see some old and some new ones; there is no commit
  that makes a multi-partition write visible at once;
- a write killed mid-publish leaves some partitions new, some old and at most
  one partition missing; re-running the write repairs it;
- renames are atomic on a local or HDFS filesystem only: on object stores a
  folder "rename" copies file by file;
- no versions, so no time travel (a version/timestamp pin is refused), no merge
  (merge_keys are refused) and concurrent writers of one partition race;
- no commit log: WriteOptions.commit_metadata is not stored;
- vacuum deletes what killed writes left in `_staging/` and `_trash/` (a killed
  publish's trash may hold the one missing partition's old files: re-run the
  write before the retention ends).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.fs as pafs

from partition_assets.errors import TableNotFoundError, UnsupportedByFormatError
from partition_assets.storage.failpoints import failpoint
from partition_assets.storage.schema import new_columns
from partition_assets.storage.table_format import (
    DEFAULT_OPTIONS,
    FormatCapabilities,
    PublishResult,
    VacuumResult,
    WriteOptions,
    checked_retention_hours,
)
from partition_assets.storage.write_staging import (
    StagedWrite,
    delete_dir,
    parse_partition_path,
    spark_schema,
    stage_validated,
    stale_folders,
    sweep_staging,
    table_filesystem,
)

if TYPE_CHECKING:  # a reader of the registry (storage/table_formats.py) loads no Spark or Dagster
    from pyspark.sql import DataFrame, SparkSession

    from partition_assets.storage.partition_scope import PartitionScope

# The table's schema and partitioning: Parquet folders alone cannot say which
# columns a table has once columns were added, nor that it is partitioned.
SCHEMA_FILE = "_schema.arrow"
_TRASH_DIR = "_trash"
_PARTITIONING_KEY = b"partition_assets.partition_columns"


class ParquetFormat:
    """TableFormat: plain Parquet in a Hive-style layout."""

    name = "parquet"
    capabilities = FormatCapabilities()  # no versions, no staging: see the module docstring

    def holds_table(self, table_uri: str) -> bool:
        return read_schema(table_uri) is not None

    def write(
        self,
        frame: DataFrame,
        table_uri: str,
        scope: PartitionScope | None,
        options: WriteOptions = DEFAULT_OPTIONS,
    ) -> PublishResult:
        """Replaces `scope`'s partition folders (the whole table when None) with
        `frame`'s, one partition at a time (see the module docstring).

        Raises:
            UnsupportedByFormatError: `options.merge_keys` is set: Parquet cannot merge.
            PartitionScopeError: The frame does not fit `scope`, or has no rows and
                `options.allow_empty` is not set (see `TableFormat.write`).
            TableSchemaError: The frame breaks the table's schema or partitioning (see `TableFormat.write`).
        """
        if options.merge_keys:
            raise UnsupportedByFormatError(
                f"merge_keys need the Delta flavour: Parquet table {table_uri} cannot check that "
                "the rows it merged with are still current. Store the asset with "
                "SparkDeltaIOManager. Nothing was written."
            )
        stored = read_schema(table_uri)

        def validate(staged: StagedWrite) -> None:
            if stored is not None:
                new_columns(stored, _partitioning(stored), staged, options.allow_new_columns)

        staged = stage_validated(frame, table_uri, scope, options, validate)
        return _publish(staged, stored, scope)

    def read(
        self,
        spark: SparkSession,
        table_uri: str,
        scope: PartitionScope | None,
        *,
        version: int | None = None,
        timestamp: str | None = None,
    ) -> DataFrame | None:
        """`scope`'s rows (all when None), opening only their partition folders; None when no table exists.

        Raises:
            UnsupportedByFormatError: `version` or `timestamp` is given: Parquet keeps no versions.
        """
        if version is not None or timestamp is not None:
            raise UnsupportedByFormatError(
                f"Parquet table {table_uri} keeps no versions: drop the version/timestamp pin, "
                "or store the asset with SparkDeltaIOManager for time travel"
            )
        stored = read_schema(table_uri)
        if stored is None:
            return None
        fs, root = table_filesystem(table_uri)
        columns = _partitioning(stored)
        schema = spark_schema(stored, columns)
        if not columns:
            return spark.read.schema(schema).parquet(table_uri)
        folders = _partition_folders(fs, root, columns)
        chosen = [
            f"{table_uri.rstrip('/')}/{folder}"
            for values, folder in folders.items()
            if scope is None or scope.contains(dict(zip(columns, values, strict=True)))
        ]
        if not chosen:
            return spark.createDataFrame([], schema)
        return spark.read.schema(schema).option("basePath", table_uri).parquet(*chosen)

    def missing_partitions(self, table_uri: str, scope: PartitionScope) -> set[tuple[str, ...]]:
        fs, root = table_filesystem(table_uri)
        return set(scope.rows) - set(_partition_folders(fs, root, scope.columns))

    def vacuum(self, table_uri: str, retention_hours: float, dry_run: bool) -> VacuumResult:
        """Deletes the trash of killed publishes and the staging folders of killed
        writes, older than `retention_hours`; a live table has no unreferenced files.

        Raises:
            VacuumRetentionError: `checked_retention_hours` refuses `retention_hours`; nothing was deleted.
            TableNotFoundError: `table_uri` holds no Parquet table; nothing was deleted.
        """
        retention_hours = checked_retention_hours(retention_hours)
        if read_schema(table_uri) is None:
            raise TableNotFoundError(f"no Parquet table at {table_uri}: check the path (it must hold {SCHEMA_FILE})")
        fs, root = table_filesystem(table_uri)
        trash = stale_folders(fs, f"{root}/{_TRASH_DIR}", retention_hours)
        data_files = [path for folder in trash for path in _data_files(fs, folder, recursive=True)]
        if not dry_run:
            for folder in trash:
                delete_dir(fs, folder)
        return VacuumResult(data_files, sweep_staging(table_uri, retention_hours, dry_run))


def _publish(staged: StagedWrite, stored: pa.Schema | None, scope: PartitionScope | None) -> PublishResult:
    """Swaps the validated `staged` write's partition folders in, and `scope`'s out."""
    fs, root = table_filesystem(staged.table_uri)
    if stored is None:
        _write_schema(fs, root, staged.schema, staged.partition_columns)
    else:
        added = [f for f in staged.schema if f.name not in stored.names]
        if added:
            _write_schema(fs, root, pa.schema([*stored, *added]), staged.partition_columns)
    existing = _partition_folders(fs, root, staged.partition_columns)
    replaced = {
        folder
        for values, folder in existing.items()
        if scope is None or scope.contains(dict(zip(scope.columns, values, strict=True)))
    }
    incoming = {file.path.rpartition("/")[0] for file in staged.files}
    trash = f"{root}/{_TRASH_DIR}/{uuid.uuid4().hex}"
    removed = 0
    for folder in sorted(replaced | incoming):
        current = f"{root}/{folder}".rstrip("/")
        if folder in replaced:
            removed += _move_out(fs, current, f"{trash}/{folder}".rstrip("/"), whole_folder=bool(folder))
        if folder in incoming:
            _move_in(fs, f"{staged.staging_dir}/{folder}".rstrip("/"), current)
        failpoint("publishing")
    failpoint("published")
    delete_dir(fs, trash)
    delete_dir(fs, staged.staging_dir)
    return PublishResult.of([staged], None, removed)


def read_schema(table_uri: str) -> pa.Schema | None:
    fs, root = table_filesystem(table_uri)
    path = f"{root}/{SCHEMA_FILE}"
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return None
    with fs.open_input_file(path) as handle:
        return pa.ipc.read_schema(pa.py_buffer(handle.read()))


def _write_schema(fs: pafs.FileSystem, root: str, schema: pa.Schema, partition_columns: tuple[str, ...]) -> None:
    schema = schema.with_metadata({_PARTITIONING_KEY: ",".join(partition_columns).encode()})
    fs.create_dir(root, recursive=True)
    temporary = f"{root}/{SCHEMA_FILE}.{uuid.uuid4().hex}"
    with fs.open_output_stream(temporary) as handle:
        handle.write(schema.serialize().to_pybytes())
    fs.move(temporary, f"{root}/{SCHEMA_FILE}")


def _partitioning(schema: pa.Schema) -> tuple[str, ...]:
    stored = (schema.metadata or {}).get(_PARTITIONING_KEY, b"").decode()
    return tuple(filter(None, stored.split(",")))


def _partition_folders(fs: pafs.FileSystem, root: str, columns: tuple[str, ...]) -> dict[tuple[str | None, ...], str]:
    """Partition values -> folder path relative to the root, for the folders on storage."""
    if not columns:
        return {(): ""}
    folders: dict[tuple[str | None, ...], str] = {(): ""}
    for column in columns:
        deeper: dict[tuple[str | None, ...], str] = {}
        for values, folder in folders.items():
            parent = f"{root}/{folder}".rstrip("/")
            if fs.get_file_info(parent).type != pafs.FileType.Directory:
                continue
            for info in fs.get_file_info(pafs.FileSelector(parent)):
                name = info.base_name
                if info.type == pafs.FileType.Directory and name.startswith(f"{column}="):
                    value = parse_partition_path(name)[column]
                    deeper[(*values, value)] = f"{folder}/{name}".lstrip("/")
        folders = deeper
    return folders


def _move_out(fs: pafs.FileSystem, folder: str, trash: str, whole_folder: bool) -> int:
    """Moves a partition's folder (or, unpartitioned, the root's data files) to the trash."""
    files = _data_files(fs, folder)
    if whole_folder:
        fs.create_dir(trash.rpartition("/")[0], recursive=True)
        fs.move(folder, trash)  # one rename: the partition's files leave together
    else:
        fs.create_dir(trash, recursive=True)
        for path in files:
            fs.move(path, f"{trash}/{path.rpartition('/')[2]}")
    return len(files)


def _move_in(fs: pafs.FileSystem, staged_folder: str, folder: str) -> None:
    if fs.get_file_info(folder).type == pafs.FileType.NotFound:
        fs.create_dir(folder.rpartition("/")[0], recursive=True)
        fs.move(staged_folder, folder)  # one rename: the partition's files arrive together
        return
    for path in _data_files(fs, staged_folder):
        fs.move(path, f"{folder}/{path.rpartition('/')[2]}")


def _data_files(fs: pafs.FileSystem, folder: str, recursive: bool = False) -> list[str]:
    if fs.get_file_info(folder).type != pafs.FileType.Directory:
        return []
    return [
        info.path
        for info in fs.get_file_info(pafs.FileSelector(folder, recursive=recursive))
        if info.type == pafs.FileType.File and info.base_name.endswith(".parquet")
    ]
