"""Reading several tables of a lake as one release (storage/release_log.py), outside Dagster
or in it: `pinned_versions` says at which version to read each table, `read_tables` reads them.

A reader through these (or the IO managers, which use them for inputs) never sees a staged
backfill half-published across tables: it looks up the tables' latest versions, then reads the
release log once, and reads every operation whole or not at all (LogView.read_versions): one
not released yet, or released but overlapping one that is not, holds its tables at their
versions before it; a publish landing between the lookups and the log read too.

Tables are reached through their format (storage/table_formats.py): any format that keeps
versions (`FormatCapabilities.versions`) is read at its pinned version.

Not guaranteed: a reader of the tables' raw latest versions (delta-rs, DuckDB, Spark without
a version) sees each table's newest commit, so between the first and the last table commit of
a publish, and after a publish stopped part-way until it is finished or rolled back, it can
join one table published with another not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from partition_assets.errors import ReleaseExpiredError, TableNotFoundError
from partition_assets.storage.release_log import NO_TABLE, LogView, Release, log_version_of, read_log
from partition_assets.storage.table_formats import current_version, format_at, read_at_version

if TYPE_CHECKING:
    from partition_assets.storage.table_format import TableFormat


@dataclass(frozen=True)
class ReleasePin:
    """The versions to read a lake's tables at: `versions` maps each table (its folder
    under the lake root) to a version (None: the table does not exist for the reader);
    `release` is the newest release complete for the reader (None: none yet), `log_version`
    the release log's version the pin was taken at (-1: the log had no record)."""

    lake_root: str
    versions: Mapping[str, int | None]
    release: Release | None
    log_version: int

    def to_json(self) -> dict[str, Any]:
        return {
            "lake_root": self.lake_root,
            "release": None if self.release is None else self.release.to_json(),
            "log_version": self.log_version,
            "versions": dict(self.versions),
        }


def pinned_versions(
    lake_root: str, tables: Sequence[str] | None = None, release: str | None = None, log_version: int | None = None
) -> ReleasePin:
    """The version at which to read each of `tables` (folders under `lake_root`; None: every
    table the release log names, and every versioned table in a local lake's top folders).

    By default the safe version now: a table under an operation not released yet at its
    version before, and so a table of a released operation that overlaps one not released
    (every operation whole or not at all), every other table at its latest (a plain write is
    readable at once).
    With `release` (an id from `partition-assets release list`): the versions of the tables
    as that release and those before it left them (a table no release changed: as the
    default). With `log_version`: as the default, for a reader that pinned the release log
    at that version (a run, pinned at its start: storage/io_manager.py).

    Raises:
        UnknownReleaseError: `release` is not in the release log; nothing was read or written.
        TableNotFoundError: A table of `tables` is not in the lake; nothing was read or written.
    """
    root = lake_root.rstrip("/")
    if release is not None:
        log_version = log_version_of(root, release)
    names = list(tables) if tables is not None else sorted(read_log(root).tables() | _local_tables(root))
    # Before the log: a publish landing between the two is then in the log, its commits past
    # these versions (LogView.read_versions hides it); after, it could be read half.
    latest = {name: _latest_version(root, name) for name in names}
    view = read_log(root, log_version)
    bounds = {**latest, **_released_versions(view)} if release is not None else latest
    seen = view.read_versions(bounds)
    missing = [
        name for name in names if seen.versions[name] == latest[name] == NO_TABLE and name not in seen.unseen_tables
    ]
    if missing:
        raise TableNotFoundError(
            f"no table {', '.join(missing)} in the lake {root}: name a table by its folder under the lake "
            "root (`partition-assets release show` lists them). Nothing was read or written."
        )
    versions = {name: None if seen.versions[name] == NO_TABLE else seen.versions[name] for name in names}
    return ReleasePin(root, versions, seen.release, -1 if view.log_version is None else view.log_version)


def releases(lake_root: str) -> list[Release]:
    """Every complete release of the lake, oldest first (one read of its release log)."""
    return read_log(lake_root.rstrip("/")).releases()


def read_tables(
    lake_root: str, tables: Sequence[str], release: str | None = None, log_version: int | None = None
) -> dict[str, pa.Table]:
    """The rows of each of `tables`, read through its format at its `pinned_versions` (same arguments).

    Raises:
        UnknownReleaseError: `release` is not in the release log.
        TableNotFoundError: A table is not in the lake, or does not exist yet for this reader.
        ReleaseExpiredError: A pinned version was removed (vacuum, log cleanup); nothing was written.
    """
    pin = pinned_versions(lake_root, tables, release, log_version)
    frames = {}
    for name, version in pin.versions.items():
        uri = f"{pin.lake_root}/{name}"
        if version is None:
            raise TableNotFoundError(
                f"table {name} of {pin.lake_root} has no release yet: its first publish is not complete. "
                "Nothing was read or written."
            )
        try:
            frames[name] = read_at_version(uri, version)
        except ReleaseExpiredError as error:
            raise ReleaseExpiredError(
                f"version {version} of table {name} ({uri}) can no longer be read ({str(error).splitlines()[0]}): "
                "vacuum or log cleanup removed it, so that release is older than the tables' retention. Read a newer "
                "release (`partition-assets release list`). Nothing was read or written."
            ) from None
    return frames


def table_version(table_uri: str) -> int | None:
    """The latest version of the table at `table_uri` (None: none): the lookup a pin makes first."""
    return current_version(table_uri)


def _latest_version(root: str, name: str) -> int:
    version = table_version(f"{root}/{name}")
    return NO_TABLE if version is None else version


def _released_versions(view: LogView) -> dict[str, int]:
    """Each table at the version the newest release of `view` naming it left it."""
    versions: dict[str, int] = {}
    for release in view.releases():
        versions.update(release.versions)
    return versions


def _local_tables(root: str) -> set[str]:
    """The tables of a format that keeps versions in the top folders of a local lake (one or
    two levels down, not under `_` or `.` folders, as its format finds them); none for a
    remote lake."""
    path = Path(root.removeprefix("file://"))
    if "://" in root and not root.startswith("file://") or not path.is_dir():
        return set()
    found: set[str] = set()
    for folder in _visible_folders(path):
        table_format = format_at(str(folder))
        if table_format is None:
            found.update(
                deeper.relative_to(path).as_posix()
                for deeper in _visible_folders(folder)
                if _keeps_versions(format_at(str(deeper)))
            )
        elif _keeps_versions(table_format):
            found.add(folder.relative_to(path).as_posix())
    return found


def _visible_folders(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def _keeps_versions(table_format: TableFormat | None) -> bool:
    return table_format is not None and table_format.capabilities.versions
