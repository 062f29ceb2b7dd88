"""Vacuum: removes what killed or superseded writes left behind, after a retention window
of at least an hour (`checked_retention_hours`: a shorter one is refused, nothing deleted).

Not guaranteed: a folder holding only `_staging/` (a first write that died before
publishing) is not a table yet, so vacuum refuses it; delete such a folder by hand.
Delta data files are aged in whole hours (delta-rs): a retention of 1.5 h keeps them
up to 2 h. Files are aged by their modification time, which a write's move into the
table keeps: a write whose Spark job ran longer than the retention can lose files.
"""

import pyarrow.fs as pafs
from deltalake import DeltaTable

from partition_assets.errors import TableNotFoundError
from partition_assets.storage.delta import DeltaFormat
from partition_assets.storage.parquet_table import ParquetFormat, read_schema
from partition_assets.storage.table_format import TableFormat, VacuumResult
from partition_assets.storage.write_staging import table_filesystem


def vacuum(table_uri: str, retention_hours: float = 168, dry_run: bool = False) -> VacuumResult:
    """Deletes files no reader can see that are older than `retention_hours`, through
    the format of the table at `table_uri` (see each format's `vacuum`).

    Raises:
        TableNotFoundError: `table_uri` is missing or holds no table; nothing was deleted.
        VacuumRetentionError: `retention_hours` is under an hour, or not a finite number; nothing was deleted.
    """
    return table_format_at(table_uri).vacuum(table_uri, retention_hours, dry_run)


def table_format_at(table_uri: str) -> TableFormat:
    """The format of the table stored at `table_uri`.

    Raises:
        TableNotFoundError: `table_uri` does not exist, or holds neither a Delta nor a Parquet table.
    """
    if DeltaTable.is_deltatable(table_uri):
        return DeltaFormat()
    fs, root = table_filesystem(table_uri)
    if fs.get_file_info(root).type == pafs.FileType.NotFound:
        raise TableNotFoundError(f"{table_uri} does not exist: pass the folder of a table (e.g. .lake/<asset>)")
    if read_schema(table_uri) is not None:
        return ParquetFormat()
    raise TableNotFoundError(
        f"{table_uri} is not a table: it holds neither a Delta log (_delta_log/) nor a "
        "Parquet table's _schema.arrow; pass the folder of a table (e.g. .lake/<asset>)"
    )
