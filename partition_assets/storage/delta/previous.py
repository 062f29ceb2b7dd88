"""A table's previous version kept readable as a table of its own, `<table>__previous`, for
readers that need time after a backfill changed the table (a deprecation window): a Delta
table whose log references the old version's files by absolute path, made in one commit
without copying data. Its commit metadata names the table, the backfill and the expiry;
vacuuming the table spares the files it shares until then, and drops it after.

Not guaranteed: readers must resolve absolute paths in a Delta log: delta-rs through
DataFusion (`QueryBuilder`) and Spark's Delta reader do; DuckDB 1.4's delta extension and
delta-rs's pyarrow dataset (`to_pyarrow_table`) prefix the table's path and fail. One copy
per table: a later backfill's copy replaces an earlier one (a new version of the copy).
Writing to the copy is not supported (it shares its files with the table's history).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime

import pyarrow.fs as pafs
from deltalake.transaction import CommitProperties, create_table_with_add_actions

from partition_assets.errors import CommitError
from partition_assets.storage.delta.commit import add_action
from partition_assets.storage.delta.log import files_by_partition, open_table
from partition_assets.storage.write_staging import delete_dir, table_filesystem

PREVIOUS_SUFFIX = "__previous"
_PREVIOUS_OF_KEY = "partition_assets.previous_of"
_VERSION_KEY = "partition_assets.previous_version"
_BACKFILL_KEY = "partition_assets.previous_backfill_id"
_EXPIRES_KEY = "partition_assets.previous_expires_at"


@dataclass(frozen=True)
class PreviousCopy:
    """A table's kept previous version: where it is, what it holds, until when."""

    uri: str
    table_uri: str
    version: int  # the table's version the copy holds
    backfill_id: str
    expires_at: datetime
    shared_paths: frozenset[str]  # the table's files it references, relative to the table

    def expired(self, now: datetime) -> bool:
        return now >= self.expires_at


def previous_uri(table_uri: str) -> str:
    """Where the table's previous version is kept: beside it, `<table>__previous`."""
    return table_uri.rstrip("/") + PREVIOUS_SUFFIX


def keep_previous(table_uri: str, version: int, backfill_id: str, expires_at: datetime) -> PreviousCopy:
    """Makes `<table>__previous` hold version `version` of the table, in one commit whose adds
    reference that version's files by absolute path (nothing is copied), with its schema and
    partitioning. Idempotent: a copy this backfill already made is returned as it is.

    Raises:
        CommitError: The table has no version `version`; nothing was committed.
    """
    existing = previous_copy(table_uri)
    if existing is not None and existing.backfill_id == backfill_id:
        return existing
    old = open_table(table_uri, version=version)
    if old is None:
        raise CommitError(f"table {table_uri} has no version {version} to keep; nothing was committed.")
    root = old.table_uri.rstrip("/")
    adds = [
        add_action(dataclasses.replace(file, path=f"{root}/{file.path}"), file.modification_time)
        for files in files_by_partition(old).values()
        for file in files
    ]
    create_table_with_add_actions(
        previous_uri(table_uri),
        old.schema(),
        adds,
        mode="overwrite",  # replaces an earlier backfill's copy
        partition_by=list(old.metadata().partition_columns) or None,
        commit_properties=CommitProperties(
            custom_metadata={
                _PREVIOUS_OF_KEY: table_uri,
                _VERSION_KEY: str(version),
                _BACKFILL_KEY: backfill_id,
                _EXPIRES_KEY: expires_at.isoformat(),
            }
        ),
    )
    copy = previous_copy(table_uri)
    assert copy is not None  # just committed
    return copy


def previous_copy(table_uri: str) -> PreviousCopy | None:
    """The table's kept previous version; None when there is none."""
    copy = open_table(previous_uri(table_uri))
    if copy is None:
        return None
    info = copy.history(1)[0]
    if _EXPIRES_KEY not in info:
        return None  # a table of that name this module did not make: not ours to manage
    root = open_table(table_uri)
    prefix = (root.table_uri if root is not None else table_uri).rstrip("/") + "/"
    shared = frozenset(
        file.path[len(prefix) :]
        for files in files_by_partition(copy).values()
        for file in files
        if file.path.startswith(prefix)
    )
    return PreviousCopy(
        previous_uri(table_uri),
        table_uri,
        int(info[_VERSION_KEY]),
        str(info[_BACKFILL_KEY]),
        datetime.fromisoformat(str(info[_EXPIRES_KEY])),
        shared,
    )


def drop_previous(copy: PreviousCopy) -> None:
    """Deletes the copy (its log; the files are the table's, which its vacuum then ages)."""
    fs, root = table_filesystem(copy.uri)
    if fs.get_file_info(root).type == pafs.FileType.Directory:
        delete_dir(fs, root)
