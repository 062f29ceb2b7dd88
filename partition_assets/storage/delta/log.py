"""Reading a Delta table's log: its snapshots and versions, the files of each partition,
the application transactions and commit metadata that mark a backfill's commits, and
what one commit changed.

A backfill's publish commit carries the application transaction `publish_app_id(id)`
and its rollback commit `rollback_app_id(id)`, so the log alone says whether either
happened; their commit metadata (`backfill_commit_metadata`) finds their versions.

Not guaranteed: commit metadata is kept only in the Delta log: once old log entries
are cleaned up, a backfill's commit version is no longer found there (CommitError naming
the backfill's ledger, which keeps it).
"""

from __future__ import annotations

import urllib.parse
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from partition_assets.errors import CommitError
from partition_assets.storage.backfill_staging import PartitionRow
from partition_assets.storage.delta.tables import open_table  # here too: the package's modules read it from here
from partition_assets.storage.partition_scope import PartitionScope
from partition_assets.storage.table_format import PublishResult

# Commit metadata naming the backfill a commit belongs to, and what it did.
_BACKFILL_KEY = "partition_assets.backfill_id"
_ACTION_KEY = "partition_assets.backfill_action"
PUBLISH = "publish"
ROLLBACK = "rollback"


def table_schema(table: DeltaTable) -> tuple[pa.Schema, tuple[str, ...]]:
    """The table's schema and partition columns."""
    return pa.schema(table.schema().to_arrow()), tuple(table.metadata().partition_columns)


def version_at(table_uri: str, when: datetime) -> int | None:
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


@dataclass(frozen=True)
class LoggedFile:
    """A data file as a snapshot's add action records it."""

    path: str  # decoded, relative to the table: what actions take
    size: int
    num_records: int
    modification_time: int
    partition_values: dict[str, str]


def files_by_partition(table: DeltaTable | None) -> dict[PartitionRow, list[LoggedFile]]:
    """The snapshot's files grouped by partition, from one pass over its add actions
    (delta-rs prunes file URIs, not actions); () holds every file of an unpartitioned table."""
    if table is None:
        return {}
    columns = table.metadata().partition_columns
    files: dict[PartitionRow, list[LoggedFile]] = defaultdict(list)
    for row in pa.table(table.get_add_actions(flatten=True)).to_pylist():
        partition = {column: _logged_value(row[f"partition.{column}"]) for column in columns}
        files[tuple(partition[column] for column in columns)].append(
            LoggedFile(
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


def partition_files(table: DeltaTable | None, scope: PartitionScope | None) -> dict[PartitionRow, frozenset[str]]:
    """The published files of each partition of `scope` (empty for a partition with
    none; every partition when None): the fingerprint a backfill's lease remembers."""
    found = {} if scope is None else {row: frozenset[str]() for row in scope.rows}
    for row, files in files_by_partition(table).items():
        if scope is None or row in scope.rows:
            found[row] = frozenset(file.path for file in files)
    return found


def paths(files: list[LoggedFile] | None) -> frozenset[str]:
    return frozenset(file.path for file in files or ())


def changed_partitions(
    before: Mapping[PartitionRow, list[LoggedFile]], after: Mapping[PartitionRow, list[LoggedFile]]
) -> set[PartitionRow]:
    """The partitions whose files differ between two snapshots."""
    return {row for row in before.keys() | after.keys() if paths(before.get(row)) != paths(after.get(row))}


def commit_effect(table_uri: str, version: int) -> PublishResult:
    """What the commit at `version` changed: the files it added and removed."""
    before = files_by_partition(open_table(table_uri, version=version - 1) if version > 0 else None)
    after = files_by_partition(open_table(table_uri, version=version))
    rows: Counter[PartitionRow] = Counter()
    added = removed = 0
    for row in changed_partitions(before, after):
        old, new = paths(before.get(row)), paths(after.get(row))
        removed += len(old - new)
        for file in after.get(row, ()):
            if file.path not in old:
                added += 1
                rows[row] += file.num_records
    return PublishResult(table_uri, version, added, removed, sum(rows.values()), dict(rows))


def publish_app_id(backfill_id: str) -> str:
    """The application transaction id of a backfill's publish commits."""
    return f"partition_assets/{backfill_id}"


def rollback_app_id(backfill_id: str) -> str:
    """The application transaction id of a backfill's rollback commits."""
    return f"partition_assets/{backfill_id}/rollback"


def backfill_commit_metadata(metadata: Mapping[str, str], backfill_id: str, action: str) -> dict[str, str]:
    """`metadata` plus the keys that mark a commit as the backfill's `action` (PUBLISH, ROLLBACK)."""
    return {**metadata, _BACKFILL_KEY: backfill_id, _ACTION_KEY: action}


def is_backfill_commit(entry: Mapping[str, Any], backfill_id: str, action: str) -> bool:
    """Whether the history `entry` is the backfill's `action` commit."""
    return entry.get(_BACKFILL_KEY) == backfill_id and entry.get(_ACTION_KEY) == action


def backfill_commit_version(table: DeltaTable, backfill_id: str, action: str) -> int:
    """The version of the backfill's `action` commit, found by its commit metadata.

    Raises:
        CommitError: The log no longer holds that commit's info (old entries were cleaned up).
    """
    for entry in table.history():
        if is_backfill_commit(entry, backfill_id, action):
            return int(entry["version"])
    raise CommitError(
        f"table {table.table_uri} holds backfill {backfill_id}'s {action} transaction but its "
        "log no longer has that commit's info (old log entries were cleaned up); nothing was "
        "committed. Read the version from the backfill's ledger instead."
    )


def published_version(table_uri: str, backfill_id: str) -> int | None:
    """The version of backfill `backfill_id`'s publish commit; None when the table
    does not hold it (the log, not the backfill's folder, is the record).

    Raises:
        CommitError: The table holds the publish but its log no longer names its version.
    """
    return published_in(open_table(table_uri), backfill_id)


def published_in(table: DeltaTable | None, backfill_id: str) -> int | None:
    """`published_version` as the snapshot `table` (None: no table) has it.

    Raises:
        CommitError: The table holds the publish but its log no longer names its version.
    """
    if table is None or table.transaction_version(publish_app_id(backfill_id)) is None:
        return None
    return backfill_commit_version(table, backfill_id, PUBLISH)
