"""A backfill's operations over several tables (publish, rollback) in the lake's release log
(storage/release_log.py): `begin` before the first table commit, `release` after the last, so
that readers through the library read either every table as before or every table as after.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum

from partition_assets.backfill.publishing.tables import BackfillTable, Tables
from partition_assets.storage.release_log import append_release, begin_release


class ReleaseOperation(StrEnum):
    """An operation of a backfill over several tables, as the release log records it: its
    values are the words stored there, so a log written before reads the same."""

    PUBLISH = "publish"
    ROLLBACK = "rollback"


def begin(lake: str | None, operation: ReleaseOperation, backfill_id: str, tables: Iterable[BackfillTable]) -> None:
    """Records in the release log of `lake` (the lake's root) that `operation` of the backfill
    is about to commit to `tables` (nothing when none, or when there is no lake)."""
    uris = [table.uri for table in tables]
    if lake is not None and uris:
        begin_release(lake, operation, backfill_id, uris)


def release(
    lake: str | None,
    operation: ReleaseOperation,
    backfill_id: str,
    tables: Tables,
    versions: Mapping[str, int | None],
) -> None:
    """Records the release of `operation`: `versions` maps each asset (user string) of
    `tables` it changed to its table's version after (None: unchanged); nothing without a lake."""
    if lake is None:
        return
    uris = {table.asset.to_user_string(): table.uri for table in tables.values()}
    append_release(lake, operation, backfill_id, {uris[a]: v for a, v in versions.items() if a in uris})
