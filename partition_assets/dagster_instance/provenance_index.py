"""The provenance index: per (asset, partition), its latest materialization's storage id,
time, run, code version, commit, data version and the upstream data versions it read,
kept current from the Dagster event log by cursor. `--stale`, `--produced-by` (and `A..B`)
and the plan's reasons (backfill/planning/history.py) and `--catch-up`
(backfill/planning/instance_state.py) read it instead of every materialization of the history.

Where: two tables of their own in the event log's database, beside the events they are
derived from, created on first use through the event log storage's SQL engine (its index
connection: the consolidated SQLite database, the index shard of Dagster's per-run SQLite
log, or the Postgres database):
- `partition_assets_provenance`: one row per (asset, partition) ("" for an unpartitioned asset);
- `partition_assets_provenance_cursor`: the format version of the rows (`PROVENANCE_INDEX_FORMAT`) and the
  storage id of the last event read.
Why there: every deployment already has that database (a Postgres one is shared by every host,
as the events are); a partition wipe (instance/partition_wipe.py) clears Dagster's partition
index and these rows in one transaction; and an index is never older than the database it
indexes (a copy of the instance carries it). The key-value store would hold one value per
asset, rewritten whole on every update; a Delta table in the lake would be a second store to
keep in step with the instance.

Updates: `update_index` reads the materialization events after the cursor, whoever wrote
them (the engine, `dagster asset materialize`, the daemon, a publish), a page at a time
through Dagster's `get_event_records` (`EventRecordsFilter(ASSET_MATERIALIZATION,
after_cursor=...)`), and writes each page in one transaction: an upsert per (asset,
partition) that keeps the row with the higher storage id, and the cursor moved forward only
(`UPDATE ... WHERE storage_id < new`). Two processes updating at once read some events twice
and write the same rows: the result is the same whatever their order. Planning updates the
index first, so that its answers are those of a full scan of the event log.

A missing index is built from the event log, a page at a time, each with a progress line; an
index that cannot be read (a table, a row or the cursor not of the format) or that indexes
another history (the last event it read is no longer in the event log: the instance was wiped
or replaced, or that run deleted) is dropped and built again; one written by a newer release
(`PROVENANCE_INDEX_FORMAT`) is refused (ProvenanceIndexVersionError), as an older release could not tell
what it misreads. `python -m partition_assets.dagster_instance.provenance_index rebuild`
builds it again from the event log (it is derived: nothing is lost).

Not guaranteed: on Postgres, an event whose transaction commits after a later event's has been
read is missed (storage ids are handed out at insert, not at commit; Dagster's own cursors share
this); a run deleted from the instance (`dagster run delete`) leaves its rows until a rebuild
(unless it held the last event read: then that is one); a wiped asset (`dagster asset wipe`) is
answered by filtering its rows older than the wipe, as Dagster filters its events; a partition
wiped while an update is between reading its event and writing its row keeps that row; a rebuild
while another process reads the index may leave that reader a partial answer until its next
update (two rebuilds at once are safe). A commit recorded only as its run's tag, tagged after
the index read the event (the tag is set once the run succeeded), is looked up when
`--produced-by` reads the index (`with_run_commits`), as the scan did: one query per 500 runs of
such rows.
"""

from __future__ import annotations

import json
import sys
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from functools import partial
from typing import Any, NamedTuple, TypeVar

import dagster as dg
from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Float,
    Integer,
    MetaData,
    Row,
    Table,
    Text,
    case,
    inspect,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.schema import CreateTable, DropTable

from partition_assets.dagster_instance.recorded_versions import CODE_VERSION_TAG, recorded_git_sha, run_git_shas
from partition_assets.dagster_internals import SqlEventLogStorage, SqlEventLogStorageTable
from partition_assets.errors import EnvironmentSetupError, ProvenanceIndexVersionError
from partition_assets.state_formats import PROVENANCE_INDEX_FORMAT, checked_version

PAGE = 10_000  # materialization events read per query and written per transaction
DATA_VERSION_TAG = "dagster/data_version"  # Dagster's tags of a materialization (pinned by the tests)
INPUT_DATA_VERSION_TAG_PREFIX = "dagster/input_data_version/"
_CURSOR_NAME = "materializations"
_Found = TypeVar("_Found")
_BUILD = -1  # the cursor of an index that has read nothing

_metadata = MetaData()
PROVENANCE = Table(
    "partition_assets_provenance",
    _metadata,
    Column("asset_key", Text, primary_key=True),  # AssetKey.to_string(), as Dagster's tables
    Column("partition", Text, primary_key=True),  # "" for an unpartitioned asset
    Column("storage_id", BigInteger, nullable=False),
    Column("timestamp", Float, nullable=False),
    Column("run_id", Text, nullable=False),
    Column("code_version", Text, nullable=True),
    Column("git_sha", Text, nullable=True),  # the metadata's, else the run's tag when the index read it
    Column("data_version", Text, nullable=True),
    Column("input_data_versions", Text, nullable=False),  # JSON: upstream asset -> data version read
)
CURSOR = Table(
    "partition_assets_provenance_cursor",
    _metadata,
    Column("name", Text, primary_key=True),
    Column("format_version", Integer, nullable=False),
    Column("storage_id", BigInteger, nullable=False),
)
_COLUMNS = {table.name: {c.name for c in table.columns} for table in (PROVENANCE, CURSOR)}


class Provenance(NamedTuple):
    """The latest materialization of one (asset, partition), as the index keeps it (built on
    demand from `ProvenanceColumns`, one at a time)."""

    storage_id: int
    timestamp: float | None  # None when the reader did not ask for whole rows
    run_id: str | None  # None when the reader did not ask for whole rows and the row records a commit
    code_version: str | None
    git_sha: str | None  # None: neither the metadata nor (when read) the run's tag records one
    data_version: str | None  # None when the reader did not ask for whole rows
    # upstream asset (user string) -> data version read; None when the reader did not ask for them
    input_data_versions: Mapping[str, str] | None


class ProvenanceColumns(Mapping[str, Provenance]):
    """One asset's rows, partition -> Provenance, kept as columns: the partitions sorted, each
    column one pointer or number per row, every repeated string (a partition key, a commit, a
    code version, a run) held once. A plan of 730,000 partitions holds a few arrays per asset,
    not a tuple, a dict entry and five strings per partition; a Provenance is built when asked.

    Not guaranteed: a lookup is a binary search (log of the asset's partitions), not a hash."""

    __slots__ = ("_partitions", "_storage_ids", "_code_versions", "_git_shas", "_run_ids", "_whole")

    def __init__(self) -> None:
        self._partitions: list[str] = []
        self._storage_ids = array("q")
        self._code_versions: list[str | None] = []
        self._git_shas: list[str | None] = []
        self._run_ids: list[str | None] = []
        self._whole: list[tuple[float, str | None, Mapping[str, str] | None]] | None = None  # with whole rows

    def _append(
        self, partition: str, storage_id: int, code_version: str | None, git_sha: str | None, run_id: str | None
    ) -> None:
        self._partitions.append(partition)
        self._storage_ids.append(storage_id)
        self._code_versions.append(code_version)
        self._git_shas.append(git_sha)
        self._run_ids.append(run_id)

    def _sort(self) -> None:
        """Sorts the rows by partition, unless the database returned them so (its collation
        may order them otherwise than Python does)."""
        order = sorted(range(len(self._partitions)), key=self._partitions.__getitem__)
        if order == list(range(len(order))):
            return
        for name in ("_partitions", "_code_versions", "_git_shas", "_run_ids"):
            column = getattr(self, name)
            setattr(self, name, [column[i] for i in order])
        self._storage_ids = array("q", (self._storage_ids[i] for i in order))
        if self._whole is not None:
            self._whole = [self._whole[i] for i in order]

    def _position(self, partition: str) -> int:
        at = bisect_left(self._partitions, partition)
        if at == len(self._partitions) or self._partitions[at] != partition:
            raise KeyError(partition)
        return at

    def __getitem__(self, partition: str) -> Provenance:
        at = self._position(partition)
        timestamp, data_version, inputs = self._whole[at] if self._whole is not None else (None, None, None)
        return Provenance(
            self._storage_ids[at],
            timestamp,
            self._run_ids[at],
            self._code_versions[at],
            self._git_shas[at],
            data_version,
            inputs,
        )

    def __iter__(self) -> Iterator[str]:
        return iter(self._partitions)

    def __len__(self) -> int:
        return len(self._partitions)

    def __contains__(self, partition: object) -> bool:
        if not isinstance(partition, str):
            return False
        at = bisect_left(self._partitions, partition)
        return at < len(self._partitions) and self._partitions[at] == partition

    def untagged_runs(self) -> set[str]:
        """The runs of the rows that record no commit."""
        return {run for sha, run in zip(self._git_shas, self._run_ids, strict=True) if sha is None and run is not None}

    def with_run_commits(self, shas: Mapping[str, str]) -> ProvenanceColumns:
        """These rows, each that records no commit given its run's in `shas` (the other
        columns shared, not copied)."""
        copy = ProvenanceColumns()
        copy._partitions, copy._storage_ids, copy._code_versions = (
            self._partitions,
            self._storage_ids,
            self._code_versions,
        )
        copy._run_ids, copy._whole = self._run_ids, self._whole
        copy._git_shas = [
            sha if sha is not None or run is None else shas.get(run)
            for sha, run in zip(self._git_shas, self._run_ids, strict=True)
        ]
        return copy


class _Unreadable(Exception):
    """The index's tables are not of its format (see `_checked_cursor`)."""


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def update_index(instance: dg.DagsterInstance, progress: Callable[[str], None] = _to_stderr) -> int:
    """Brings the index of `instance` up to its event log's last event (see the module's
    docstring); returns how many materialization events it read. A build (a missing or
    unreadable index) reports each page to `progress`.

    Raises:
        ProvenanceIndexVersionError: The index was written by a newer release; nothing was written.
        EnvironmentSetupError: The instance's event log is not a SQL storage.
    """
    storage = sql_event_log(instance)
    try:
        cursor = _checked_cursor(storage)
    except _Unreadable as why:
        progress(f"provenance index: {why}; building it again from the event log")
        cursor = _reset(storage)
    return _read_since(instance, storage, cursor, progress)


def rebuild_index(instance: dg.DagsterInstance, progress: Callable[[str], None] = _to_stderr) -> int:
    """Drops the index of `instance`, whatever its format, and builds it from the event log;
    returns the events read."""
    storage = sql_event_log(instance)
    return _read_since(instance, storage, _reset(storage), progress)


def latest_provenance(
    instance: dg.DagsterInstance,
    keys: Iterable[dg.AssetKey],
    progress: Callable[[str], None] = _to_stderr,
    with_inputs: bool = False,
    made_by: AbstractSet[str] | None = None,
    or_after: int | None = None,
) -> dict[dg.AssetKey, ProvenanceColumns]:
    """Per asset of `keys`, per partition: its latest materialization, the index updated first,
    as columns (`ProvenanceColumns`). Whole rows (time, run, data version and the upstream data
    versions it read) when `with_inputs`; else the fields the rules read, and the run of a row
    recording no commit (decoding the rest is most of the time a plan reads the index, and
    holding it most of its memory). With `made_by`, only the rows whose commit is one of those
    or that record none (what `--produced-by` reads: the database filters them), and, with
    `or_after`, those after that storage id.
    Rows older than their asset's last wipe are left out (as Dagster leaves out its events:
    `dagster asset wipe`). A row's commit is the one recorded when the index read its event
    (`with_run_commits` looks up those that had none).

    Raises:
        ProvenanceIndexVersionError: The index was written by a newer release; nothing was written.
    """
    return _read_or_rebuild(
        instance, keys, partial(_rows, with_inputs=with_inputs, made_by=made_by, or_after=or_after), progress
    )


def materialized_partitions(
    instance: dg.DagsterInstance, keys: Iterable[dg.AssetKey], progress: Callable[[str], None] = _to_stderr
) -> dict[dg.AssetKey, set[str]]:
    """Per asset of `keys`, the partitions that hold a materialization, as `latest_provenance`
    lists them (the index updated first, rows older than the asset's last wipe left out), read
    as their keys alone: no row is read whole, no Provenance built (what `--catch-up` needs).

    Raises:
        ProvenanceIndexVersionError: The index was written by a newer release; nothing was written.
    """
    return _read_or_rebuild(instance, keys, _partitions, progress)


def _read_or_rebuild(
    instance: dg.DagsterInstance,
    keys: Iterable[dg.AssetKey],
    read: Callable[[SqlEventLogStorage, list[dg.AssetKey], Mapping[str, float]], _Found],
    progress: Callable[[str], None],
) -> _Found:
    """What `read` finds of `keys` in the index, updated first; built again from the event log,
    then read again, when a row is not of the format."""
    update_index(instance, progress)
    wanted = list(keys)
    shown_after = _shown_after(instance, wanted)
    storage = sql_event_log(instance)
    try:
        return read(storage, wanted, shown_after)
    except (ValueError, TypeError) as why:  # a row not of the format
        progress(f"provenance index: a row cannot be read ({why}); building it again from the event log")
        rebuild_index(instance, progress)
        return read(storage, wanted, shown_after)


def with_run_commits(
    instance: dg.DagsterInstance, found: dict[dg.AssetKey, ProvenanceColumns]
) -> dict[dg.AssetKey, ProvenanceColumns]:
    """`found` with each row that records no commit given its run's tag, when the run has one
    now (the tag is set once a run succeeded, maybe after the index read its events): one
    query per 500 runs."""
    untagged = sorted(set().union(*(columns.untagged_runs() for columns in found.values())))
    if not untagged:
        return found
    shas = run_git_shas(instance, untagged)
    return {key: columns.with_run_commits(shas) for key, columns in found.items()}


def forget_partitions(connection: Connection, asset: dg.AssetKey, partitions: Iterable[str]) -> None:
    """Deletes the rows of `partitions` of `asset`, in the caller's transaction on the event
    log's index connection (a partition wipe: instance/partition_wipe.py)."""
    if inspect(connection).has_table(PROVENANCE.name):
        connection.execute(
            PROVENANCE.delete().where(
                PROVENANCE.c.asset_key == asset.to_string(), PROVENANCE.c.partition.in_(list(partitions))
            )
        )


def sql_event_log(instance: dg.DagsterInstance) -> SqlEventLogStorage:
    """The SQL event log of `instance` (SQLite or Postgres).

    Raises:
        EnvironmentSetupError: The instance's event log is not a SQL storage.
    """
    storage = instance.event_log_storage
    if not isinstance(storage, SqlEventLogStorage):
        raise EnvironmentSetupError(
            f"the Dagster instance at {instance.root_directory} stores events in {type(storage).__name__}, not in "
            "a SQL database: the provenance index is kept in the event log's database; configure SQLite (the "
            "default) or Postgres storage in its dagster.yaml. Nothing was written."
        )
    return storage


@contextmanager
def _transaction(storage: SqlEventLogStorage) -> Iterator[Connection]:
    with storage.index_transaction() as connection:
        yield connection


def _checked_cursor(storage: SqlEventLogStorage) -> int:
    """The cursor of the index (creating empty tables when absent, two processes may race).

    Raises:
        _Unreadable: A table's columns, the cursor or its format version are not the index's,
            or the event log no longer holds the last event the index read.
        ProvenanceIndexVersionError: A newer release wrote the index.
    """
    with _transaction(storage) as connection:
        present = {table for table in _COLUMNS if inspect(connection).has_table(table)}
    if not present:
        try:
            _create(storage)
        except (IntegrityError, OperationalError, ProgrammingError):
            _create(storage)  # a concurrent CREATE TABLE on Postgres fails the loser
    elif present != set(_COLUMNS):
        raise _Unreadable(f"table {sorted(set(_COLUMNS) - present)[0]} is missing")
    with _transaction(storage) as connection:
        inspector = inspect(connection)
        for table, columns in _COLUMNS.items():
            found = {column["name"] for column in inspector.get_columns(table)}
            if found != columns:
                raise _Unreadable(f"table {table} has columns {sorted(found)}, not {sorted(columns)}")
        row = connection.execute(select(CURSOR).where(CURSOR.c.name == _CURSOR_NAME)).one_or_none()
        if row is None:
            if connection.execute(select(PROVENANCE.c.asset_key).limit(1)).first() is not None:
                raise _Unreadable("its rows have no cursor")
            _start_cursor(connection)
            return _BUILD
    version, cursor = row.format_version, row.storage_id
    if not isinstance(version, int) or not isinstance(cursor, int):
        raise _Unreadable(f"its cursor ({cursor!r}, format version {version!r}) is not a number")
    if version > PROVENANCE_INDEX_FORMAT:  # refused, never rebuilt behind a newer release's back
        checked_version(
            version,
            PROVENANCE_INDEX_FORMAT,
            f"the provenance index of this Dagster instance (table {PROVENANCE.name})",
            ProvenanceIndexVersionError,
            ", or build it again for this release with `python -m partition_assets.dagster_instance.provenance_index "
            "rebuild` (it is derived from the event log: nothing is lost)",
        )
    if version < PROVENANCE_INDEX_FORMAT:
        raise _Unreadable(f"it is at format version {version}, older than this release's {PROVENANCE_INDEX_FORMAT}")
    if cursor != _BUILD and not _holds_event(storage, cursor):
        raise _Unreadable(
            f"the last event it read ({cursor}) is no longer in the event log (the instance was wiped or replaced, "
            "or that run deleted)"
        )
    return cursor


def _holds_event(storage: SqlEventLogStorage, storage_id: int) -> bool:
    """Whether the event log still holds event `storage_id` (one lookup of its primary key)."""
    table = SqlEventLogStorageTable
    with storage.index_connection() as connection:
        return connection.execute(select(table.c.id).where(table.c.id == storage_id)).first() is not None


def _create(storage: SqlEventLogStorage) -> None:
    with _transaction(storage) as connection:
        for table in _metadata.sorted_tables:
            connection.execute(CreateTable(table, if_not_exists=True))


def _reset(storage: SqlEventLogStorage) -> int:
    """Drops and creates the index's tables, empty with a cursor that has read nothing. Two
    processes may reset at once: each statement tolerates the other's."""
    with _transaction(storage) as connection:
        for table in _metadata.sorted_tables:
            connection.execute(DropTable(table, if_exists=True))
            connection.execute(CreateTable(table, if_not_exists=True))
        _start_cursor(connection)
    return _BUILD


def _start_cursor(connection: Connection) -> None:
    """The cursor of an index that has read nothing, unless another process wrote one meanwhile."""
    statement = _upserting(connection, CURSOR).values(
        name=_CURSOR_NAME, format_version=PROVENANCE_INDEX_FORMAT, storage_id=_BUILD
    )
    connection.execute(statement.on_conflict_do_nothing(index_elements=[CURSOR.c.name]))


def _read_since(
    instance: dg.DagsterInstance, storage: SqlEventLogStorage, cursor: int, progress: Callable[[str], None]
) -> int:
    """Reads the materialization events after `cursor`, a page at a time, each page written
    with the cursor in one transaction; returns the events read."""
    building = cursor == _BUILD
    if building:
        progress(f"provenance index: building it from the event log (up to event {storage.get_maximum_record_id()})")
    read = 0
    while True:
        records = storage.get_event_records(
            dg.EventRecordsFilter(dg.DagsterEventType.ASSET_MATERIALIZATION, after_cursor=cursor),
            limit=PAGE,
            ascending=True,
        )
        if not records:
            break
        cursor = records[-1].storage_id
        rows = _rows_of(instance, records, _wiped_event_ids(storage, records[0].storage_id, cursor))
        with _transaction(storage) as connection:
            _upsert(connection, rows)
            connection.execute(
                update(CURSOR)
                .where(CURSOR.c.name == _CURSOR_NAME, CURSOR.c.storage_id < cursor)
                .values(storage_id=cursor)
            )
        read += len(records)
        if building:
            progress(f"provenance index: {read:,} materializations read (up to event {cursor})")
        if len(records) < PAGE:
            break
    return read


def _wiped_event_ids(storage: SqlEventLogStorage, first: int, last: int) -> set[int]:
    """Materialization events from `first` to `last` that Dagster's partition index does not
    list (their partition was wiped: instance/partition_wipe.py), unpartitioned ones included."""
    table = SqlEventLogStorageTable
    query = select(table.c.id).where(
        table.c.id >= first,
        table.c.id <= last,
        table.c.dagster_event_type == dg.DagsterEventType.ASSET_MATERIALIZATION.value,
        table.c.partition.is_(None),
    )
    with storage.index_connection() as connection:
        return set(connection.execute(query).scalars())


def _rows_of(instance: dg.DagsterInstance, records: Sequence[dg.EventLogRecord], unindexed: set[int]) -> list[dict]:
    """The latest row per (asset, partition) of `records` (ascending), leaving out the events
    of wiped partitions; a commit not in the metadata is read from its run's tag."""
    latest: dict[tuple[str, str], dict] = {}
    for record in records:
        materialization = record.asset_materialization
        assert materialization is not None  # the query asks for materializations only
        if materialization.partition is not None and record.storage_id in unindexed:
            continue
        tags = materialization.tags or {}
        latest[(materialization.asset_key.to_string(), materialization.partition or "")] = {
            "asset_key": materialization.asset_key.to_string(),
            "partition": materialization.partition or "",
            "storage_id": record.storage_id,
            "timestamp": record.timestamp,
            "run_id": record.run_id,
            "code_version": tags.get(CODE_VERSION_TAG),
            "git_sha": recorded_git_sha(materialization),
            "data_version": tags.get(DATA_VERSION_TAG),
            "input_data_versions": json.dumps(
                {
                    name.removeprefix(INPUT_DATA_VERSION_TAG_PREFIX): value
                    for name, value in sorted(tags.items())
                    if name.startswith(INPUT_DATA_VERSION_TAG_PREFIX)
                }
            ),
        }
    untagged = sorted({row["run_id"] for row in latest.values() if row["git_sha"] is None})
    shas = run_git_shas(instance, untagged) if untagged else {}
    for row in latest.values():
        row["git_sha"] = row["git_sha"] or shas.get(row["run_id"])
    return list(latest.values())


def _upsert(connection: Connection, rows: list[dict]) -> None:
    """Writes `rows`, each replacing the row of its (asset, partition) only when its storage id
    is higher: idempotent, and the same whatever order concurrent writers commit in."""
    if not rows:
        return
    statement = _upserting(connection, PROVENANCE)
    statement = statement.on_conflict_do_update(
        index_elements=[PROVENANCE.c.asset_key, PROVENANCE.c.partition],
        set_={name: statement.excluded[name] for name in _COLUMNS[PROVENANCE.name] - {"asset_key", "partition"}},
        where=PROVENANCE.c.storage_id < statement.excluded.storage_id,
    )
    connection.execute(statement, rows)


def _upserting(connection: Connection, table: Table) -> postgresql.Insert | sqlite.Insert:
    """An INSERT into `table` that can say what to do on a conflict (ON CONFLICT: SQLite, Postgres)."""
    return postgresql.insert(table) if connection.dialect.name == "postgresql" else sqlite.insert(table)


def _shown_after(instance: dg.DagsterInstance, keys: list[dg.AssetKey]) -> dict[str, float]:
    """Per asset of `keys` that Dagster lists, the time its events count from: its last wipe
    (`dagster asset wipe`), else -inf. Dagster lists no asset wiped and not materialized since."""
    shown = {}
    for record in instance.get_asset_records(keys):
        details = record.asset_entry.asset_details
        wiped = details.last_wipe_timestamp if details is not None else None
        shown[record.asset_entry.asset_key.to_string()] = wiped or float("-inf")
    return shown


def _rows(
    storage: SqlEventLogStorage,
    keys: list[dg.AssetKey],
    shown_after: Mapping[str, float],
    with_inputs: bool,
    made_by: AbstractSet[str] | None,
    or_after: int | None,
) -> dict[dg.AssetKey, ProvenanceColumns]:
    """The rows of `keys` as columns (see `latest_provenance`), those of each asset's events
    Dagster shows (`_shown_after`) alone.

    Raises:
        ValueError, TypeError: A row is not of the format."""
    by_name = {key.to_string(): key for key in keys}
    found = {key: ProvenanceColumns() for key in keys}
    strings: dict[Any, Any] = {}  # a string -> the one held

    def held(text: str | None) -> Any:  # each repeated string held once
        return strings.setdefault(text, text)

    # The run of a row that records a commit is read with whole rows alone.
    run = PROVENANCE.c.run_id if with_inputs else case((PROVENANCE.c.git_sha.is_(None), PROVENANCE.c.run_id))
    columns = [
        PROVENANCE.c.asset_key,
        PROVENANCE.c.partition,
        PROVENANCE.c.timestamp,
        PROVENANCE.c.storage_id,
        PROVENANCE.c.code_version,
        PROVENANCE.c.git_sha,
        run.label("run_id"),
    ]
    if with_inputs:
        columns += [PROVENANCE.c.data_version, PROVENANCE.c.input_data_versions]
        for columns_of in found.values():
            columns_of._whole = []
    where = []
    if made_by is not None:
        chosen = PROVENANCE.c.git_sha.in_(sorted(made_by)) | PROVENANCE.c.git_sha.is_(None)
        where.append(chosen | (PROVENANCE.c.storage_id > or_after) if or_after is not None else chosen)
    for row in _shown_rows(storage, columns, by_name, shown_after, where):
        if not isinstance(row.storage_id, int):
            raise TypeError(f"the row of {row.asset_key} {row.partition!r} is not of the format")
        into = found[by_name[row.asset_key]]
        into._append(held(row.partition), row.storage_id, held(row.code_version), held(row.git_sha), held(row.run_id))
        if into._whole is not None:
            inputs = json.loads(row.input_data_versions)
            if not isinstance(inputs, dict):
                raise TypeError(f"the row of {row.asset_key} {row.partition!r} is not of the format")
            into._whole.append((row.timestamp, row.data_version, inputs))
    for columns_of in found.values():
        columns_of._sort()
    return found


def _partitions(
    storage: SqlEventLogStorage, keys: list[dg.AssetKey], shown_after: Mapping[str, float]
) -> dict[dg.AssetKey, set[str]]:
    """The partitions of `keys` that have a row, those of each asset's events Dagster shows alone."""
    by_name = {key.to_string(): key for key in keys}
    found: dict[dg.AssetKey, set[str]] = {key: set() for key in keys}
    columns = [PROVENANCE.c.asset_key, PROVENANCE.c.partition, PROVENANCE.c.timestamp]
    for row in _shown_rows(storage, columns, by_name, shown_after):
        found[by_name[row.asset_key]].add(row.partition)
    return found


def _shown_rows(
    storage: SqlEventLogStorage,
    columns: list,
    names: Iterable[str],
    shown_after: Mapping[str, float],
    where: Sequence = (),
) -> Iterator[Row]:
    """`columns` of the rows of the assets `names` (AssetKey.to_string()) that match `where`,
    those of each asset's events Dagster shows (`_shown_after`) alone, asset by asset in
    partition order (as the primary key orders them), streamed."""
    listed = sorted(name for name in names if name in shown_after)
    with _transaction(storage) as connection:
        for start in range(0, len(listed), 500):  # SQLite caps a statement's variables
            chunk = listed[start : start + 500]
            query = select(*columns).where(PROVENANCE.c.asset_key.in_(chunk), *where)
            ordered = query.order_by(PROVENANCE.c.asset_key, PROVENANCE.c.partition)
            for row in connection.execution_options(stream_results=True).execute(ordered):
                if row.timestamp > shown_after[row.asset_key]:
                    yield row


def main(argv: list[str] | None = None) -> int:
    """`python -m partition_assets.dagster_instance.provenance_index rebuild`: builds the index of the
    instance DAGSTER_HOME names again from its event log."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["rebuild"]:
        print("usage: python -m partition_assets.dagster_instance.provenance_index rebuild", file=sys.stderr)
        return 2
    with dg.DagsterInstance.get() as instance:
        read = rebuild_index(instance)
    print(f"provenance index: built from {read:,} materialization events")
    return 0


if __name__ == "__main__":
    sys.exit(main())
