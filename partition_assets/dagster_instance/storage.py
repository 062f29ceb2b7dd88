"""Instance storage with less bookkeeping per run, for instances that run many small runs.

`EngineBackfillInstance` (partition_assets/instance/engine_instance.py) takes these as its defaults, for
whatever dagster.yaml leaves unset (`instance_storage_defaults`):
- the event log: `ConsolidatedEventLogStorage`, Dagster's consolidated SQLite storage (one
  database for every run's events under `<home>/history/consolidated`, where Dagster's
  default SQLite storage creates a database per run, schema included);
- runs: `RunStorage`, Dagster's SQLite run storage (`<home>/history/runs.db`). Both keep
  one SQLAlchemy engine per process where Dagster's build one per transaction (~30 per
  run, ~1 ms of CPU each), and keep its connections open between transactions in WAL
  `synchronous=NORMAL` (`_pooled_engine`);
- both answer Dagster's schema checks (does the runs table have a column, the event log a
  table?) from memory once a check found what it looks for (`_found_once`): Dagster makes
  ~9 such checks per run, each reflecting a table's columns, ~5 % of a run's CPU;
- compute logs: `DirectComputeLogManager`, a run's stdout and stderr written straight into
  the files Dagster's `LocalComputeLogManager` uses (`<home>/storage`). Dagster's mirrors each
  captured stream back to the terminal through a `tail -F` process plus a Python orphan
  watcher, two per stream: four processes started, and waited for, per run. For a backfill
  node that is most of the CPU a run costs (bench/results/node_overhead.md).
Their connections are closed before the process forks (`_close_before_fork`): SQLite's
state of a connection open across a fork corrupts the database.
A process can keep a database server's connections open (`keep_connections`) and ride out
the server's restarts (`riding_out_database_restarts`, the coordinator's).
The webserver shows and follows both as before (partition_assets_tests/integration/test_dagster_instance_storage.py).
On an instance that leaves Dagster's defaults in place (no dagster.yaml: what a new project
has), the engine's command writes through `same_files_lighter`: `RunStorage` and
`DirectComputeLogManager` on Dagster's own files, its per-run event log databases as they are.
A `storage:` block in dagster.yaml (Postgres) replaces the event log default; a
`compute_logs:` block the compute log default.

Not guaranteed: a step's output no longer also appears on the terminal of the process that
runs it (`dagster dev`'s, a backfill command's); it is in the webserver's run view and under
`<home>/storage`. The consolidated event log serializes every run's event writes on one
SQLite file (WAL). In `synchronous=NORMAL` a commit survives the process dying but not the
machine losing power: the last events or run updates before a power loss may be lost (a
resumed backfill runs those nodes again; staged writes and publishing are idempotent). A
connection another thread holds at a fork (inside a transaction) stays open across it.
Relies on Dagster's `InstanceRef.config_defaults`, its composite storage, the two SQLite
storages' `_connect`/`connect` seams, the consolidated storage's `watch` state (`_obs`,
`_watchers`, `on_modified`), `redirect_to_file` and the file layout of
`LocalComputeLogManager`, and the names of the schema checks Dagster calls per run (pinned
by the tests).
"""

import contextlib
import functools
import logging
import os
import sqlite3
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, Self

import yaml
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import Dialect, ExecutionContext
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import NullPool, Pool, QueuePool
from watchdog.events import FileSystemEvent, PatternMatchingEventHandler
from watchdog.observers import Observer

if TYPE_CHECKING:
    from dagster import DagsterInstance

from partition_assets.dagster_internals import (
    IO_TYPE_EXTENSION,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    CapturedLogContext,
    ComputeIOType,
    ConfigurableClassData,
    ConsolidatedSqliteEventLogStorage,
    InstanceRef,
    LocalComputeLogManager,
    SqliteEventLogStorage,
    SqliteRunStorage,
    compute_logs_directory,
    ensure_file,
    redirect_to_file,
    touch_file,
)
from partition_assets.errors import DatabaseUnreachableError

_log = logging.getLogger(__name__)
# Connections an engine keeps open: a run's process writes from one or two threads at a time.
POOLED_CONNECTIONS = 4
# How long a kept database server connection is reused before it is replaced (Dagster's
# webserver default): a server may drop idle connections.
POOL_RECYCLE_SECONDS = 3600
# How long a process riding out database restarts (`riding_out_database_restarts`) waits for
# its database server to answer again before the call fails (DatabaseUnreachableError), by
# default: the coordinator reads the setting.
DATABASE_OUTAGE_SECONDS_ENV = "PARTITION_ASSETS_DATABASE_OUTAGE_SECONDS"
DATABASE_OUTAGE_SECONDS = 120.0
# The first wait between two attempts while the server does not answer, doubled up to the last.
_OUTAGE_FIRST_WAIT_SECONDS, _OUTAGE_LONGEST_WAIT_SECONDS = 0.25, 4.0
# How often a watched consolidated event log is read again without a file change: a WAL's
# change can be seen before the commit that made it is (`_WriteWatchdog`). Bounds how late
# such a commit's events reach a watcher (the webserver's run view).
WATCH_POLL_SECONDS = 1.0
# Every engine `_OneEngine` built in this process: their connections are closed before it forks.
_ENGINES: "weakref.WeakSet[Engine]" = weakref.WeakSet()


def _close_before_fork() -> None:
    """Closes the SQLite connections this process keeps open, before it forks (the engine's
    fork server, a command server's command, anything else that calls `os.fork`).

    Why: SQLite keeps, per process, a table of the database files it has open, each with its
    locks and its mapped WAL index (the -shm file), and a new connection to a file already
    open joins that entry. A fork copies the table but not the locks: the fork's connections,
    and those of the workers a fork server forks from it later, read and write through an
    index no other process sees in use. When the last connection elsewhere closes, SQLite
    deletes the -shm and -wal files and the next one creates new ones; the workers kept
    writing frames through the old index, and a checkpoint then copied their pages over the
    wrong ones: a second `run_backfill` in one process, its fork server forked during the
    first, overwrote page 1 of runs.db (issue 50). SQLite's rule: no connection open across
    a fork. The next transaction here opens a new one (~0.1 ms).

    Not guaranteed: a connection checked out by another thread at the fork (inside a
    transaction) is not closed; the engine forks its fork server with one thread running."""
    for engine in list(_ENGINES):
        engine.dispose()


os.register_at_fork(before=_close_before_fork)


class _OneEngine:
    """One SQLAlchemy engine per storage object and process, built on first use, keeping
    its SQLite connections open between transactions."""

    _conn_string: str
    _connect_args: ClassVar[dict[str, Any]] = {}

    @property
    def _engine(self) -> Engine:
        # Keyed by process: a forked child never uses its parent's open connections.
        engines: dict[int, Engine] = self.__dict__.setdefault("_engines_by_pid", {})
        pid = os.getpid()
        if pid not in engines:
            engines.clear()  # the parent's, dropped without closing its connections
            engines[pid] = _pooled_engine(self._conn_string, self._connect_args)
            _ENGINES.add(engines[pid])
        return engines[pid]

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        with self._engine.connect() as connection, connection.begin():
            yield connection

    def _close_connections(self) -> None:
        """Closes this process's open connections; the last one to a WAL database
        checkpoints it and removes its -wal and -shm files, as Dagster's storages leave it."""
        engine = self.__dict__.get("_engines_by_pid", {}).pop(os.getpid(), None)
        if engine is not None:
            engine.dispose()


def _pooled_engine(conn_string: str, connect_args: Mapping[str, Any]) -> Engine:
    """An engine keeping up to `POOLED_CONNECTIONS` SQLite connections open (more are opened
    and closed as needed, never waited for), in `synchronous=NORMAL` on WAL databases.

    Why: Dagster's storages open and close a connection per transaction (NullPool). Closing
    the last connection to a WAL database checkpoints it, and each commit syncs the WAL to
    disk: ~3.4 ms per stored event against ~0.7 ms here (bench/results/node_overhead.md)."""
    engine = create_engine(
        conn_string, poolclass=QueuePool, pool_size=POOLED_CONNECTIONS, max_overflow=-1, connect_args=dict(connect_args)
    )
    event.listen(engine, "connect", _normal_sync_on_wal)
    return engine


def _normal_sync_on_wal(dbapi_connection: sqlite3.Connection, _record: object) -> None:
    """A new SQLite connection's `synchronous=NORMAL` when its database is in WAL mode (NORMAL
    is corruption-safe only with a WAL): a commit appends to the WAL without syncing it to disk;
    the WAL is synced before each checkpoint and the database after it."""
    cursor = dbapi_connection.cursor()
    (journal_mode,) = cursor.execute("PRAGMA journal_mode").fetchone()
    if journal_mode == "wal":
        cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _found_once(check: Callable[..., bool]) -> Callable[..., bool]:
    """`check`, a storage's schema check (is a column or a table there?), answered True from
    memory for the same names once it found them: migrations add columns and tables, never
    drop them. One that found nothing asks the database again next time (a migration may
    run meanwhile). The connection some checks take is not part of the question."""

    @functools.wraps(check)
    def remembered(storage: object, *args: Any) -> bool:
        question = (check.__name__, *(arg for arg in args if isinstance(arg, str)))
        found: set[tuple[str, ...]] = storage.__dict__.setdefault("_schema_found", set())
        if question in found:
            return True
        if check(storage, *args):
            found.add(question)
            return True
        return False

    setattr(remembered, _REMEMBERS, True)
    return remembered


_REMEMBERS = "_partition_assets_found_once"  # marks a check `_found_once` wraps


class ConsolidatedEventLogStorage(_OneEngine, ConsolidatedSqliteEventLogStorage):
    """Dagster's consolidated SQLite event log, one engine for its transactions."""

    has_table = _found_once(ConsolidatedSqliteEventLogStorage.has_table)
    _has_asset_key_col_on_connection = _found_once(ConsolidatedSqliteEventLogStorage._has_asset_key_col_on_connection)

    _connect_args: ClassVar[dict[str, Any]] = {"timeout": SQLITE_BUSY_TIMEOUT_SECONDS}

    @contextmanager
    def _connect(self) -> Iterator[Connection]:
        with self._transaction() as connection:
            yield connection

    def dispose(self) -> None:
        self.__dict__.get("_poll_stop", threading.Event()).set()
        super().dispose()
        self._close_connections()

    def watch(self, run_id: str, cursor: str | None, callback: Any) -> None:
        """Dagster's `watch`, with a watchdog on the database's WAL too (`_WriteWatchdog`), and
        the watched runs read again every WATCH_POLL_SECONDS: a file's change can come before
        the commit it belongs to is visible, and no later change may follow."""
        if not self._obs:
            observer = Observer()
            observer.start()
            observer.schedule(_WriteWatchdog(self), self._base_dir, recursive=True)
            self._obs = observer  # type: ignore[assignment]  # Dagster declares it None until watched
            stop = self.__dict__.setdefault("_poll_stop", threading.Event())
            threading.Thread(target=self._poll, args=(stop,), name="event-log-watch-poll", daemon=True).start()
        self._watchers[run_id][callback] = cursor

    def on_modified(self) -> None:
        """Dagster's: each watcher gets its run's events after its cursor. One reading at a time
        (the watchdog's thread and the poll's): two would deliver the same events twice."""
        with self.__dict__.setdefault("_watch_lock", threading.Lock()):
            super().on_modified()

    def _poll(self, stop: threading.Event) -> None:
        while not stop.wait(WATCH_POLL_SECONDS):
            try:
                self.on_modified()
            except Exception as error:
                if stop.is_set():  # disposed while it read: nothing is watched any more
                    return
                # A read that failed (the database away a moment) is tried again at the next poll.
                _log.warning(
                    "reading the watched runs' new events failed (%s); tried again in %s s", error, WATCH_POLL_SECONDS
                )


class _WriteWatchdog(PatternMatchingEventHandler):
    """Tells `storage` (its `on_modified`: watchers read their runs' new events) when its
    database or the database's WAL changed. Dagster's watches the database alone, written
    when its last connection closes; with connections kept open a commit writes the WAL
    only, and the database changes only at checkpoints. SQLite writes a commit's WAL frames
    before the index (`-shm`, mapped in memory: no file event) that makes them visible, so
    a read on this event can miss that commit: `watch` polls for it."""

    def __init__(self, storage: ConsolidatedEventLogStorage) -> None:
        self._storage = storage
        database = storage.get_db_path()
        super().__init__(patterns=[database, f"{database}-wal"])

    def on_modified(self, event: FileSystemEvent) -> None:
        self._storage.on_modified()


class RunStorage(_OneEngine, SqliteRunStorage):
    """Dagster's SQLite run storage, one engine for its transactions."""

    has_run_stats_index_cols = _found_once(SqliteRunStorage.has_run_stats_index_cols)
    has_backfill_id_column = _found_once(SqliteRunStorage.has_backfill_id_column)
    has_bulk_actions_selector_cols = _found_once(SqliteRunStorage.has_bulk_actions_selector_cols)
    has_bulk_action_job_name_column = _found_once(SqliteRunStorage.has_bulk_action_job_name_column)
    has_backfill_tags_table = _found_once(SqliteRunStorage.has_backfill_tags_table)

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]) -> Self:
        # Dagster's names its own class here, not `cls`.
        return cls.from_local(inst_data=inst_data, **config_value)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self._transaction() as connection:
            yield connection

    def dispose(self) -> None:
        super().dispose()
        self._close_connections()


class RunShardedEventLogStorage(SqliteEventLogStorage):
    """Dagster's default event log (a SQLite database per run, beside the index database),
    writing the same files through the same transactions, each on a connection opened and
    closed for it as Dagster's: closing it checkpoints the database, which is the change a
    webserver's `watch` of the run follows. Cheaper per run in three ways:
    - one SQLAlchemy engine for every database of the storage, in place of one built per
      transaction (~19 per run, its statements compiled anew on each: SQLAlchemy caches
      compiled statements per engine), each connection pointed at its database by
      `do_connect` (`_open_shard`; `_connect` opens one database at a time, under Dagster's
      lock);
    - a run's new database is a copy of an empty one that Dagster's own `_initdb` built once
      per process, when the storage was opened (`_empty_run_database_bytes`): the same schema
      and revision stamp, without ~30 DDL statements and a revision check per run. It is
      linked into place, never over a database another process created meanwhile (that one
      is checked as Dagster checks it);
    - the schema checks Dagster makes on the index per event are answered from memory once
      they found what they look for (`_found_once`), without an engine built per check;
    - a transaction's commit does not sync the WAL to disk (`synchronous=NORMAL`): closing its
      connection, right after, checkpoints the database, which syncs the WAL and then the
      database, as with Dagster's: one wait on the disk fewer per transaction (~33 a node run,
      ~7 ms each on this machine's disk under load: ~0.2 s of a node's wall time), the same
      events on disk once the transaction's connection is closed.

    Not guaranteed: a process keeps its copy of the empty database for its life (a Dagster
    upgraded under it is not seen, as its imported code is not). A transaction whose connection
    was not the last one open on its database (another process's transaction on the index at the
    same time) is synced at the next checkpoint, not at its close: a power loss meanwhile loses
    it (the database stays consistent; a resumed backfill runs that node again). Relies on Dagster's
    `_connect(shard)` seam, `_initdb`, `_initialized_dbs` and `_db_lock` (pinned by the tests).
    """

    has_table = _found_once(SqliteEventLogStorage.has_table)
    _has_asset_key_col_on_connection = _found_once(SqliteEventLogStorage._has_asset_key_col_on_connection)
    _opening: str  # the shard whose database `_connect` is opening

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]) -> Self:
        # Dagster's names its own class here, not `cls`.
        return cls(inst_data=inst_data, **config_value)

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        super().__init__(base_dir, inst_data)
        # Here, before the engine's command forks its workers: they inherit it.
        _empty_run_database_bytes(self._initdb)

    @functools.cached_property
    def _engine(self) -> Engine:
        # NullPool: no connection outlives its transaction, so the engine is safe to fork. Its
        # URL names the index database; `_open_shard` points each connection at its own.
        engine = create_engine(
            self.conn_string_for_shard("index"),
            poolclass=NullPool,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS},
        )
        event.listen(engine, "do_connect", self._open_shard)
        # Each connection is closed after its one transaction, and closing the last connection to
        # a WAL database checkpoints it, syncing the WAL and then the database to disk: a commit
        # that syncs the WAL too (Dagster's `synchronous=FULL`) adds a third wait on the disk per
        # transaction and no durability, the transaction being on disk once its connection closed.
        event.listen(engine, "connect", _normal_sync_on_wal)
        return engine

    def _open_shard(self, _dialect: object, _record: object, args: list[Any], _kwargs: object) -> None:
        """Points the connection being opened at the database of the shard `_connect` opens."""
        args[0] = self.path_for_shard(self._opening)

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            self._opening = shard
            if shard not in self._initialized_dbs:
                if not _created_from_template(self.path_for_shard(shard), self._initdb):
                    self._initdb(self._engine)  # Dagster's: a database that exists is checked, not rebuilt
                self._initialized_dbs.add(shard)
            with self._engine.connect() as connection, connection.begin():
                yield connection


_EMPTY_RUN_DATABASE_LOCK = threading.Lock()
_empty_run_database: list[bytes] = []  # built once per process, inherited by its forks


def _empty_run_database_bytes(initdb: Callable[[Engine], None]) -> bytes:
    """The bytes of an empty run database as `initdb` (Dagster's `_initdb`) builds it, built
    the first time this process asks."""
    with _EMPTY_RUN_DATABASE_LOCK:
        if not _empty_run_database:
            with tempfile.TemporaryDirectory() as folder:
                path = os.path.join(folder, "empty.db")
                engine = create_engine(f"sqlite:///{path}", poolclass=NullPool)
                initdb(engine)
                engine.dispose()
                with open(path, "rb") as built:
                    _empty_run_database.append(built.read())
        return _empty_run_database[0]


def _created_from_template(path: str, initdb: Callable[[Engine], None]) -> bool:
    """Creates the run database `path`, absent, as a copy of the empty one `initdb` (Dagster's
    `_initdb`) builds; False when `path` exists (made by another process) or the copy could not
    be linked into place (the caller then has Dagster build it)."""
    if os.path.exists(path):
        return False
    # Written aside, then linked into place: another process never opens a partial file,
    # and a database it created meanwhile is never replaced.
    partial = f"{path}.{os.getpid()}.{threading.get_ident()}.partial"
    try:
        with open(partial, "wb") as copy:
            copy.write(_empty_run_database_bytes(initdb))
        os.link(partial, path)
    except OSError:  # created meanwhile (FileExistsError), or a filesystem without hard links
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
    return True


class DirectComputeLogManager(LocalComputeLogManager):
    """`LocalComputeLogManager` capturing stdout/stderr into its files by file-descriptor
    redirection alone."""

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> "DirectComputeLogManager":
        return cls(inst_data=inst_data, **config_value)

    @contextmanager
    def capture_logs(self, log_key: Sequence[str]) -> Iterator[CapturedLogContext]:
        paths = {
            io_type: self.get_captured_local_path(log_key, IO_TYPE_EXTENSION[io_type])
            for io_type in (ComputeIOType.STDOUT, ComputeIOType.STDERR)
        }
        for path in paths.values():
            ensure_file(path)
        with (
            redirect_to_file(sys.stdout, paths[ComputeIOType.STDOUT]),
            redirect_to_file(sys.stderr, paths[ComputeIOType.STDERR]),
        ):
            yield CapturedLogContext(log_key)
        # The marker Dagster's webserver reads to stop following the files.
        touch_file(self.complete_artifact_path(log_key))


def _class_data(module: str, name: str, config: Mapping[str, Any]) -> ConfigurableClassData:
    return ConfigurableClassData(module, name, yaml.dump(dict(config), default_flow_style=False))


def instance_storage_defaults(home: str) -> dict[str, ConfigurableClassData | None]:
    """Dagster's instance defaults for the instance at `home`, with `ConsolidatedEventLogStorage`
    and `RunStorage` (in Dagster's composite storage, beside its default schedule storage)
    and `DirectComputeLogManager`."""
    defaults = dict(InstanceRef.config_defaults(home))
    event_log = _class_data(
        __name__, ConsolidatedEventLogStorage.__name__, {"base_dir": os.path.join(home, "history", "consolidated")}
    )
    defaults["run_storage"] = _pooled_runs(defaults["run_storage"])
    defaults["event_log_storage"] = event_log
    defaults["storage"] = _composite(defaults["run_storage"], event_log, defaults["schedule_storage"])
    defaults["compute_logs"] = _class_data(
        __name__, DirectComputeLogManager.__name__, {"base_dir": compute_logs_directory(home)}
    )
    return defaults


def same_files_lighter(ref: InstanceRef) -> InstanceRef:
    """`ref` with those of Dagster's defaults this module has a lighter twin of, writing the
    same files, swapped for the twin: Dagster's default SQLite storage (a dagster.yaml without
    `storage:`, or none) for Dagster's composite of `RunStorage` on the same runs database,
    `RunShardedEventLogStorage` on the same event log databases (one per run) and Dagster's
    schedule storage on its own; Dagster's `LocalComputeLogManager` for
    `DirectComputeLogManager` on the same folder. What the webserver and daemon read is
    unchanged; an instance of this process opened from the result writes runs without a new
    SQLAlchemy engine per transaction, a schema built per run nor four helper processes per
    run. Anything else (the repo's instance class, Postgres) is returned as is.

    Not guaranteed: as `DirectComputeLogManager` says, a step's output no longer also appears
    on this process's terminal. The per-run event log databases are still written on a
    connection per transaction, as Dagster's are (a webserver follows a run by watching its
    database file, which connections kept open would not change)."""
    storage, compute_logs = ref.storage_data, ref.compute_logs_data
    if _is_dagster_default("storage", storage):
        assert storage is not None  # a Dagster default
        defaults = InstanceRef.config_defaults(yaml.safe_load(storage.config_yaml)["base_dir"])
        event_log = defaults["event_log_storage"]
        assert event_log is not None  # Dagster's defaults name every storage
        storage = _composite(
            _pooled_runs(defaults["run_storage"]),
            ConfigurableClassData(__name__, RunShardedEventLogStorage.__name__, event_log.config_yaml),
            defaults["schedule_storage"],
        )
    if _is_dagster_default("compute_logs", compute_logs):
        compute_logs = ConfigurableClassData(__name__, DirectComputeLogManager.__name__, compute_logs.config_yaml)
    return ref._replace(storage_data=storage, compute_logs_data=compute_logs)


def _is_dagster_default(kind: str, data: ConfigurableClassData | None) -> bool:
    """Whether `data` names the class Dagster's instance defaults give `kind` (e.g. "storage")."""
    default = InstanceRef.config_defaults(os.curdir)[kind]
    return data is not None and default is not None and data[:2] == default[:2]  # module and class


def _pooled_runs(runs: ConfigurableClassData | None) -> ConfigurableClassData:
    """`RunStorage` on the runs database of Dagster's SQLite run storage `runs`."""
    assert runs is not None  # Dagster's defaults name every storage
    return ConfigurableClassData(__name__, RunStorage.__name__, runs.config_yaml)


def _composite(
    runs: ConfigurableClassData | None, event_log: ConfigurableClassData | None, schedules: ConfigurableClassData | None
) -> ConfigurableClassData:
    """Dagster's composite storage of the three storages named."""

    def part(data: ConfigurableClassData | None) -> dict[str, str]:
        assert data is not None  # Dagster's defaults name every storage
        return {"module_name": data.module_name, "class_name": data.class_name, "config_yaml": data.config_yaml}

    return _class_data(
        "dagster._core.storage.legacy_storage",
        "CompositeStorage",
        {"run_storage": part(runs), "event_log_storage": part(event_log), "schedule_storage": part(schedules)},
    )


def keep_connections(instance: "DagsterInstance") -> None:
    """Has `instance`'s storages on a database server (Postgres) keep a connection open in
    this process, as Dagster's webserver has them do (`optimize_for_webserver`), rather than
    connect anew for every transaction: ~35 connections per node run, each a connection set-up
    and a server process started on Postgres. No statement timeout is set. Storages that keep
    no server connection (SQLite) are unchanged.

    Call it in the process that uses the instance, after the last fork that inherits it: a
    connection open before a fork would be shared by both processes (the engine calls it in
    its coordinator once its workers' fork server is started, and in each worker).
    A kept connection the server closed meanwhile (Postgres restarted, or failed over) is
    replaced when next checked out (`_ping_kept_connection`), never handed to a transaction,
    which would fail with `server closed the connection unexpectedly`.
    Not guaranteed: one connection is kept per storage; a thread that needs one while another
    holds it opens and closes an extra one, as before. A transaction under way when the server
    goes fails."""
    if not event.contains(Pool, "checkout", _ping_kept_connection):
        event.listen(Pool, "checkout", _ping_kept_connection)
    instance.optimize_for_webserver(
        statement_timeout=0, pool_recycle=POOL_RECYCLE_SECONDS, max_overflow=POOLED_CONNECTIONS
    )


# Dagster's schema checks asked of a database on every run (whether a column or table that a
# migration adds is there yet), per storage kind: `_found_once` answers them from memory.
_RUN_SCHEMA_CHECKS = (
    "has_run_stats_index_cols",
    "has_backfill_id_column",
    "has_bulk_actions_selector_cols",
    "has_bulk_action_job_name_column",
    "has_backfill_tags_table",
)
_EVENT_LOG_SCHEMA_CHECKS = ("has_table", "_has_asset_key_col_on_connection")


def remember_schema_checks(instance: "DagsterInstance") -> None:
    """Has `instance`'s run and event log storages answer Dagster's schema checks from memory
    in this process once a check found what it looks for (`_found_once`), as this module's
    SQLite storages do: on Postgres (README's storage block) Dagster reflects a table's columns
    for ~8 checks per node run, each a query of the server's catalog (~0.3 s of CPU over 29 node
    runs, profiled). Storages whose class already remembers them (this module's) are unchanged.

    Not guaranteed: a column or table dropped from the database while the process runs is still
    reported there (Dagster's migrations only add them)."""
    for storage, checks in (
        (instance.run_storage, _RUN_SCHEMA_CHECKS),
        (instance.event_log_storage, _EVENT_LOG_SCHEMA_CHECKS),
    ):
        for name in checks:
            check = getattr(type(storage), name, None)
            if check is None or getattr(check, _REMEMBERS, False) or name in storage.__dict__:
                continue
            setattr(storage, name, functools.partial(_found_once(check), storage))


def _ping_kept_connection(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """At each checkout of a pooled database server connection (not SQLite's: a file), a
    `SELECT 1`; a connection that fails it is dropped and a new one opened, by SQLAlchemy's
    pool on DisconnectionError (its documented pessimistic disconnect handling)."""
    if isinstance(dbapi_connection, sqlite3.Connection):
        return
    try:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("SELECT 1")
        finally:
            cursor.close()
    except Exception as error:  # the driver's own errors (psycopg2.OperationalError, InterfaceError)
        _log.warning("a kept database connection was closed by the server (restarted?): connecting again")
        raise DisconnectionError(f"a kept connection was closed by the server: {error}") from error


class _Outage:
    """This process's view of its database server's outages, shared by its threads: when the
    current one began, whether it was logged, whether a call gave up on it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.riders = 0  # the blocks `riding_out_database_restarts` has open in this process
        self.pid = os.getpid()
        self.window = DATABASE_OUTAGE_SECONDS  # the window of the last block entered
        self._since: float | None = None
        self._gave_up = False

    def riding_out(self, dialect: Dialect) -> bool:
        """Whether calls on `dialect` ride out an outage now: a database server's (not a
        SQLite file's), in a `riding_out_database_restarts` block of this process (not of a fork)."""
        return self.riders > 0 and self.pid == os.getpid() and dialect.name != "sqlite"

    def wait(self, error: BaseException, attempt: int) -> None:
        """Waits before the next attempt of a call that failed with `error` (a lost connection);
        DatabaseUnreachableError once the outage lasted the window, at once for every call
        after one gave up, until the server answers again."""
        window = self.window
        cause = f"{type(error).__name__}: {' '.join(str(error).split())}"  # the driver's message spans lines
        with self._lock:
            now = time.monotonic()
            if self._since is None:
                self._since = now
                _log.warning(
                    "the instance's database is unreachable (%s): retrying for up to %g s (%s)",
                    cause,
                    window,
                    DATABASE_OUTAGE_SECONDS_ENV,
                )
            lasted = now - self._since
            if self._gave_up or lasted >= window:
                self._gave_up = True
                raise DatabaseUnreachableError(
                    f"the instance's database was unreachable for {lasted:.0f} s (the limit, "
                    f"{DATABASE_OUTAGE_SECONDS_ENV}, is {window:g} s): {cause}"
                ) from error
        time.sleep(min(_OUTAGE_FIRST_WAIT_SECONDS * 2**attempt, _OUTAGE_LONGEST_WAIT_SECONDS, window - lasted))

    def over(self) -> None:
        """The server answered: the outage, if any, is over (logged with how long it lasted)."""
        if self._since is None:
            return
        with self._lock:
            if self._since is not None:
                lasted = time.monotonic() - self._since
                _log.warning("the instance's database is back, after %.1f s unreachable", lasted)
            self.forget()

    def forget(self) -> None:
        """No outage under way (under the lock)."""
        self._since, self._gave_up = None, False


_OUTAGE = _Outage()


@contextmanager
def riding_out_database_restarts(window: float = DATABASE_OUTAGE_SECONDS) -> Iterator[None]:
    """While the block runs, this process's calls to a database server (the instance's
    Postgres: its run, event log and schedule storages, the backfill records kept there) ride
    out a restart of the server (`pg_ctl stop -m immediate` then start, a failover) rather than
    fail: for up to `window` seconds (the coordinator's: PARTITION_ASSETS_DATABASE_OUTAGE_SECONDS)
    from the first failed attempt,
    - a connection the server refuses is attempted again, with a backoff (`_connect_riding_out`),
      where Dagster gives up after ~6 s (`too many retries for DB connection`);
    - a statement cut by a lost connection (the DBAPI's disconnect, SQLAlchemy's
      `is_disconnect`) runs again on a new connection (`_execute_riding_out`), as SQLAlchemy's
      FAQ recipe "How do I retry a statement execution automatically?" does: only on an
      autocommit connection (Dagster's Postgres storages and the backfill records use one),
      where each statement is a transaction of its own, so a statement run again is one the
      server lost or one it committed whose answer was lost.
    A line says when the database became unreachable, another when it is back. Past the window
    the call raises DatabaseUnreachableError (at once for every call after it, until the server
    answers again). Other errors (a constraint, a programming error, SQLite's) are not retried.
    A forked child does not ride out its parent's block.

    Not guaranteed: a statement the server committed before the connection was cut (its answer
    lost in the instant of the crash) runs again: an insert with no key then writes its row twice
    (an event), one with a key fails as a duplicate, a compare-and-set (a backfill record's status)
    finds its own write and starts over from it, which the transition table may refuse
    (IllegalTransitionError, the backfill then stops as on any error). A statement on a
    connection in an explicit transaction (not autocommit) is not retried, nor an executemany. A
    connect the server refuses for another reason (a password changed meanwhile) is attempted
    again as well, until the window ends with its message. A connect hook of the
    engine's own (Dagster's token provider) may run after this one and is then skipped. Blocks
    open at once (coordinators of one process) share the window of the last one entered."""
    with _OUTAGE._lock:
        if not event.contains(Engine, "do_connect", _connect_riding_out):
            event.listen(Engine, "do_connect", _connect_riding_out)
            event.listen(Engine, "do_execute", _execute_riding_out)
            event.listen(Engine, "do_execute_no_params", _execute_no_params_riding_out)
        if _OUTAGE.pid != os.getpid():  # a fork's count starts again
            _OUTAGE.pid, _OUTAGE.riders = os.getpid(), 0
        if _OUTAGE.riders == 0:  # an outage no block saw end is not this one's
            _OUTAGE.forget()
        _OUTAGE.riders += 1
        _OUTAGE.window = window
    try:
        yield
    finally:
        with _OUTAGE._lock:
            _OUTAGE.riders -= 1


def _connect_riding_out(dialect: Dialect, _record: object, cargs: list[Any], cparams: dict[str, Any]) -> Any:
    """A new DBAPI connection, attempted again while the server refuses it (see
    `riding_out_database_restarts`); None (SQLAlchemy's own connect) when not riding out."""
    if not _OUTAGE.riding_out(dialect):
        return None
    attempt = 0
    while True:
        try:
            connection = dialect.connect(*cargs, **cparams)
        except dialect.loaded_dbapi.OperationalError as error:
            _OUTAGE.wait(error, attempt)
            attempt += 1
        else:
            _OUTAGE.over()
            return connection


def _execute_riding_out(cursor: Any, statement: str, parameters: Any, context: ExecutionContext) -> bool | None:
    return _run_riding_out(context.dialect.do_execute, cursor, statement, (parameters,), context)


def _execute_no_params_riding_out(cursor: Any, statement: str, context: ExecutionContext) -> bool | None:
    return _run_riding_out(context.dialect.do_execute_no_params, cursor, statement, (), context)


def _run_riding_out(
    execute: Callable[..., None],
    cursor: Any,
    statement: str,
    parameters: tuple[Any, ...],
    context: ExecutionContext,
) -> bool | None:
    """Runs `statement` on an autocommit connection, again on a new connection when a lost
    connection cut it (see `riding_out_database_restarts`); None (SQLAlchemy runs it as ever)
    when not riding out."""
    dialect = context.dialect
    if not _OUTAGE.riding_out(dialect):
        return None
    connection = context.root_connection
    if getattr(connection.connection.dbapi_connection, "autocommit", False) is not True:
        return None
    attempt = 0
    while True:
        try:
            execute(cursor, statement, *parameters, context)
        except dialect.loaded_dbapi.Error as error:
            if not dialect.is_disconnect(error, connection.connection.dbapi_connection, cursor):
                raise
            _OUTAGE.wait(error, attempt)
            attempt += 1
            connection.invalidate()
            connection.rollback()  # of SQLAlchemy's transaction, for the new connection: none on the server
            cursor = context.cursor = connection.connection.cursor()
        else:
            _OUTAGE.over()
            return True
