"""The release log: which version of each table belongs to which release, in one small
append-only Delta table beside the tables (`<lake root>/_partition_assets/releases`).

An operation that commits to several tables one after the other (a staged backfill's
publish, its rollback, a retract) is opened and closed by its own records, each carrying its
`operation_id`: `begin` records before its first table commit, naming every table it may
commit with the table's version before it, and one `release` record after its last, naming
every table it changed with its version after (its commit). A backfill has at most one open
operation: a begin while one is open (a publish resumed after a kill, on any host; a rollback
of a publish stopped part-way) joins it, and its release closes it. Open and closed are read
from the records alone, never by comparing clocks. Each record is one append (one Delta
commit) of one row per table: any Delta reader (delta-rs, pandas, DuckDB) reads plain columns.
The log carries its format as a table property (state_formats.py): a log a newer release
created is refused (StateFormatError), neither read nor appended to.
A plain write (a production run's commit) is one commit of one table and needs no record.

A reader pins one view (`LogView.read_versions`): it looks up the latest version of each
table it reads, then reads the log once. An operation open for it holds each of its tables
at its version before; a released one is read whole when every table it changed is read at or
past its commit, else it is hidden as well, holding its tables at their versions before it;
and so on until no hidden operation lowers a table another is read at: every operation is
read whole or not at all. An operation landing between the lookups and the log read is hidden
the same way (a commit past a looked-up version). The log is as the reader pins it: the latest,
or as it was at a run's start (`pin_at`), so that a run's steps agree on what is complete.

Not guaranteed: a table outside every operation is read at its latest version when read, so
two steps of one run may read different plain writes of it (each a whole commit of one
table). A table under an open operation is read at its version before it: plain writes to
its other partitions after that stay unseen until the operation is released or rolled back,
and so does a released operation that committed to it after the open one began (none of it,
rather than half). A run's pin is the log as of the run's start by the log's commit
timestamps: a record committed within milliseconds of the start by a writer whose clock is
ahead may count for one step and not for another. Releases are listed in causal order (a
record appended after its writer read another comes after it); records appended concurrently
are ordered by their writers' clocks. A log written before operation ids (rows without
`operation_id`) reads each backfill's records as one operation. A table deleted and created
again in its folder restarts its versions below those the log names: until it passes them, a
reader of it may read the other tables of those releases as before them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from partition_assets.errors import UnknownReleaseError
from partition_assets.state_formats import RELEASE_LOG_FORMAT, checked_table_format, table_format_properties
from partition_assets.storage.delta.tables import RecordTable
from partition_assets.storage.table_formats import current_version

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
# What identifies a record's row: a compaction keeps one row per value.
_RECORD_KEY = ("release_id", "table")

SCHEMA = pa.schema(
    [
        pa.field("release_id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # "begin" or "release"
        pa.field("operation", pa.string(), nullable=False),  # "publish", "rollback", "retract"
        pa.field("backfill_id", pa.string(), nullable=False),
        pa.field("table", pa.string()),  # the table's folder under the lake root; null when none changed
        pa.field("version", pa.int64()),  # before the operation (begin, -1: no table), after it (release)
        pa.field("recorded_at", pa.timestamp("us", tz="UTC"), nullable=False),  # writer's clock: not compared
        pa.field("operation_id", pa.string()),  # the id of the operation's first begin (null: written before ids)
        pa.field("sequence", pa.int64()),  # one more than the highest its writer read (null: written before)
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
    operation_id: str
    versions: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "release_id": self.release_id,
            "operation": self.operation,
            "backfill_id": self.backfill_id,
            "recorded_at": self.recorded_at.isoformat(),
            "versions": dict(self.versions),
        }


@dataclass(frozen=True)
class Operation:
    """One operation as a reader's view of the log records it: `before` maps each table its
    begin records name to the lowest version they give (NO_TABLE: the operation created it);
    `release` is its release, None while it is open for the reader."""

    operation_id: str
    before: Mapping[str, int]
    release: Release | None

    def read_whole(self, bounds: Mapping[str, int]) -> bool:
        """Whether a reader reading each table at most at `bounds` (a table not named: at its
        latest) reads every commit of this operation: it is released, and no table it changed
        is bounded below its commit."""
        if self.release is None:
            return False
        return all(bounds.get(table, version) >= version for table, version in self.release.versions.items())

    def versions_before(self) -> dict[str, int]:
        """Each table of the operation at its version before it: as its begin records give it,
        else (a release with no begin: one recorded again after its operation's) before its commit."""
        changed = self.release.versions if self.release is not None else {}
        return {**{table: version - 1 for table, version in changed.items()}, **self.before}


def begin_release(lake_root: str, operation: str, backfill_id: str, table_uris: Iterable[str]) -> str:
    """Appends a `begin` record of `operation` of `backfill_id`, before its first commit to
    any of `table_uris`: their versions now, which readers keep reading until the operation's
    release. It joins the backfill's open operation when there is one (a publish resumed, a
    rollback of a publish stopped part-way): that operation's release closes both. Returns the
    operation's id.

    Raises:
        CommitError: The append kept losing to concurrent writers; nothing was recorded.
    """
    versions = {}
    for uri in table_uris:
        version = current_version(uri)
        versions[uri] = NO_TABLE if version is None else version
    return _append(lake_root, BEGIN, operation, backfill_id, versions)[1]


def append_release(lake_root: str, operation: str, backfill_id: str, versions: Mapping[str, int | None]) -> str:
    """Appends the `release` record of `operation` of `backfill_id`, after its last table
    commit: `versions` maps each table uri it changed to its version after (None: not changed).
    It closes the backfill's open operation (begun by this process or another: the records
    say which, not their clocks). From then on readers read those tables at their latest
    versions. Returns the release id.

    The one way to record a release: a new operation over several tables calls
    `begin_release` before its first commit and this after its last.

    Raises:
        CommitError: The append kept losing to concurrent writers; nothing was recorded (the
            operation stays open for readers: run it again to release it).
    """
    changed = {uri: version for uri, version in versions.items() if version is not None}
    return _append(lake_root, RELEASE, operation, backfill_id, changed)[0]


def _append(
    lake_root: str, kind: str, operation: str, backfill_id: str, versions: Mapping[str, int]
) -> tuple[str, str]:
    """Appends one record; returns its id and its operation's id. One read of the log first: the
    backfill's open operation (a backfill's operations run one at a time, under its
    coordinator), and the highest sequence."""
    record_id = f"{kind[0]}-{uuid.uuid4().hex[:12]}"
    uri = release_log_uri(lake_root)
    view = LogView.latest(rows_of(_open_log(uri)))
    operation_id = view.open_operation(backfill_id) or record_id
    sequence = view.last_sequence() + 1
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
            "operation_id": operation_id,
            "sequence": sequence,
        }
        for table, version in tables or [(None, None)]
    ]
    data = pa.Table.from_pylist(rows, schema=SCHEMA)
    from partition_assets.storage.delta.append import append_rows  # a writer's: readers load no Spark (delta/tables.py)

    properties = table_format_properties(RELEASE_LOG_FORMAT)
    append_rows(uri, data, "the release log", commit_metadata={_RELEASE_ID_KEY: record_id}, properties=properties)
    if kind == RELEASE:
        _compact_when_fragmented(uri)
    return record_id, operation_id


def _open_log(uri: str, version: int | None = None) -> RecordTable | None:
    """The release log at `uri` (None: none yet), when in a format this release reads.

    Raises:
        StateFormatError: A newer release created the log, in a format this one does not read.
    """
    table = RecordTable.open(uri, version=version)
    if table is not None:
        checked_table_format(table.properties, RELEASE_LOG_FORMAT, f"the release log {uri}")
    return table


def _compact_when_fragmented(uri: str) -> None:
    """Rewrites the log's files into one once it holds more than _MAX_FILES (one per append):
    a reader's one read of the log then opens a few files, not one per record (measured:
    100 files 0.58 s, compacted 8 ms). It keeps one row per record, in one guarded commit
    (`compact_once`): of releases compacting at once, one does and the others leave it. The
    small files stay for readers pinned at earlier versions until vacuum removes them."""
    from partition_assets.storage.delta.append import compact_when_fragmented  # a writer's, as append_rows

    compact_when_fragmented(uri, _MAX_FILES, _RECORD_KEY)


def _operation_of(row: Mapping[str, Any]) -> str:
    """The operation a record belongs to; a record written before operation ids: its backfill's."""
    return row.get("operation_id") or row["backfill_id"]


def _order(row: Mapping[str, Any]) -> tuple[int, datetime]:
    """Causal order of records (`sequence`); the writers' clocks only between concurrent ones."""
    return row.get("sequence") or 0, row["recorded_at"]


@dataclass(frozen=True)
class ReaderView:
    """One reader's consistent view: `versions`, each table it looked up at the version to read
    it at (NO_TABLE: no table for it); `release`, the newest release it reads whole (None: none);
    `unseen_tables`, the tables an operation it does not see creates."""

    versions: Mapping[str, int]
    release: Release | None
    unseen_tables: frozenset[str]


@dataclass(frozen=True)
class LogView:
    """The release log as a reader sees it: `rows`, every record now (for the operations
    begun since the pin), and `pinned`, the records of the log at version `log_version`
    (None: the latest; -1: before its first record): the releases complete for the reader."""

    rows: list[dict[str, Any]]
    pinned: list[dict[str, Any]]
    log_version: int | None

    @classmethod
    def latest(cls, rows: list[dict[str, Any]], log_version: int | None = None) -> LogView:
        """The view of a reader of the latest log: `rows` as read (at `log_version`)."""
        return cls(rows, rows, log_version)

    def releases(self) -> list[Release]:
        """The releases complete for the reader, oldest first."""
        grouped: dict[str, Release] = {}
        for row in sorted(self.pinned, key=_order):
            if row["kind"] != RELEASE:
                continue
            release = grouped.setdefault(
                row["release_id"],
                Release(
                    row["release_id"], row["operation"], row["backfill_id"], row["recorded_at"], _operation_of(row), {}
                ),
            )
            if row["table"] is not None:
                release.versions[row["table"]] = row["version"]  # type: ignore[index]
        return list(grouped.values())

    def operations(self) -> list[Operation]:
        """Every operation the log names: those begun (in `rows`, begun since the pin too) and
        those released (in `pinned`); released when `pinned` holds its release."""
        released: dict[str, Release] = {}
        for release in self.releases():  # oldest first: a later release of one operation wins
            earlier = released.get(release.operation_id)
            versions = {**(earlier.versions if earlier else {}), **release.versions}
            released[release.operation_id] = replace(release, versions=versions)
        before: dict[str, dict[str, int]] = {}
        for row in self.rows:
            if row["kind"] != BEGIN:
                continue
            tables = before.setdefault(_operation_of(row), {})
            if row["table"] is not None:
                tables[row["table"]] = min(tables.get(row["table"], row["version"]), row["version"])
        ids = sorted(before.keys() | released.keys())
        return [Operation(op, before.get(op, {}), released.get(op)) for op in ids]

    def hidden(self, bounds: Mapping[str, int]) -> tuple[list[Operation], dict[str, int]]:
        """The operations a reader that reads each table at most at `bounds` (a table not
        named: at its latest) cannot read whole, and the bounds lowered to their versions before
        them: every open one, then each released one a bound falls below, until none is left."""
        lowered = dict(bounds)
        hidden: list[Operation] = []
        left = self.operations()
        while newly := [op for op in left if not op.read_whole(lowered)]:
            for op in newly:
                for table, version in op.versions_before().items():
                    lowered[table] = min(lowered.get(table, version), version)
            hidden += newly
            gone = {op.operation_id for op in newly}
            left = [op for op in left if op.operation_id not in gone]
        return hidden, lowered

    def read_versions(self, latest: Mapping[str, int]) -> ReaderView:
        """What a reader that looked up each table of `latest` at that version (NO_TABLE: none)
        before this read of the log reads: see ReaderView."""
        hidden, lowered = self.hidden(latest)
        unseen = {op.operation_id for op in hidden}
        seen = [release for release in self.releases() if release.operation_id not in unseen]
        created = {table for op in hidden for table, version in op.versions_before().items() if version == NO_TABLE}
        return ReaderView({name: lowered[name] for name in latest}, seen[-1] if seen else None, frozenset(created))

    def open_operation(self, backfill_id: str) -> str | None:
        """The id of the backfill's operation begun and not released (None: none)."""
        released = {_operation_of(row) for row in self.pinned if row["kind"] == RELEASE}
        begun = [row for row in self.rows if row["kind"] == BEGIN and row["backfill_id"] == backfill_id]
        return next((_operation_of(row) for row in begun if _operation_of(row) not in released), None)

    def last_sequence(self) -> int:
        """The highest sequence of a record in the log (0: none)."""
        return max((row.get("sequence") or 0 for row in self.rows), default=0)

    def tables(self) -> set[str]:
        """Every table the log names."""
        return {row["table"] for row in self.rows if row["table"] is not None}


def read_log(lake_root: str, log_version: int | None = None) -> LogView:
    """The release log of `lake_root`, pinned at `log_version` (None: the latest, the view's
    `log_version` then the version read; -1 when there is no log): one read of the log, two
    when pinned at an earlier version."""
    uri = release_log_uri(lake_root)
    table = _open_log(uri)
    rows = rows_of(table)
    if log_version is None:
        return LogView.latest(rows, -1 if table is None else table.version)
    pinned = [] if log_version < 0 else _rows(uri, log_version)
    return LogView(rows, pinned, log_version)


def versions_in_use(lake_root: str, table: str, released_before: datetime) -> set[int]:
    """The versions of `table` (its name in the log) a reader of the release log of `lake_root`
    may read other than its latest: its version before every operation open now, or released
    after `released_before` (a run pinned before that release reads it until the run ends), and
    before every operation those hide. One read of the log; release times by their writers' clocks.
    """
    rows = read_log(lake_root).rows
    older = [row for row in rows if row["kind"] != RELEASE or row["recorded_at"] <= released_before]
    hidden, _ = LogView(rows, older, None).hidden({})
    before = [op.versions_before().get(table, NO_TABLE) for op in hidden]
    return {version for version in before if version != NO_TABLE}


def _rows(uri: str, version: int | None) -> list[dict[str, Any]]:
    return rows_of(_open_log(uri, version))


def rows_of(table: RecordTable | None) -> list[dict[str, Any]]:
    """The records of the release log `table` as opened (none when there is no log)."""
    return [] if table is None else table.rows()


def pin_at(lake_root: str, when: datetime) -> int:
    """The version of the release log as it was at `when` (-1: it had no record yet)."""
    table = _open_log(release_log_uri(lake_root))
    if table is None:
        return -1
    millis = when.timestamp() * 1000
    # The newest commits first: a run starts after most of the log; the whole history only when
    # none of them is older than its start.
    for commits in (table.commits(limit=_RECENT_COMMITS), table.commits()):
        found = [c["version"] for c in commits if c["timestamp"] <= millis]
        if found or len(commits) < _RECENT_COMMITS:
            return max(found, default=-1)
    return -1


def log_version_of(lake_root: str, release_id: str) -> int:
    """The version of the release log that recorded `release_id`.

    Raises:
        UnknownReleaseError: The log holds no release of that id; nothing was read or written.
    """
    table = _open_log(release_log_uri(lake_root))
    for commit in table.commits() if table is not None else []:
        if commit.get(_RELEASE_ID_KEY) == release_id and release_id.startswith(RELEASE[0]):
            return int(commit["version"])
    raise UnknownReleaseError(
        f"no release {release_id!r} in the release log of {lake_root} ({release_log_uri(lake_root)}): "
        "`partition-assets release list` shows the releases it holds. Nothing was read or written."
    )
