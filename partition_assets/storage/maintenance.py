"""Vacuum: removes what killed or superseded writes left behind, after a retention window
of at least an hour (`checked_retention_hours`: a shorter one is refused, nothing deleted),
through the format the registry finds holding the table (storage/table_formats.py).

Not guaranteed: a folder holding only `_staging/` (a first write that died before
publishing) is not a table yet, so vacuum refuses it; delete such a folder by hand.
Delta data files are aged in whole hours (delta-rs): a retention of 1.5 h keeps them
up to 2 h. Files are aged by their modification time, which a write's move into the
table keeps: a write whose Spark job ran longer than the retention can lose files.
"""

from partition_assets.storage.table_format import VacuumResult
from partition_assets.storage.table_formats import table_format_at


def vacuum(table_uri: str, retention_hours: float = 168, dry_run: bool = False) -> VacuumResult:
    """Deletes files no reader can see that are older than `retention_hours`, through
    the format of the table at `table_uri` (see each format's `vacuum`).

    Raises:
        TableNotFoundError: `table_uri` is missing or holds no table of a known format; nothing was deleted.
        VacuumRetentionError: `retention_hours` is under an hour, or not a finite number; nothing was deleted.
    """
    return table_format_at(table_uri).vacuum(table_uri, retention_hours, dry_run)
