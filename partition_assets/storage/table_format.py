"""What a table format (Delta, Parquet) provides to the IO managers and the backfill
engine: one `write` that stages, validates and publishes a frame, scoped `read`s, and
`vacuum` (TableFormat); versions read by number (VersionedFormat); a backfill's staging
published in one commit per table and rolled back (StagingFormat); previous versions kept
readable (PreviousKeepingFormat). A format declares which it provides in its
`capabilities` (FormatCapabilities): callers ask `requires` for one, never the format's
class, so a new format needs no change outside its module and its registration
(storage/table_formats.py).

Not guaranteed by the protocol: atomicity, versions, merges and concurrent
writers differ by format (see each format's module docstring); a format that
cannot do what was asked raises UnsupportedByFormatError before writing anything.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol, cast

import pyarrow as pa

from partition_assets.errors import UnsupportedByFormatError, VacuumRetentionError

if TYPE_CHECKING:  # types only: this module loads without Spark or Dagster (storage/table_formats.py)
    from pyspark.sql import DataFrame, SparkSession

    from partition_assets.storage.backfill_staging import ListedStaging, StagedTable
    from partition_assets.storage.partition_scope import PartitionScope
    from partition_assets.storage.write_staging import StagedWrite


@dataclass(frozen=True)
class WriteOptions:
    """How a write may change its table."""

    allow_empty: bool = False  # an empty frame clears the scope instead of failing
    allow_new_columns: bool = False  # new columns extend the schema, as nullable
    merge_keys: tuple[str, ...] = ()  # upsert on these keys within the scope (Delta only)
    # a backfill's staging may drop, retype or add columns (the asset declares a schema change);
    # its publish then checks that every partition was rewritten (storage/schema_change.py)
    allow_schema_change: bool = False
    commit_metadata: Mapping[str, str] = field(default_factory=dict)  # kept where commits are logged


DEFAULT_OPTIONS = WriteOptions()
# The shortest vacuum retention: a write moves its files into the table before its
# commit references them, so a shorter window can delete the files of a write in flight.
MIN_RETENTION_HOURS = 1


@dataclass(frozen=True)
class PublishResult:
    """What a published write changed."""

    table_uri: str
    version: int | None  # the table version the write created, where the format has versions
    files_added: int
    files_removed: int
    rows: int
    rows_by_partition: dict[tuple[str, ...], int]  # partition values -> rows; () when unpartitioned

    @classmethod
    def of(cls, writes: Sequence[StagedWrite], version: int | None, files_removed: int) -> PublishResult:
        rows: Counter[tuple[str, ...]] = Counter()
        for write in writes:
            rows.update(write.rows_by_partition)
        return cls(
            table_uri=writes[0].table_uri,
            version=version,
            files_added=sum(len(write.files) for write in writes),
            files_removed=files_removed,
            rows=sum(rows.values()),
            rows_by_partition=dict(rows),
        )


@dataclass(frozen=True)
class VacuumResult:
    """What a vacuum deleted (in a dry run: would delete)."""

    data_files: list[str]  # no reader sees them: replaced, or from writes that never published
    staging_folders: list[str]  # staging folders of writes that died before publishing
    dropped_tables: list[str] = field(default_factory=list)  # kept previous versions past their expiry


class Capability(StrEnum):
    """What a caller may ask of a format (`requires`): each a field of FormatCapabilities."""

    VERSIONS = "versions"
    STAGED_PUBLISH = "staged_publish"
    ROLLBACK = "rollback"
    SCHEMA_CHANGES = "schema_changes"
    KEEP_PREVIOUS = "keep_previous"

    def enables(self) -> str:
        """What the capability lets a caller do, as UnsupportedByFormatError says it."""
        return {
            Capability.VERSIONS: "read a table at a version or time and pin it to a release",
            Capability.STAGED_PUBLISH: "stage a backfill's partitions and publish each table in one commit",
            Capability.ROLLBACK: "roll a backfill's publish back in one commit",
            Capability.SCHEMA_CHANGES: "change a table's schema through a staged backfill",
            Capability.KEEP_PREVIOUS: "keep the version before a publish readable as <table>__previous",
        }[self]


@dataclass(frozen=True)
class FormatCapabilities:
    """What a table format can do beyond TableFormat's write, read and vacuum: each field
    names what a caller asks before it relies on it (`requires`, by its Capability)."""

    # Numbered versions: a read pinned at a version or time, the latest version looked up, a
    # version read whole (VersionedFormat); what a run's release pin and the release log need.
    versions: bool = False
    # A backfill's writes staged and each table's published in one commit (StagingFormat).
    staged_publish: bool = False
    # A backfill's publish commit undone in one commit (StagingFormat.rollback).
    rollback: bool = False
    # A backfill may drop, retype or rename columns (the whole table rewritten in one commit),
    # known before it runs; the schema at each version is read back (VersionedFormat.schema).
    schema_changes: bool = False
    # The version before a publish kept readable as `<table>__previous` (PreviousKeepingFormat).
    keep_previous: bool = False

    def has(self, capability: Capability) -> bool:
        return bool(getattr(self, capability.value))


class TableFormat(Protocol):
    name: str  # the format's name in the registry (storage/table_formats.py) and in messages
    capabilities: FormatCapabilities

    def holds_table(self, table_uri: str) -> bool:
        """Whether `table_uri` holds a table of this format (what the registry detects it by)."""

    def write(
        self,
        frame: DataFrame,
        table_uri: str,
        scope: PartitionScope | None,
        options: WriteOptions = DEFAULT_OPTIONS,
    ) -> PublishResult:
        """Replaces exactly `scope`'s partitions (the whole table when None) with `frame`.

        The frame is staged and validated before anything is published; any
        error before publishing leaves the table unchanged and no staged files.

        Raises:
            PartitionScopeError: The frame does not fit `scope` (a row outside it, a null partition
                value, a partition column missing for several partitions or neither a string nor a
                date), or has no rows and `options.allow_empty` is not set.
            TableSchemaError: The frame drops or retypes a column of the table, is partitioned
                differently, or adds columns without `options.allow_new_columns`.
            UnsupportedByFormatError: `options` asks for what the format cannot do (merge keys on Parquet).
        """

    def read(
        self,
        spark: SparkSession,
        table_uri: str,
        scope: PartitionScope | None,
        *,
        version: int | None = None,
        timestamp: str | None = None,
    ) -> DataFrame | None:
        """`scope`'s rows (all when None), opening only their files; None when no table exists.

        Raises:
            UnsupportedByFormatError: `version` or `timestamp` is given to a format without versions.
        """

    def missing_partitions(self, table_uri: str, scope: PartitionScope) -> set[tuple[str, ...]]:
        """The partitions of `scope` that hold no rows."""

    def vacuum(self, table_uri: str, retention_hours: float, dry_run: bool) -> VacuumResult:
        """Deletes files no reader sees that are older than `retention_hours`.

        Raises:
            VacuumRetentionError: `checked_retention_hours` refuses `retention_hours`; nothing was deleted.
            TableNotFoundError: `table_uri` holds no table of this format; nothing was deleted.
        """


def checked_retention_hours(retention_hours: float) -> float:
    """`retention_hours` as every vacuum takes it (the Python API, each format's
    `vacuum`, the CLI): a finite number of hours, at least MIN_RETENTION_HOURS.
    Callers check before listing or deleting.

    Raises:
        VacuumRetentionError: `retention_hours` is not a finite number of at least MIN_RETENTION_HOURS.
    """
    # `not >=` also refuses NaN, which compares false with everything.
    if (
        not isinstance(retention_hours, int | float)
        or not retention_hours >= MIN_RETENTION_HOURS
        or math.isinf(retention_hours)
    ):
        raise VacuumRetentionError(
            f"vacuum retention {retention_hours!r} hours is refused: it must be a finite number of "
            f"hours, at least {MIN_RETENTION_HOURS}, as a shorter window deletes files that a write in "
            f"flight moved into the table and has not committed yet. Pass {MIN_RETENTION_HOURS} or more "
            "(the default is 168); nothing was deleted."
        )
    return float(retention_hours)


class VersionedFormat(TableFormat, Protocol):
    """A format whose tables keep numbered versions (`capabilities.versions`)."""

    def version(self, table_uri: str) -> int | None:
        """The table's latest version; None when there is no table."""

    def version_at(self, table_uri: str, when: datetime) -> int | None:
        """The table's version as of `when`; None when the table did not exist then."""

    def read_version(self, table_uri: str, version: int) -> pa.Table:
        """Every row of the table as of `version`, without Spark.

        Raises:
            ReleaseExpiredError: The version can no longer be read (vacuum removed it); nothing was read.
        """

    def schema(self, table_uri: str, version: int | None = None) -> pa.Schema | None:
        """The table's schema (partition columns included), latest or as of `version`; None
        when there is no table."""


class StagingFormat(VersionedFormat, Protocol):
    """A format whose writes can be staged for a backfill and published later, all
    partitions of a table in one commit (`capabilities.staged_publish`: Delta). Parquet
    cannot: its partition swaps are one folder at a time."""

    def stage(
        self,
        frame: DataFrame,
        table_uri: str,
        scope: PartitionScope | None,
        options: WriteOptions,
        backfill_id: str,
    ) -> PublishResult:
        """Validates `frame` as `write` does and stages it for backfill `backfill_id`:
        readers of the table do not see it until the backfill publishes.

        Raises:
            PartitionScopeError: As `write`.
            TableSchemaError: As `write`, against the published table (without one, the backfill's
                earlier staging).
            BackfillIdError: `backfill_id` cannot name a folder.
        """

    def stage_removal(
        self, table_uri: str, scope: PartitionScope | None, backfill_id: str, metadata: Mapping[str, str]
    ) -> None:
        """Stages the removal of every row of `scope`'s partitions (the whole table when None) for
        backfill `backfill_id`, with the commit `metadata`: its publish deletes them in one commit.

        Raises:
            TableNotFoundError: There is no table; nothing was staged.
            BackfillIdError: `backfill_id` cannot name a folder.
        """

    def read_overlay(
        self, spark: SparkSession, table_uri: str, scope: PartitionScope | None, backfill_id: str
    ) -> DataFrame | None:
        """`scope`'s rows as backfill `backfill_id` sees them: its staged partitions, else the published ones.

        Raises:
            BackfillIdError: `backfill_id` cannot name a folder.
        """

    def staged(self, table_uri: str, backfill_id: str) -> StagedTable | None:
        """What backfill `backfill_id` staged for the table; None when nothing.

        Raises:
            BackfillIdError: `backfill_id` cannot name a folder.
        """

    def partition_files(self, table_uri: str, scope: PartitionScope | None) -> dict[tuple[str, ...], frozenset[str]]:
        """The published files of each partition of `scope`: what a backfill's lease remembers."""

    def publish_staged(
        self,
        table_uri: str,
        backfill_id: str,
        expected: Mapping[tuple[str, ...], frozenset[str]] | None,
        metadata: Mapping[str, str],
        listed: ListedStaging | None = None,
    ) -> PublishResult:
        """Publishes everything the backfill staged for the table in one idempotent commit.

        Args:
            expected: The published files of each staged partition when the backfill started (as
                `partition_files` took them); None publishes over whatever commits came since (--force).
            metadata: Commit metadata to record with the publish.
            listed: The staging as the caller read it for this publish (`staged`, then
                backfill_staging.list_staging): not read again (None: read here).

        Raises:
            ForeignCommitError: A staged partition's published files are no longer `expected`;
                nothing was committed and the staging is kept.
            BackfillStateError: The backfill staged nothing for the table and has not published to it.
            TableSchemaError: The staged schema no longer fits the table's.
            SchemaChangeError: The staged schema drops, retypes, renames or splits a column and a
                partition of the table was not staged; nothing was committed, the staging is kept.
            CommitError: A staged file is missing or the commit kept losing to concurrent writers (the
                table is unchanged), or the table holds the publish but its log no longer names its version.
            BackfillIdError: `backfill_id` cannot name a folder.
        """

    def check_publish(
        self,
        table_uri: str,
        backfill_id: str,
        expected: Mapping[tuple[str, ...], frozenset[str]] | None,
        staged: StagedTable | None = None,
    ) -> None:
        """Raises ForeignCommitError or SchemaChangeError when `publish_staged` with `expected`
        would refuse; commits nothing. `expected` None: the schema change only, whatever commits
        were made outside the backfill (as `publish_staged` with --force checks). `staged`: the
        staging as the caller read it (`staged`), not read again (None: read here).

        Raises:
            ForeignCommitError: A staged partition's published files are no longer `expected`.
            SchemaChangeError: The staged schema change needs a partition the backfill did not stage.
            CommitError: The table holds the backfill's publish but its log no longer names its version.
            BackfillIdError: `backfill_id` cannot name a folder.
        """

    def published_version(self, table_uri: str, backfill_id: str) -> int | None:
        """The version the backfill's publish commit created; None when the table holds none.

        Raises:
            CommitError: The table holds the backfill's publish but its log no longer names its version.
        """

    def discard_staged(self, table_uri: str, backfill_id: str) -> int:
        """Deletes what the backfill staged for the table; returns how many files.

        Raises:
            BackfillIdError: `backfill_id` cannot name a folder.
        """

    def rollback(self, table_uri: str, backfill_id: str, published_version: int, force: bool = False) -> PublishResult:
        """Restores the partitions the backfill published to their content before, in one commit.

        Args:
            published_version: The version the backfill's publish commit created.
            force: Also discard the changes later commits made to those partitions.

        Raises:
            RollbackError: There is no table, `published_version` is not the backfill's publish
                commit, a later commit changed its partitions (unless `force`), or a file to restore
                is gone; nothing was committed.
            CommitError: The commit kept losing to concurrent writers (the table is unchanged), or the
                table holds the backfill's rollback but its log no longer names its version.
        """

    def check_rollback(self, table_uri: str, backfill_id: str, published_version: int, force: bool = False) -> None:
        """Raises RollbackError when `rollback` would refuse; commits nothing.

        Raises:
            RollbackError: As `rollback`.
            CommitError: The table holds the backfill's rollback but its log no longer names its version.
        """

    def check_one_schema(self, spark: Callable[[], SparkSession], table_uri: str, version: int) -> None:
        """After the commit at `version`, when it changed the table's schema: every data file is
        checked against the schema and Spark reads the changed columns of all of them (in the
        session `spark` gives, called only then).

        Raises:
            MixedSchemaError: A file holds a column the schema lacks or a changed column in another
                type, or Spark fails to read; the commit stands (the message says how to undo it).
        """


class KeptVersion(Protocol):
    """A table's version before a backfill's publish, kept readable as a table of its own."""

    uri: str  # where it is kept
    version: int  # the table's version it holds
    backfill_id: str  # the backfill whose publish replaced it
    expires_at: datetime  # vacuum drops it after


class PreviousKeepingFormat(StagingFormat, Protocol):
    """A format that keeps a table's version before a publish readable (`capabilities.keep_previous`)."""

    def keep_previous(self, table_uri: str, version: int, backfill_id: str, expires_at: datetime) -> KeptVersion:
        """Makes `<table>__previous` hold version `version` of the table until `expires_at`;
        idempotent for one backfill.

        Raises:
            CommitError: The table has no version `version`; nothing was committed.
        """

    def kept_previous(self, table_uri: str) -> KeptVersion | None:
        """The table's kept previous version; None when there is none."""


def requires(table_format: TableFormat, capability: Capability, table_uri: str, fix: str) -> None:
    """Raises UnsupportedByFormatError unless `table_format` has `capability`, before the
    caller reads or writes anything.

    Raises:
        UnsupportedByFormatError: The format lacks `capability`; the message names the format, the
            capability, `fix` (what the caller can do instead) and that nothing was written.
    """
    if not table_format.capabilities.has(capability):
        raise UnsupportedByFormatError(
            f"table {table_uri} is stored as {table_format.name}, which lacks the capability "
            f"'{capability.value}' (to {capability.enables()}): {fix}. Nothing was written."
        )


def versioned(table_format: TableFormat) -> VersionedFormat | None:
    """`table_format` as a VersionedFormat when it keeps versions; None when not."""
    return cast(VersionedFormat, table_format) if table_format.capabilities.versions else None


def staging(table_format: TableFormat) -> StagingFormat | None:
    """`table_format` as a StagingFormat when it publishes staged backfills; None when not."""
    return cast(StagingFormat, table_format) if table_format.capabilities.staged_publish else None


def required_staging(table_format: TableFormat, table_uri: str, fix: str) -> StagingFormat:
    """`table_format` as a StagingFormat.

    Raises:
        UnsupportedByFormatError: It cannot publish staged backfills (`requires`); nothing was written.
    """
    requires(table_format, Capability.STAGED_PUBLISH, table_uri, fix)
    return cast(StagingFormat, table_format)
