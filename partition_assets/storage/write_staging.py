"""The per-write staging area: Spark executors write a DataFrame's files into a fresh
folder of its table (under `_staging/`, or a backfill's `incoming/`), a StagedWrite.

Staged files are checked against the run's partitions before anything is
published; publishing is the table format's step (a Delta commit, or a Parquet
partition swap), so one commit can later publish many staged writes. A backfill's
staged data outlives the write: backfill_staging.py records it.

Not guaranteed: a write killed before publishing leaves its staging folder until a
vacuum sweeps it (older than the retention); files move into the table's layout one
rename each, atomic only where the filesystem's rename is (object stores copy).
"""

from __future__ import annotations

import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from partition_assets.errors import PartitionScopeError
from partition_assets.storage.failpoints import failpoint

if TYPE_CHECKING:  # Spark is imported by the functions that use it: a format's module loads without it
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from partition_assets.storage.partition_scope import PartitionScope
    from partition_assets.storage.table_format import WriteOptions

STAGING_DIR = "_staging"
# What Spark names the directory of a null (or empty-string) partition value.
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


@dataclass(frozen=True)
class StagedFile:
    path: str  # relative to the staging folder, which is its path in the table's layout
    size: int
    partition_values: dict[str, str]
    num_records: int


@dataclass(frozen=True)
class StagedWrite:
    table_uri: str
    staging_dir: str  # this write's folder under the table's _staging/
    schema: pa.Schema  # data columns, then partition columns
    partition_columns: tuple[str, ...]
    files: tuple[StagedFile, ...]

    @property
    def num_records(self) -> int:
        return sum(file.num_records for file in self.files)

    @property
    def rows_by_partition(self) -> dict[tuple[str, ...], int]:
        rows: Counter[tuple[str, ...]] = Counter()
        for file in self.files:
            rows[tuple(file.partition_values[c] for c in self.partition_columns)] += file.num_records
        return dict(rows)


def table_filesystem(table_uri: str) -> tuple[pafs.FileSystem, str]:
    return pafs.FileSystem.from_uri(table_uri)


def stage_dataframe(
    df: DataFrame, table_uri: str, scope: PartitionScope | None, folder: str = STAGING_DIR
) -> StagedWrite:
    """Spark executors write `df` into a new staging folder under `folder` (relative
    to the table at `table_uri`).

    Partition columns are added when the frame lacks them and the run has one
    partition. Rows outside `scope`, or with a null partition value, are an
    error, and then nothing is left behind.

    Raises:
        PartitionScopeError: A row outside `scope` or with a null partition value; a partition
            column the frame lacks while `scope` holds several partitions; a partition column
            neither a string nor a date (a date only for ISO-date keys).
    """
    columns = scope.columns if scope else ()
    df, spark_schema = partitioned_frame(df, scope)
    schema = _table_schema(spark_schema)
    fs, staging = new_staging_dir(table_uri, folder)
    writer = df.write.mode("error")
    if columns:
        writer = writer.partitionBy(*columns)
    try:
        writer.parquet(spark_path(table_uri, staging))
        failpoint("staged")
        return collect_staged(table_uri, staging, schema, scope)
    except BaseException:
        delete_dir(fs, staging)
        raise


def new_staging_dir(table_uri: str, folder: str = STAGING_DIR) -> tuple[pafs.FileSystem, str]:
    """The table's filesystem and a fresh, not yet created folder for one write under
    `folder` (relative to the table)."""
    fs, root = table_filesystem(table_uri)
    return fs, f"{root}/{folder}/{uuid.uuid4().hex}"


def collect_staged(table_uri: str, staging: str, schema: pa.Schema, scope: PartitionScope | None) -> StagedWrite:
    """The write whose Parquet files (in Spark's `col=value/` layout) are in `staging`,
    a folder of the table's filesystem: its files with their sizes, partition values
    and row counts. Rows outside `scope` raise PartitionScopeError; the folder is left
    as it is (the caller deletes it).

    Raises:
        PartitionScopeError: A row outside `scope` or with a null partition value.
    """
    fs, _ = table_filesystem(table_uri)
    written = _list_parquet(fs, staging)
    if scope is not None:
        _check_in_scope(written, scope)
    files = tuple(_staged_file(fs, staging, info, partition) for info, partition in written)
    return StagedWrite(table_uri, staging, schema, scope.columns if scope else (), files)


def move_into_layout(staged: StagedWrite) -> None:
    """Moves the staged files into the table's `col=value/` layout, still unreferenced."""
    fs, root = table_filesystem(staged.table_uri)
    for file in staged.files:
        move_file(fs, f"{staged.staging_dir}/{file.path}", f"{root}/{file.path}")
        failpoint("publishing")
    failpoint("published")
    delete_dir(fs, staged.staging_dir)


def move_file(fs: pafs.FileSystem, source: str, target: str) -> None:
    """Moves a file to `target`, creating the folder that holds it."""
    fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
    fs.move(source, target)


def discard(staged: StagedWrite) -> None:
    fs, _ = table_filesystem(staged.table_uri)
    delete_dir(fs, staged.staging_dir)


def delete_dir(fs: pafs.FileSystem, path: str) -> None:
    """Deletes a folder if it exists."""
    if fs.get_file_info(path).type != pafs.FileType.NotFound:
        fs.delete_dir(path)


def stale_folders(fs: pafs.FileSystem, parent: str, retention_hours: float) -> list[str]:
    """The subfolders of `parent` in which nothing (the folder itself, or anything
    under it) was modified in the last `retention_hours`.

    Object stores give folders no modification time, only their files: there a
    folder's age is its newest file's, and a folder with no file is never stale.
    """
    if fs.get_file_info(parent).type != pafs.FileType.Directory:
        return []
    cutoff_ns = (time.time() - retention_hours * 3600) * 1e9
    stale = []
    for info in fs.get_file_info(pafs.FileSelector(parent)):
        if info.type != pafs.FileType.Directory:
            continue
        inside = fs.get_file_info(pafs.FileSelector(info.path, recursive=True))
        times = [entry.mtime_ns for entry in [info, *inside] if entry.mtime_ns is not None]
        if times and max(times) < cutoff_ns:
            stale.append(info.path)
    return stale


def sweep_staging(table_uri: str, retention_hours: float, dry_run: bool) -> list[str]:
    """Deletes (unless `dry_run`) and returns the staging folders older than the
    retention: writes that died before publishing. Younger ones may be in flight."""
    fs, root = table_filesystem(table_uri)
    stale = stale_folders(fs, f"{root}/{STAGING_DIR}", retention_hours)
    if not dry_run:
        for folder in stale:
            delete_dir(fs, folder)
    return stale


def with_partition_columns(df: DataFrame, scope: PartitionScope | None) -> DataFrame:
    """`df` with its partition columns last, added when missing and the scope is one partition
    (see `partitioned_frame`, which also gives its schema).

    Raises:
        PartitionScopeError: As `partitioned_frame`.
    """
    return partitioned_frame(df, scope)[0]


def partitioned_frame(df: DataFrame, scope: PartitionScope | None) -> tuple[DataFrame, StructType]:
    """`df` with its partition columns last, added when missing and the scope is one
    partition, and that frame's schema. The schema takes one analysis of `df`'s plan by the
    Spark server (a round trip of 0.1-0.5 s for an asset's plan over Spark Connect); the
    columns added and the order are derived from it, not analyzed again.

    Raises:
        PartitionScopeError: A partition column is missing while `scope` holds several partitions;
            a partition column is neither a string nor a date; a date column's keys are not ISO dates.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import DateType, StringType, StructField, StructType

    fields = list(df.schema.fields)
    if scope is None:
        return df, StructType(fields)
    missing = [column for column in scope.columns if column not in {field.name for field in fields}]
    if missing:
        single = scope.single_row
        if single is None:
            raise PartitionScopeError(
                f"the frame has no partition column {missing} but the run covers "
                f"{len(scope)} partitions {scope.describe()}: add the column(s), holding each "
                "row's partition key as a string"
            )
        for column in missing:
            df = df.withColumn(column, F.lit(single[column]))
            fields.append(StructField(column, StringType(), nullable=False))  # what F.lit of a string gives
    by_name = {field.name: field for field in reversed(fields)}  # the first of a repeated name, as Spark resolves it
    for column in scope.columns:
        data_type = by_name[column].dataType
        if isinstance(data_type, DateType):
            _check_date_keys(column, scope)
        elif not isinstance(data_type, StringType):
            raise PartitionScopeError(
                f"partition column {column!r} has type {data_type.simpleString()}, but partition "
                f"columns hold partition keys as strings (or dates, for yyyy-MM-dd keys): cast it, e.g. "
                f"F.date_format({column!r}, 'yyyy-MM-dd') for a date"
            )
    data_columns = [field.name for field in fields if field.name not in scope.columns]
    ordered = [by_name[name] for name in data_columns] + [by_name[column] for column in scope.columns]
    return df.select(*data_columns, *scope.columns), StructType(ordered)


def _check_date_keys(column: str, scope: PartitionScope) -> None:
    """A date partition column stores a key as its folder value `yyyy-MM-dd`, which is the
    key itself only when the key is an ISO date (daily, weekly, monthly keys by default):
    what dagster-deltalake's readers filter time partitions on."""
    index = scope.columns.index(column)
    not_dates = sorted(row[index] for row in scope.rows if not _is_iso_date(row[index]))
    if not_dates:
        raise PartitionScopeError(
            f"partition column {column!r} is a date, but the run's keys {not_dates[:3]} are not "
            "yyyy-MM-dd dates: store the key as a string instead (F.lit(key)). Nothing was written."
        )


def _is_iso_date(text: str) -> bool:
    try:
        return date.fromisoformat(text).isoformat() == text
    except ValueError:
        return False


def _table_schema(spark_schema: StructType) -> pa.Schema:
    # Every column nullable: a frame's non-null flags vary with how it was built,
    # and a table must not reject the next write over them.
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(spark_schema)
    return pa.schema([pa.field(f.name, f.type, nullable=True) for f in arrow])


def spark_path(table_uri: str, path: str) -> str:
    return path if "://" not in table_uri else f"{table_uri.split('://', 1)[0]}://{path}"


def _list_parquet(fs: pafs.FileSystem, staging: str) -> list[tuple[pafs.FileInfo, dict[str, str | None]]]:
    found = []
    for info in fs.get_file_info(pafs.FileSelector(staging, recursive=True)):
        if info.type != pafs.FileType.File or not info.base_name.endswith(".parquet"):
            continue
        found.append((info, parse_partition_path(info.path[len(staging) + 1 :].rpartition("/")[0])))
    return found


def parse_partition_path(relative_dir: str) -> dict[str, str | None]:
    """`ds=2024-01-01-05%3A00/region=emea` -> {"ds": "2024-01-01-05:00", "region": "emea"}."""
    partition: dict[str, str | None] = {}
    for segment in filter(None, relative_dir.split("/")):
        column, _, escaped = segment.partition("=")
        partition[column] = None if escaped == _HIVE_NULL else urllib.parse.unquote(escaped)
    return partition


def _check_in_scope(written: list[tuple[pafs.FileInfo, dict[str, str | None]]], scope: PartitionScope) -> None:
    outside = {
        tuple(sorted(partition.items(), key=lambda item: item[0]))
        for _, partition in written
        if not scope.contains(partition)
    }
    if not outside:
        return
    if any(value is None for row in outside for _, value in row):
        raise PartitionScopeError(
            f"rows with a null or empty partition value in {list(scope.columns)}: every row "
            f"needs its partition key; the run covers {scope.describe()}. Nothing was written."
        )
    shown = sorted(outside)[:5]
    raise PartitionScopeError(
        f"rows for partitions outside this run: {shown}"
        f"{' and more' if len(outside) > 5 else ''}; the run covers {scope.describe()}. "
        "Filter the frame to the run's partitions. Nothing was written."
    )


def _staged_file(
    fs: pafs.FileSystem, staging: str, info: pafs.FileInfo, partition: dict[str, str | None]
) -> StagedFile:
    with fs.open_input_file(info.path) as handle:
        num_records = pq.read_metadata(handle).num_rows
    return StagedFile(
        path=info.path[len(staging) + 1 :],
        size=info.size,
        partition_values={k: v for k, v in partition.items() if v is not None},
        num_records=num_records,
    )


def stage_validated(
    frame: DataFrame,
    table_uri: str,
    scope: PartitionScope | None,
    options: WriteOptions,
    validate: Callable[[StagedWrite], object],
    folder: str = STAGING_DIR,
) -> StagedWrite:
    """`frame` staged for `table_uri` under `folder`, refused when empty (unless allowed)
    or when `validate` raises; on any error the staged files are deleted.

    Raises:
        PartitionScopeError: The frame does not fit `scope` (see `stage_dataframe`), or has no
            rows and `options.allow_empty` is not set.
    """
    staged = stage_dataframe(frame, table_uri, scope, folder)
    try:
        if not staged.files and not options.allow_empty:
            raise PartitionScopeError(
                f"the frame for table {table_uri} has no rows for "
                f"{scope.describe() if scope else 'the table'}; nothing was written. "
                "Set asset metadata allow_empty=True to clear the partitions instead."
            )
        validate(staged)
    except BaseException:
        discard(staged)
        raise
    return staged


def spark_schema(schema: pa.Schema, partition_columns: tuple[str, ...] | list[str]) -> StructType:
    """The table's schema as Spark reads it back: partition columns last."""
    from pyspark.sql.pandas.types import from_arrow_schema

    data = [f for f in schema if f.name not in partition_columns]
    return from_arrow_schema(pa.schema(data + [schema.field(c) for c in partition_columns]))
