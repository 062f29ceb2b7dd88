"""The release log: which version of each table belongs to which release, in one small
append-only Delta table beside the tables (`<lake root>/_partition_assets/releases`).

An operation that commits to several tables one after the other (a staged backfill's
publish, its rollback, a retract) appends two records: a `begin` record before its first
table commit, naming every table it may commit with the table's version before it, and a
`release` record after its last, naming every table it changed with the version after.
Each record is one append (one Delta commit) of one row per table: any Delta reader
(delta-rs, pandas, DuckDB) reads plain columns. A plain write (a production run's commit)
is one commit of one table and needs no record: it is readable at once.

A reader's safe version of a table (`LogView.safe_version`) is the table's version before
the earliest operation on it that is not complete for the reader, else its latest version.
An operation is complete for a reader when a `release` record of its backfill, recorded
after its `begin`, is in the log as the reader pins it: the latest log, or the log as it
was at a run's start (`pin_at`), so that a run's steps agree on what is complete.

Not guaranteed: a table outside every operation is read at its latest version when read, so
two steps of one run may read different plain writes of it (each a whole commit of one
table). A table under an open operation is read at its version before it: plain writes to
its other partitions after that stay unseen until the operation is released or rolled back.
A run's pin is the log as of the run's start by the log's commit timestamps: a record
committed within milliseconds of the start by a writer whose clock is ahead may count for
one step and not for another.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from partition_assets.errors import UnknownReleaseError
from partition_assets.storage.delta_tables import open_table, table_version

RELEASE_LOG_PATH = "_partition_assets/releases"
BEGIN, RELEASE = "begin", "release"
# The version a `begin` record gives a table the operation creates: there was none before.
NO_TABLE = -1
# Commit metadata of each append: its release id, so that a release's log version is found.
_RELEASE_ID_KEY = "partition_assets.release_id"
# How many of the log's newest commits a run's pin looks at first.
_RECENT_COMMITS = 32
# The log's files beyond which a release compacts them.
_MAX_FILES = 16

SCHEMA = pa.schema(
    [
        pa.field("release_id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # "begin" or "release"
        pa.field("operation", pa.string(), nullable=False),  # "publish", "rollback", "retract"
        pa.field("backfill_id", pa.string(), nullable=False),
        pa.field("table", pa.string()),  # the table's folder under the lake root; null when none changed
        pa.field("version", pa.int64()),  # before the operation (begin, -1: no table), after it (release)
        pa.field("recorded_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


def release_log_uri(lake_root: str) -> str:
    """Where the release log of the lake at `lake_root` lives."""
    return f"{lake_root.rstrip('/')}/{RELEASE_LOG_PATH}"


def table_name(lake_root: str, table_uri: str) -> str:
    """The name of `table_uri` in the release log: its folder under `lake_root`."""
    root = lake_root.rstrip("/") + "/"
    return table_uri[len(root) :] if table_uri.startswith(root) else table_uri


@dataclass(frozen=True)
class Release:
    """One `release` record: the tables an operation of a backfill changed, at their versions after it."""

    release_id: str
    operation: str
    backfill_id: str
    recorded_at: datetime
    versions: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "release_id": self.release_id,
            "operation": self.operation,
            "backfill_id": self.backfill_id,
            "recorded_at": self.recorded_at.isoformat(),
            "versions": dict(self.versions),
        }


def begin_release(lake_root: str, operation: str, backfill_id: str, table_uris: Iterable[str]) -> str:
    """Appends the `begin` record of `operation` of `backfill_id`, before its first commit to
    any of `table_uris`: their versions now, which readers keep reading until the operation's
    release. Returns the record's id.

    Raises:
        CommitError: The append kept losing to concurrent writers; nothing was recorded.
    """
    versions = {}
    for uri in table_uris:
        version = table_version(uri)
        versions[uri] = NO_TABLE if version is None else version
    return _append(lake_root, BEGIN, operation, backfill_id, versions)


def append_release(lake_root: str, operation: str, backfill_id: str, versions: Mapping[str, int | None]) -> str:
    """Appends the `release` record of `operation` of `backfill_id`, after its last table
    commit: `versions` maps each table uri it changed to its version after (None: not changed).
    From then on readers read those tables at their latest versions. Returns the release id.

    The one way to record a release: a new operation over several tables calls
    `begin_release` before its first commit and this after its last.

    Raises:
        CommitError: The append kept losing to concurrent writers; nothing was recorded (the
            operation stays open for readers: run it again to release it).
    """
    changed = {uri: version for uri, version in versions.items() if version is not None}
    return _append(lake_root, RELEASE, operation, backfill_id, changed)


def _append(lake_root: str, kind: str, operation: str, backfill_id: str, versions: Mapping[str, int]) -> str:
    record_id = f"{kind[0]}-{uuid.uuid4().hex[:12]}"
    now = datetime.now(UTC)  # bookkeeping time of the record, not asset logic
    tables: list[tuple[str | None, int | None]] = [(table_name(lake_root, u), v) for u, v in versions.items()]
    rows = [
        {
            "release_id": record_id,
            "kind": kind,
            "operation": operation,
            "backfill_id": backfill_id,
            "table": table,
            "version": version,
            "recorded_at": now,
        }
        for table, version in tables or [(None, None)]
    ]
    data = pa.Table.from_pylist(rows, schema=SCHEMA)
    uri = release_log_uri(lake_root)
    from partition_assets.storage.delta.append import append_rows  # a writer's: readers load no Spark (delta_tables.py)

    append_rows(uri, data, "the release log", commit_metadata={_RELEASE_ID_KEY: record_id})
    if kind == RELEASE:
        _compact_when_fragmented(uri)
    return record_id


def _compact_when_fragmented(uri: str) -> None:
    """Rewrites the log's files into few once it holds more than _MAX_FILES (one per append):
    a reader's one read of the log then opens a few files, not one per record (measured:
    100 files 0.58 s, compacted 8 ms). It keeps every row; the small files stay for readers
    pinned at earlier versions until vacuum removes them."""
    table = DeltaTable(uri)
    if len(table.file_uris()) > _MAX_FILES:
        table.optimize.compact()


@dataclass(frozen=True)
class LogView:
    """The release log as a reader sees it: `rows`, every record now (for the operations
    begun since the pin), and `pinned`, the records of the log at version `log_version`
    (None: the latest; -1: before its first record)."""

    rows: list[dict[str, Any]]
    pinned: list[dict[str, Any]]
    log_version: int | None

    def releases(self) -> list[Release]:
        """The releases complete for the reader, oldest first."""
        grouped: dict[str, Release] = {}
        for row in sorted(self.pinned, key=lambda r: r["recorded_at"]):
            if row["kind"] != RELEASE:
                continue
            release = grouped.setdefault(
                row["release_id"],
                Release(row["release_id"], row["operation"], row["backfill_id"], row["recorded_at"], {}),
            )
            if row["table"] is not None:
                release.versions[row["table"]] = row["version"]  # type: ignore[index]
        return list(grouped.values())

    def held_versions(self) -> dict[str, int]:
        """Each table under an operation not complete for the reader, at its version before
        the earliest such operation (NO_TABLE when that operation created it)."""
        released: dict[str, list[datetime]] = {}
        for row in self.pinned:
            if row["kind"] == RELEASE:
                released.setdefault(row["backfill_id"], []).append(row["recorded_at"])
        held: dict[str, int] = {}
        for row in self.rows:
            if row["kind"] != BEGIN or row["table"] is None:
                continue
            closed = any(at >= row["recorded_at"] for at in released.get(row["backfill_id"], []))
            if not closed:
                held[row["table"]] = min(held.get(row["table"], row["version"]), row["version"])
        return held

    def tables(self) -> set[str]:
        """Every table the log names."""
        return {row["table"] for row in self.rows if row["table"] is not None}


def read_log(lake_root: str, log_version: int | None = None) -> LogView:
    """The release log of `lake_root`, pinned at `log_version` (None: the latest): one read of
    the log, two when pinned at an earlier version."""
    uri = release_log_uri(lake_root)
    rows = _rows(uri, None)
    if log_version is None:
        return LogView(rows, rows, None)
    pinned = [] if log_version < 0 else _rows(uri, log_version)
    return LogView(rows, pinned, log_version)


def _rows(uri: str, version: int | None) -> list[dict[str, Any]]:
    return rows_of(open_table(uri, version=version))


def rows_of(table: DeltaTable | None) -> list[dict[str, Any]]:
    """The records of the release log `table` as opened (none when there is no log)."""
    if table is None:
        return []
    # One thread: a threaded delta-rs scan aborts the process at exit (see backfill/state/ledger.py).
    return table.to_pyarrow_dataset().to_table(use_threads=False).to_pylist()


def pin_at(lake_root: str, when: datetime) -> int:
    """The version of the release log as it was at `when` (-1: it had no record yet)."""
    table = open_table(release_log_uri(lake_root))
    if table is None:
        return -1
    millis = when.timestamp() * 1000
    # The newest commits first: a run starts after most of the log; the whole history only when
    # none of them is older than its start.
    for commits in (table.history(limit=_RECENT_COMMITS), table.history()):
        found = [c["version"] for c in commits if c["timestamp"] <= millis]
        if found or len(commits) < _RECENT_COMMITS:
            return max(found, default=-1)
    return -1


def log_version_of(lake_root: str, release_id: str) -> int:
    """The version of the release log that recorded `release_id`.

    Raises:
        UnknownReleaseError: The log holds no release of that id; nothing was read or written.
    """
    table = open_table(release_log_uri(lake_root))
    for commit in table.history() if table is not None else []:
        if commit.get(_RELEASE_ID_KEY) == release_id and release_id.startswith(RELEASE[0]):
            return int(commit["version"])
    raise UnknownReleaseError(
        f"no release {release_id!r} in the release log of {lake_root} ({release_log_uri(lake_root)}): "
        "`partition-assets release list` shows the releases it holds. Nothing was read or written."
    )
