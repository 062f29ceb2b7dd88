"""A backfill's operations over several tables (publish, rollback) in the lake's release log
(storage/release_log.py): `begin` before the first table commit, `release` after the last, so
that readers through the library read either every table as before or every table as after.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from partition_assets.backfill.publishing.tables import BackfillTable, lake_root
from partition_assets.storage.release_log import append_release, begin_release

if TYPE_CHECKING:
    from partition_assets.backfill.publishing.publication import Publication

PUBLISH = "publish"
ROLLBACK = "rollback"


def begin(publication: Publication, operation: str, tables: Iterable[BackfillTable]) -> None:
    """Records that `operation` of the backfill is about to commit to `tables` (nothing when
    none, or when the code location has no lake)."""
    root, uris = lake_root(publication.definitions), [table.uri for table in tables]
    if root is not None and uris:
        begin_release(root, operation, publication.record.id, uris)


def release(publication: Publication, operation: str, versions: Mapping[str, int | None]) -> None:
    """Records the release of `operation`: `versions` maps each asset (user string) of the
    backfill it changed to its table's version after (None: unchanged); nothing without a lake."""
    root = lake_root(publication.definitions)
    if root is None:
        return
    uris = {table.asset.to_user_string(): table.uri for table in publication.tables.values()}
    append_release(root, operation, publication.record.id, {uris[a]: v for a, v in versions.items() if a in uris})
