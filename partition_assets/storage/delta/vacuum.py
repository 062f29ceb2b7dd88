"""Vacuuming a Delta table: deleting the data files its log no longer references
(replaced, or never committed) and the staging folders of dead writes and of
published backfills, older than a retention window. The versions readers of a
release log above the table may still read keep their files, whatever their age.

Not guaranteed: what a vacuum deletes is gone for readers of older versions (time travel
past the retention fails) and for rollbacks of backfills published before it (they
need the files their publish replaced: RollbackError). Data files are aged in whole
hours (see storage/maintenance.py).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from partition_assets.errors import TableNotFoundError
from partition_assets.storage.backfill_staging import (
    backfill_folder,
    backfill_ids,
    listed_layout_paths,
    stale_backfill_folders,
)
from partition_assets.storage.delta.log import files_by_partition, open_table, publish_app_id
from partition_assets.storage.delta.previous import drop_previous, previous_copy
from partition_assets.storage.release_log import release_log_uri, table_name, versions_in_use
from partition_assets.storage.table_format import VacuumResult, checked_retention_hours
from partition_assets.storage.write_staging import delete_dir, sweep_staging, table_filesystem


def vacuum_table(table_uri: str, retention_hours: float, dry_run: bool, now: datetime | None = None) -> VacuumResult:
    """Deletes data files the log no longer references (replaced, or never
    committed) and staging folders, older than `retention_hours`.

    The window protects writes in flight (their files are not committed yet)
    and readers of older versions (time travel): keep it longer than both.
    Files a backfill's manifest lists are kept whatever their age: a publish
    may have moved them into the layout and not committed yet. The folders of
    published backfills go, and those of backfills killed before any manifest.
    delta-rs ages data files in whole hours: a retention is rounded up for them.
    The table's kept previous version (`<table>__previous`, previous.py) keeps the
    files it shares until it expires (`now`, the clock unless given, is past its
    expiry); then the vacuum drops it, and those files age like any other.
    A version that a reader of the release log of a lake holding the table may read
    (release_log.versions_in_use: its version before a publish still open, or released
    within the retention, which a run pinned before the release still reads) keeps its files.

    Raises:
        VacuumRetentionError: `checked_retention_hours` refuses `retention_hours`; nothing was deleted.
        TableNotFoundError: `table_uri` holds no Delta table; nothing was deleted.
    """
    retention_hours = checked_retention_hours(retention_hours)
    table = open_table(table_uri)
    if table is None:
        raise TableNotFoundError(f"no Delta table at {table_uri}: check the path (it must hold _delta_log/)")
    unreferenced = table.vacuum(
        # Up, never down: a file younger than the retention asked for is never deleted.
        retention_hours=math.ceil(retention_hours),
        dry_run=True,
        enforce_retention_duration=False,
        full=True,  # also files never committed, which a killed write leaves
    )
    # Manifests first, then the log: a publish deletes its manifest only after its
    # commit, so each of its files is either listed or referenced by then.
    kept = listed_layout_paths(table_uri)
    table.update_incremental()
    kept.update(file.path for files in files_by_partition(table).values() for file in files)
    now = now or datetime.now(UTC)
    kept.update(_files_readers_hold(table_uri, now - timedelta(hours=retention_hours)))
    previous = previous_copy(table_uri)
    expired = []  # the kept previous version, once past its expiry
    if previous is not None:
        if previous.expired(now):
            expired.append(previous)
        else:
            kept.update(previous.shared_paths)
    fs, root = table_filesystem(table_uri)
    # The dry run also lists tombstoned files an earlier vacuum already deleted.
    data_files = [
        path
        for path in unreferenced
        if path not in kept and fs.get_file_info(f"{root}/{path}").type == pafs.FileType.File
    ]
    published = [b for b in backfill_ids(table_uri) if table.transaction_version(publish_app_id(b)) is not None]
    folders = [backfill_folder(table_uri, b)[1] for b in published]
    folders += [f for f in stale_backfill_folders(table_uri, retention_hours) if f not in folders]
    if not dry_run:
        for copy in expired:
            drop_previous(copy)  # before its files go: no reader of it finds them missing
        for path in data_files:
            fs.delete_file(f"{root}/{path}")
        for folder in folders:
            delete_dir(fs, folder)
    staging = sweep_staging(table_uri, retention_hours, dry_run) + folders
    return VacuumResult(data_files, staging, [copy.uri for copy in expired])


def _files_readers_hold(table_uri: str, released_before: datetime) -> set[str]:
    """The files of each version of the table that a reader of a release log above it may read
    (release_log.versions_in_use, releases recorded after `released_before` counting as open)."""
    paths: set[str] = set()
    for lake in _lakes_above(table_uri):
        for version in versions_in_use(lake, table_name(lake, table_uri), released_before):
            try:
                held = open_table(table_uri, version=version)
            except DeltaError:
                continue  # its log entries are gone (log cleanup): no reader can open it
            paths.update(file.path for files in files_by_partition(held).values() for file in files)
    return paths


def _lakes_above(table_uri: str) -> list[str]:
    """The folders above `table_uri` that hold a release log: the lakes it is a table of."""
    parts = table_uri.rstrip("/").split("/")
    folders = ["/".join(parts[:end]) for end in range(len(parts) - 1, 0, -1)]
    return [
        folder
        for folder in folders
        if folder and not folder.endswith((":", ":/")) and DeltaTable.is_deltatable(release_log_uri(folder))
    ]
