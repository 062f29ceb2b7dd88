"""A Delta table opened through delta-rs, its latest version, a version read whole, and a
small append-only table of records (the release log) read and listed: what the release log
and its readers need (storage/release_log.py, `partition-assets release list`), importable
without Spark or Dagster. The package's log.py re-exports `open_table` for its modules.

Not guaranteed: a table is opened afresh on each call; two calls may see two versions.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError

from partition_assets.errors import ReleaseExpiredError


def open_table(table_uri: str, version: int | None = None, timestamp: str | None = None) -> DeltaTable | None:
    """The table at its latest version, or as of `version` or ISO-8601 `timestamp`."""
    try:
        table = DeltaTable(table_uri, version=version)
    except DeltaTableNotFoundError:
        return None
    if timestamp is not None:
        table.load_as_version(datetime.fromisoformat(timestamp))
    return table


def table_version(table_uri: str) -> int | None:
    """The table's latest version; None when there is no table."""
    table = open_table(table_uri)
    return None if table is None else table.version()


def holds_table(table_uri: str) -> bool:
    """Whether `table_uri` holds a Delta table (a `_delta_log/`)."""
    return DeltaTable.is_deltatable(table_uri)


def read_version(table_uri: str, version: int) -> pa.Table:
    """Every row of the table as of `version`.

    Raises:
        ReleaseExpiredError: The version can no longer be read (vacuum or log cleanup removed it,
            or there is no table); nothing was read.
    """
    try:
        # One thread: a threaded delta-rs scan aborts the process at exit (see backfill/state/ledger.py).
        return DeltaTable(table_uri, version=version).to_pyarrow_dataset().to_table(use_threads=False)
    except (DeltaError, OSError) as error:
        raise ReleaseExpiredError(
            f"Delta table {table_uri} has no readable version {version}: {str(error).splitlines()[0]}"
        ) from None


class RecordTable:
    """A small append-only Delta table of records of our own (the release log, the ledger), as
    opened at one version: its rows read (whole, or of the partitions asked for), its commits
    listed, its table properties, opened again only when it changed."""

    def __init__(self, table: DeltaTable) -> None:
        self._table = table

    @classmethod
    def open(cls, uri: str, version: int | None = None) -> RecordTable | None:
        """The table at its latest version, or at `version`; None when there is none."""
        table = open_table(uri, version=version)
        return None if table is None else cls(table)

    @property
    def version(self) -> int:
        return self._table.version()

    @property
    def properties(self) -> dict[str, str]:
        """Its table properties (Delta's configuration)."""
        return self._table.metadata().configuration

    def rows(self, partition: tuple[str, str] | None = None) -> list[dict[str, Any]]:
        """Every record, as a row of plain values; with `partition` (column, value), those of
        that partition alone (delta-rs opens only its files)."""
        # One thread: a threaded scan through delta-rs's filesystem aborts the process at exit
        # ("terminate called without an active exception"), measured with deltalake 1.6.
        partitions = None if partition is None else [(partition[0], "=", partition[1])]
        return self._table.to_pyarrow_dataset(partitions=partitions).to_table(use_threads=False).to_pylist()

    def commits(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The newest `limit` commits (None: all), newest first: each its `version`, its
        `timestamp` (milliseconds) and the custom metadata it was committed with."""
        return self._table.history(limit=limit)

    def refresh(self) -> bool:
        """Loads the commits made since it was opened; whether there were any."""
        before = self._table.version()
        self._table.update_incremental()
        return self._table.version() != before
