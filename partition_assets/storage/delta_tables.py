"""A Delta table opened through delta-rs, and its latest version: what the release log's
readers need (storage/release_log.py, `partition-assets release list`), importable without
Spark or Dagster. The storage/delta package, which imports both, re-exports them from its log.py.

Not guaranteed: a table is opened afresh on each call; two calls may see two versions.
"""

from __future__ import annotations

from datetime import datetime

from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError


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
