"""Vacuum: removes what killed or superseded writes left behind, after a retention window."""

import time
from dataclasses import dataclass

import pyarrow.fs as pafs
from deltalake import DeltaTable

from partition_assets.storage.staging import STAGING_DIR, table_filesystem


@dataclass(frozen=True)
class VacuumResult:
    data_files: list[str]  # unreferenced by the log: replaced, or from writes that never committed
    staging_folders: list[str]  # staging folders of writes that died before publishing


def vacuum(table_uri: str, retention_hours: float = 168, dry_run: bool = False) -> VacuumResult:
    """Deletes files no reader can see that are older than `retention_hours`.

    The window protects writes in flight (their files are not committed yet) and
    readers of older versions (time travel): keep it longer than both.
    """
    table = DeltaTable(table_uri)
    data_files = table.vacuum(
        retention_hours=int(retention_hours),
        dry_run=dry_run,
        enforce_retention_duration=False,
        full=True,
    )
    fs, root = table_filesystem(table_uri)
    staging_root = f"{root}/{STAGING_DIR}"
    cutoff_ns = (time.time() - retention_hours * 3600) * 1e9
    stale = []
    if fs.get_file_info(staging_root).type == pafs.FileType.Directory:
        for info in fs.get_file_info(pafs.FileSelector(staging_root)):
            if info.mtime_ns is not None and info.mtime_ns < cutoff_ns:
                stale.append(info.path)
                if not dry_run:
                    fs.delete_dir(info.path)
    return VacuumResult(list(data_files), stale)
