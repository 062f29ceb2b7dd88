"""The engine instance's storage defaults (the repo's dagster.yaml): one event log for every
run, followed live across processes as the webserver does; runs' output captured without
helper processes; Dagster's per-run schema checks answered from memory once they found
what they look for; a `storage:` block still takes precedence. Dagster's own defaults (no
dagster.yaml) written by the engine's command through lighter twins, into the same files."""

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import dagster as dg
import psycopg2
import pytest
import yaml
from dagster._core.storage.event_log import ConsolidatedSqliteEventLogStorage
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from sqlalchemy import Connection, Engine, event
from sqlalchemy.engine.reflection import Inspector

from partition_assets.backfill.commands import SilentConsole, run_backfill
from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing.dagster_events import PUBLISH_RUN_TAG
from partition_assets.backfill.running.progress import Tally
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.dagster_instance.storage import (
    DATABASE_OUTAGE_SECONDS_ENV,
    POOLED_CONNECTIONS,
    ConsolidatedEventLogStorage,
    DirectComputeLogManager,
    RunShardedEventLogStorage,
    RunStorage,
    keep_connections,
    remember_schema_checks,
    riding_out_database_restarts,
    same_files_lighter,
)
from partition_assets.errors import DatabaseUnreachableError
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets_tests.support import REPO
from partition_assets_tests.support.instances import instance_env, open_instance
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.postgres import PostgresServer
from partition_assets_tests.support.records import recorded_backfill, recorded_ids

LOG_HELPERS = ("tail", "watch_orphans")


def _log_helper_children() -> list[str]:
    """Command lines of this process's children that mirror captured logs (Dagster's `tail -F`
    and its orphan watcher)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):  # the process ended meanwhile
            continue
        if parent == os.getpid() and any(helper in command for helper in LOG_HELPERS):
            found.append(command)
    return found


@dg.asset
def talkative(context: dg.AssetExecutionContext) -> None:
    print("to stdout from the step", flush=True)
    print("to stderr from the step", file=sys.stderr, flush=True)
    context.add_output_metadata({"log_helpers": len(_log_helper_children())})


def test_output_is_captured_into_the_run_logs_without_helper_processes(tmp_path):
    with open_instance(instance_env(tmp_path / "home")) as instance:
        assert isinstance(instance.compute_log_manager, DirectComputeLogManager)
        result = dg.materialize([talkative], instance=instance)

        assert result.success
        [materialization] = result.asset_materializations_for_node("talkative")
        assert materialization.metadata["log_helpers"].value == 0
        [captured] = [
            event
            for event in instance.all_logs(result.run_id)
            if event.dagster_event and event.dagster_event.event_type == dg.DagsterEventType.LOGS_CAPTURED
        ]
        log_key = instance.compute_log_manager.build_log_key_for_run(
            result.run_id, captured.dagster_event.logs_captured_data.file_key
        )
        logs = instance.compute_log_manager.get_log_data(log_key)
        assert b"to stdout from the step" in logs.stdout
        assert b"to stderr from the step" in logs.stderr
        # The marker the webserver reads to stop following the files.
        assert instance.compute_log_manager.is_capture_complete(log_key)


RUN_IN_ANOTHER_PROCESS = """
import sys, dagster as dg
from partition_assets.dagster_instance.storage import same_files_lighter
@dg.asset
def elsewhere() -> None:
    pass
with dg.DagsterInstance.get() as stock:
    ref = same_files_lighter(stock.get_ref()) if sys.argv[2] == "lighter" else stock.get_ref()
with dg.DagsterInstance.from_ref(ref) as instance:
    job = dg.Definitions(assets=[elsewhere]).resolve_implicit_global_asset_job_def()
    job.execute_in_process(instance=instance, run_id=sys.argv[1])
"""


def _events_seen_live(instance: dg.DagsterInstance, env: dict[str, str], writer: str) -> list[dg.DagsterEventType]:
    """The event types `instance` tells a watcher of a run (what the webserver's run view
    subscribes to) that another process runs on the same home, through its instance as is
    (`writer` "stock") or through `same_files_lighter` ("lighter"), by the run's success."""
    run_id = str(uuid.uuid4())
    seen: list[dg.DagsterEventType] = []
    instance.watch_event_logs(
        run_id, None, lambda entry, cursor: seen.append(entry.dagster_event and entry.dagster_event.event_type)
    )
    subprocess.run(
        [sys.executable, "-c", RUN_IN_ANOTHER_PROCESS, run_id, writer],
        env={**os.environ, **env},
        check=True,
        timeout=120,
    )
    wait_for(lambda: dg.DagsterEventType.RUN_SUCCESS in seen, timeout=30)
    return seen


def test_events_of_a_run_in_another_process_reach_a_live_watcher(tmp_path):
    env = instance_env(tmp_path / "home")
    with open_instance(env) as instance:
        assert isinstance(instance.event_log_storage, ConsolidatedSqliteEventLogStorage)
        seen = _events_seen_live(instance, env, "stock")
    assert dg.DagsterEventType.RUN_START in seen
    assert dg.DagsterEventType.ASSET_MATERIALIZATION in seen


# Stores one event of a run per line read, in `synchronous=FULL`: SQLite then syncs a commit's
# WAL frames before it writes the index that makes them visible, which widens the moment in
# which the WAL's change is seen but the commit is not (on a disk: the test's home is not in
# the tmpfs the suite's temporary folders are, where a sync costs nothing).
WRITE_EVENTS_ONE_BY_ONE = """
import sys, time, dagster as dg
from dagster._core.events.log import EventLogEntry
from sqlalchemy import event
with dg.DagsterInstance.get() as instance:
    storage = instance.event_log_storage
    event.listen(storage._engine, "connect", lambda connection, _: connection.execute("PRAGMA synchronous=FULL"))
    for line in sys.stdin:
        storage.store_event(EventLogEntry(
            error_info=None, level="INFO", user_message=line.strip(), run_id=sys.argv[1],
            timestamp=time.time(), step_key=None, job_name=None, dagster_event=None,
        ))
        print("stored", flush=True)
"""


@pytest.fixture
def disk_path() -> Iterator[Path]:
    """A folder on a disk (/var/tmp), removed after the test."""
    folder = Path(tempfile.mkdtemp(prefix="partition_assets_tests_", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_each_event_reaches_a_live_watcher_though_no_later_write_follows(disk_path):
    env = instance_env(disk_path / "home")
    with open_instance(env) as instance:
        run_id = str(uuid.uuid4())
        seen: list[str] = []
        instance.watch_event_logs(run_id, None, lambda entry, cursor: seen.append(entry.user_message))
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITE_EVENTS_ONE_BY_ONE, run_id],
            env={**os.environ, **env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            for number in range(5):
                writer.stdin.write(f"event {number}\n")
                writer.stdin.flush()
                assert writer.stdout.readline() == "stored\n"
                wait_for(lambda number=number: f"event {number}" in seen, timeout=30, alive=[writer])
        finally:
            writer.stdin.close()
            writer.wait(timeout=120)
    assert seen == [f"event {number}" for number in range(5)]


def test_events_the_engine_writes_on_dagster_s_defaults_reach_a_stock_live_watcher(tmp_path):
    # No dagster.yaml: a run database per run. The engine's command writes them through
    # RunShardedEventLogStorage; the webserver follows a run by watching its database file.
    env = {"DAGSTER_HOME": str(tmp_path)}
    with open_instance(env) as stock:
        assert type(stock.event_log_storage) is SqliteEventLogStorage
        seen = _events_seen_live(stock, env, "lighter")
    assert dg.DagsterEventType.RUN_START in seen
    assert dg.DagsterEventType.ASSET_MATERIALIZATION in seen


def test_the_defaults_live_under_the_instances_own_home_and_yield_to_dagster_yaml(tmp_path, monkeypatch):
    home = tmp_path / "home"
    instance_env(home)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "another"))  # opened by path: its own folders
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.event_log_storage.get_db_path() == str(home / "history" / "consolidated" / "event_log.db")
        assert instance.compute_log_manager._base_dir == str(home / "storage")
        assert isinstance(instance.run_storage, RunStorage)
        assert instance.run_storage._conn_string.endswith(str(home / "history" / "runs.db"))
    config = (home / "dagster.yaml").read_text()
    (home / "dagster.yaml").write_text(
        config + "storage:\n  sqlite:\n    base_dir: " + str(home) + "\n"
        "compute_logs:\n  module: dagster._core.storage.noop_compute_log_manager\n  class: NoOpComputeLogManager\n"
    )
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.event_log_storage) is SqliteEventLogStorage
        assert type(instance.compute_log_manager).__name__ == "NoOpComputeLogManager"


def test_a_dagster_yaml_naming_the_storages_by_their_former_module_still_opens_on_them(tmp_path):
    """dagster.yaml files written before the storages moved to partition_assets.dagster_instance
    name `partition_assets.instance.storage`: they open on the same classes."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        yaml.safe_dump(
            {
                "event_log_storage": {
                    "module": "partition_assets.instance.storage",
                    "class": "ConsolidatedEventLogStorage",
                    "config": {"base_dir": str(home / "history" / "consolidated")},
                },
                "run_storage": {
                    "module": "partition_assets.instance.storage",
                    "class": "RunStorage",
                    "config": {"base_dir": str(home / "history")},
                },
                "compute_logs": {
                    "module": "partition_assets.instance.storage",
                    "class": "DirectComputeLogManager",
                    "config": {"base_dir": str(home / "storage")},
                },
            }
        )
    )
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.event_log_storage) is ConsolidatedEventLogStorage
        assert type(instance.run_storage) is RunStorage
        assert type(instance.compute_log_manager) is DirectComputeLogManager


@dg.asset(partitions_def=dg.DailyPartitionsDefinition("2024-01-01"))
def daily_quiet() -> None:
    pass


def _reflections(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SQLAlchemy schema reflections made from now on (each one's method name)."""
    reflected: list[str] = []
    for method in ("get_columns", "get_table_names", "has_table"):
        original = getattr(Inspector, method)

        def counting(inspector: Inspector, *args: object, _method=method, _original=original, **kwargs: object):
            reflected.append(_method)
            return _original(inspector, *args, **kwargs)

        monkeypatch.setattr(Inspector, method, counting)
    return reflected


def test_a_run_after_the_first_reflects_no_table_of_the_storages(tmp_path, monkeypatch):
    # Dagster checks its schema on every run (columns of the runs table, of the asset keys
    # table, tables of the event log); once a check found what it looks for, it is not
    # asked of the database again in this process.
    reflected = _reflections(monkeypatch)
    with open_instance(instance_env(tmp_path / "home")) as instance:
        assert dg.materialize([daily_quiet], instance=instance, partition_key="2024-01-01").success
        assert reflected  # the first run's checks ask the database
        reflected.clear()
        assert dg.materialize([daily_quiet], instance=instance, partition_key="2024-01-02").success
        assert reflected == []


def test_a_postgres_instance_reflects_no_table_after_the_first_run_once_told(tmp_path, postgres_server, monkeypatch):
    # On Postgres (README's storage block) Dagster's storages reflect a table's columns for
    # ~8 schema checks per run; the engine's processes have them answered from memory.
    reflected = _reflections(monkeypatch)
    with open_instance(instance_env(tmp_path / "pg", postgres_server.create_database())) as instance:
        for day in ("2024-01-01", "2024-01-02"):
            reflected.clear()
            assert dg.materialize([daily_quiet], instance=instance, partition_key=day).success
        assert reflected  # Dagster's: asked again on every run
        remember_schema_checks(instance)
        for day in ("2024-01-03", "2024-01-04"):
            reflected.clear()
            assert dg.materialize([daily_quiet], instance=instance, partition_key=day).success
        assert reflected == []
        assert instance.get_run_records(limit=1)  # the runs are read back as before


def test_dagster_s_default_storage_is_written_through_lighter_twins_a_stock_instance_reads(tmp_path, monkeypatch):
    # No dagster.yaml: what a new project has. The engine's command opens it through
    # same_files_lighter: runs through connections kept open, output captured without helper
    # processes, into the files a stock instance (the webserver's) reads.
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    runs_db_connections: list[str] = []
    connect = sqlite3.dbapi2.connect  # the module SQLAlchemy's SQLite dialect calls

    def counted(database: str, *args: object, **kwargs: object) -> sqlite3.Connection:
        if str(database).endswith("runs.db"):
            runs_db_connections.append(str(database))
        return connect(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3.dbapi2, "connect", counted)

    def runs_db_connections_of_runs(instance: dg.DagsterInstance, count: int) -> tuple[int, list[str]]:
        assert dg.materialize([talkative], instance=instance).success  # storage created, engines built
        runs_db_connections.clear()
        run_ids = []
        for _ in range(count):
            result = dg.materialize([talkative], instance=instance)
            assert result.success
            [materialization] = result.asset_materializations_for_node("talkative")
            helpers = materialization.metadata["log_helpers"].value
            assert helpers == 0 if isinstance(instance.compute_log_manager, DirectComputeLogManager) else helpers > 0
            run_ids.append(result.run_id)
        return len(runs_db_connections), run_ids

    with dg.DagsterInstance.get() as stock:
        stock_connections, _ = runs_db_connections_of_runs(stock, 3)
        lighter = same_files_lighter(stock.get_ref())
    assert stock_connections >= 3 * 5  # Dagster's: a connection per transaction, several per run
    with dg.DagsterInstance.from_ref(lighter) as instance:
        assert isinstance(instance.compute_log_manager, DirectComputeLogManager)
        lighter_connections, run_ids = runs_db_connections_of_runs(instance, 3)
    assert lighter_connections <= POOLED_CONNECTIONS  # kept open across transactions and runs

    with dg.DagsterInstance.get() as stock:  # what the webserver reads
        assert isinstance(stock.event_log_storage, SqliteEventLogStorage) and stock.event_log_storage.is_run_sharded
        for run_id in run_ids:
            assert stock.get_run_by_id(run_id).status == dg.DagsterRunStatus.SUCCESS
            [captured] = [
                event
                for event in stock.all_logs(run_id)
                if event.dagster_event and event.dagster_event.event_type == dg.DagsterEventType.LOGS_CAPTURED
            ]
            log_key = stock.compute_log_manager.build_log_key_for_run(
                run_id, captured.dagster_event.logs_captured_data.file_key
            )
            assert b"to stdout from the step" in stock.compute_log_manager.get_log_data(log_key).stdout
            assert stock.compute_log_manager.is_capture_complete(log_key)


def _schema(database: Path) -> tuple[list[tuple[str, ...]], list[tuple[str]]]:
    """The tables and indexes of the SQLite database `database`, and its alembic revision."""
    with closing(sqlite3.connect(database)) as connection:
        tables = connection.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name").fetchall()
        return tables, connection.execute("SELECT version_num FROM alembic_version").fetchall()


def test_run_databases_on_dagster_s_defaults_are_written_through_one_engine_without_schema_statements(
    tmp_path, monkeypatch
):
    # No dagster.yaml: Dagster's event log builds a SQLAlchemy engine per transaction (its
    # statements compiled anew) and each run's database with its whole schema. The engine's
    # command (same_files_lighter) writes the same databases, schema and events, without.
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    statements: list[tuple[Engine, str]] = []

    def executed(connection: Connection, _cursor: object, statement: str, *_args: object) -> None:
        if f"{os.sep}history{os.sep}runs{os.sep}" in str(connection.engine.url):  # the event log's databases
            statements.append((connection.engine, statement))

    def three_runs(instance: dg.DagsterInstance) -> list[str]:
        assert dg.materialize([daily_quiet], instance=instance, partition_key="2024-01-01").success
        statements.clear()  # from the second run on
        return [
            dg.materialize([daily_quiet], instance=instance, partition_key=f"2024-01-0{day}").run_id
            for day in (2, 3, 4)
        ]

    event.listen(Engine, "before_cursor_execute", executed)
    try:
        with dg.DagsterInstance.get() as stock:
            stock_runs = three_runs(stock)
            stock_statements = list(statements)
            lighter = same_files_lighter(stock.get_ref())
        with dg.DagsterInstance.from_ref(lighter) as instance:
            assert type(instance.event_log_storage) is RunShardedEventLogStorage
            runs = three_runs(instance)
    finally:
        event.remove(Engine, "before_cursor_execute", executed)

    def schema_statements(executed: list[tuple[Engine, str]]) -> list[str]:
        return [statement for _, statement in executed if statement.lstrip().upper().startswith("CREATE")]

    assert len(schema_statements(stock_statements)) >= 3 * 10  # each run's database built anew
    assert len({engine for engine, _ in stock_statements}) >= 3 * 5  # an engine per transaction
    assert schema_statements(statements) == []
    assert len({engine for engine, _ in statements}) == 1
    databases = tmp_path / "history" / "runs"
    assert _schema(databases / f"{runs[0]}.db") == _schema(databases / f"{stock_runs[0]}.db")
    with dg.DagsterInstance.get() as stock:  # what the webserver reads
        for run_id, stock_run_id in zip(runs, stock_runs, strict=True):
            assert stock.get_run_by_id(run_id).status == dg.DagsterRunStatus.SUCCESS
            assert [event.dagster_event_type for event in stock.all_logs(run_id)] == [
                event.dagster_event_type for event in stock.all_logs(stock_run_id)
            ]
    assert not list(databases.glob("*.partial"))


def test_run_database_commits_on_dagster_s_defaults_leave_the_disk_sync_to_the_checkpoint(tmp_path, monkeypatch):
    # Dagster's event log on its defaults commits each transaction in `synchronous=FULL` (a sync
    # of the WAL to disk) and then closes its connection, which checkpoints the database (a sync
    # of the WAL, then of the database). The engine's twin commits in NORMAL: the checkpoint
    # alone syncs, one wait on the disk fewer per transaction, the same events read back.
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    levels: list[int] = []  # the synchronous level of each event log write's connection

    def executed(connection: Connection, cursor: sqlite3.Cursor, statement: str, *_args: object) -> None:
        written = statement.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))
        if written and f"{os.sep}history{os.sep}runs{os.sep}" in str(connection.engine.url):  # the event log's
            levels.append(cursor.connection.execute("PRAGMA synchronous").fetchone()[0])

    def a_run(instance: dg.DagsterInstance, day: int) -> str:
        levels.clear()
        result = dg.materialize([daily_quiet], instance=instance, partition_key=f"2024-01-0{day}")
        assert result.success
        return result.run_id

    event.listen(Engine, "before_cursor_execute", executed)
    try:
        with dg.DagsterInstance.get() as stock:
            stock_run = a_run(stock, 1)
            stock_levels = list(levels)
            lighter = same_files_lighter(stock.get_ref())
        with dg.DagsterInstance.from_ref(lighter) as instance:
            run = a_run(instance, 2)
    finally:
        event.remove(Engine, "before_cursor_execute", executed)

    full, normal = 2, 1  # SQLite's PRAGMA synchronous values
    assert stock_levels and set(stock_levels) == {full}
    assert levels and set(levels) == {normal}
    with dg.DagsterInstance.get() as stock:  # what the webserver reads
        assert [event.dagster_event_type for event in stock.all_logs(run)] == [
            event.dagster_event_type for event in stock.all_logs(stock_run)
        ]


def test_a_configured_instance_is_left_as_it_is(tmp_path):
    with open_instance(instance_env(tmp_path / "home")) as instance:
        assert same_files_lighter(instance.get_ref()) == instance.get_ref()


def test_a_postgres_instance_keeps_its_connections_once_told_and_sqlite_is_unchanged(
    tmp_path, postgres_server, monkeypatch
):
    # Dagster's Postgres storages connect anew for every transaction: tens of connection
    # set-ups (and server processes) per run. The engine's processes keep one per storage.
    connections: list[object] = []
    connect = psycopg2.connect

    def counted(*args: object, **kwargs: object) -> object:
        connections.append(args)
        return connect(*args, **kwargs)

    monkeypatch.setattr(psycopg2, "connect", counted)

    def connections_per_run(instance: dg.DagsterInstance) -> float:
        assert dg.materialize([daily_quiet], instance=instance, partition_key="2024-01-01").success
        connections.clear()
        for day in ("2024-01-02", "2024-01-03", "2024-01-04"):
            assert dg.materialize([daily_quiet], instance=instance, partition_key=day).success
        return len(connections) / 3

    with open_instance(instance_env(tmp_path / "pg", postgres_server.create_database())) as instance:
        assert connections_per_run(instance) >= 10
        keep_connections(instance)
        # Those kept after the first run serve every later one, but for at most one (a
        # transaction of a second thread, while another holds the storage's connection).
        assert connections_per_run(instance) <= 1
    with open_instance(instance_env(tmp_path / "sqlite")) as instance:
        keep_connections(instance)
        assert dg.materialize([daily_quiet], instance=instance, partition_key="2024-01-01").success


def test_kept_connections_outlive_a_postgres_restart(tmp_path):
    """Issue 55, found by the soak (bench/soak/, seed 2): after `pg_ctl stop -m immediate` and a
    start, every node run in flight failed on its worker's kept connection (`server closed the
    connection unexpectedly`), failing the backfill. A server of its own: the session's is shared."""
    with (
        PostgresServer() as server,
        open_instance(instance_env(tmp_path / "pg", server.create_database())) as instance,
    ):
        keep_connections(instance)
        assert dg.materialize([daily_quiet], instance=instance, partition_key="2024-01-01").success
        server.crash_and_restart()
        assert dg.materialize([daily_quiet], instance=instance, partition_key="2024-01-02").success
        assert len(instance.get_runs()) == 2


# One node run at a time: none is in flight between two (the crash lands there).
BACKFILL_OF_THREE_DAYS = BackfillSpec(
    module="partition_assets_tests.support.locations.engine_defs",
    selection="key:raw",
    start="2024-01-01",
    end="2024-01-03",
    max_parallel=1,
)


class CrashUnderCoordinatorQuery(SilentConsole):
    """A backfill's console that crashes `server` (`pg_ctl stop -m immediate`) as the
    coordinator (this process's main thread) sends its first query of the backfill records
    after its first node finished, so that the query meets a cut connection, as the soak's
    Postgres fault did; the server starts again `down_for` seconds later (None: not here)."""

    def __init__(self, server: PostgresServer, down_for: float | None) -> None:
        self._server, self._down_for = server, down_for
        self._pid = os.getpid()  # the workers forked from this process inherit the listener
        self._node_finished = False
        self.restart: threading.Timer | None = None

    def node(self, text: str, tally: Tally) -> None:
        self._node_finished = True  # with max_parallel 1, no node run is in flight until the next launch

    def before_cursor_execute(self, conn, cursor, statement, parameters, context, executemany) -> None:
        if (
            self._node_finished
            and self.restart is None
            and os.getpid() == self._pid
            and threading.current_thread() is threading.main_thread()
            and "partition_assets_backfills" in statement
        ):
            self._server.crash()
            self.restart = threading.Timer(self._down_for or 0, self._server.start_again)
            if self._down_for is not None:
                self.restart.start()


def test_a_backfill_rides_out_a_postgres_restart_under_its_coordinators_query(tmp_path, caplog):
    """Issue 55, found by the soak (bench/soak/): a query of the coordinator in flight as
    Postgres stopped (`pg_ctl stop -m immediate`, started again seconds later) failed the
    whole backfill, its leases parked. Now the query runs again once the server is back, the
    backfill publishes without a resume, and its log names the outage. A server of its own."""
    with (
        PostgresServer() as server,
        open_instance(instance_env(tmp_path / "pg", server.create_database())) as instance,
    ):
        console = CrashUnderCoordinatorQuery(server, down_for=2.0)
        event.listen(Engine, "before_cursor_execute", console.before_cursor_execute)
        try:
            outcome = run_backfill(BACKFILL_OF_THREE_DAYS, instance, console)
        finally:
            event.remove(Engine, "before_cursor_execute", console.before_cursor_execute)
        assert console.restart is not None, "no query of the coordinator met the crash"
        console.restart.join()
        assert outcome.succeeded, outcome.message
        assert BackfillStore(instance).status(outcome.backfill_id) == BackfillStatus.PUBLISHED
    assert "the instance's database is unreachable" in caplog.text
    assert "the instance's database is back, after" in caplog.text


def test_a_backfill_whose_database_stays_away_stops_naming_the_resume(tmp_path, monkeypatch):
    """Past PARTITION_ASSETS_DATABASE_OUTAGE_SECONDS the backfill stops with DatabaseUnreachableError,
    which says for how long and names the `resume` that goes on."""
    monkeypatch.setenv(DATABASE_OUTAGE_SECONDS_ENV, "1")
    with (
        PostgresServer() as server,
        open_instance(instance_env(tmp_path / "pg", server.create_database())) as instance,
    ):
        console = CrashUnderCoordinatorQuery(server, down_for=None)
        event.listen(Engine, "before_cursor_execute", console.before_cursor_execute)
        try:
            with pytest.raises(DatabaseUnreachableError) as stopped:
                run_backfill(BACKFILL_OF_THREE_DAYS, instance, console)
        finally:
            event.remove(Engine, "before_cursor_execute", console.before_cursor_execute)
        server.start_again()
        (backfill_id,) = BackfillStore(instance).ids()
        assert re.fullmatch(
            rf"backfill {backfill_id} stopped: the instance's database was unreachable for \d+ s .*"
            rf"`partition-assets backfill resume {backfill_id}` goes on\.",
            str(stopped.value),
        ), stopped.value
        # Its status could not be written: it shows running, its coordinator silent once its process
        # is gone, which the resume takes over (test_store.py).
        assert BackfillStore(instance).status(backfill_id) == BackfillStatus.RUNNING


def test_a_call_riding_out_waits_for_a_server_away_longer_than_dagsters_retries(tmp_path, caplog):
    """Dagster gives up connecting after ~6 s (`too many retries for DB connection`); a call
    riding out restarts waits for the server the whole window."""
    with (
        PostgresServer() as server,
        open_instance(instance_env(tmp_path / "pg", server.create_database())) as instance,
    ):
        keep_connections(instance)
        assert instance.get_runs() == []
        server.crash()
        restart = threading.Timer(8.0, server.start_again)
        restart.start()
        with riding_out_database_restarts():
            assert instance.get_runs() == []
        restart.join()
    assert "the instance's database is back, after" in caplog.text


def test_a_call_riding_out_fails_clearly_past_its_window(tmp_path):
    """Past its window, a call fails with DatabaseUnreachableError naming how long and the
    setting; the next call after it fails at once, until the server answers."""
    with (
        PostgresServer() as server,
        open_instance(instance_env(tmp_path / "pg", server.create_database())) as instance,
    ):
        keep_connections(instance)
        server.crash()
        with riding_out_database_restarts(window=1.0):
            with pytest.raises(
                DatabaseUnreachableError,
                match=rf"unreachable for \d+ s \(the limit, {DATABASE_OUTAGE_SECONDS_ENV}, is 1 s\)",
            ):
                instance.get_runs()
            with pytest.raises(DatabaseUnreachableError):
                instance.get_runs()
            server.start_again()
            assert instance.get_runs() == []


# Two backfills in one process, each on an instance opened anew (a notebook's cells, a
# script's loop), through the Python API or the console script's `main`.
TWO_BACKFILLS_IN_ONE_PROCESS = {
    "run_backfill": """
import dagster as dg
from partition_assets.backfill.commands import run_backfill
from partition_assets.backfill.commands.console import SilentConsole
from partition_assets.backfill.planning.spec import BackfillSpec
spec = BackfillSpec(module="partition_assets_tests.support.locations.engine_defs", selection="key:raw",
                    start="2024-01-01", end="2024-01-02")
for _ in range(2):
    with dg.DagsterInstance.get() as instance:
        assert run_backfill(spec, instance, SilentConsole()).succeeded
""",
    "main": """
from partition_assets.cli.main import main
for _ in range(2):
    assert main(["backfill", "run", "-m", "partition_assets_tests.support.locations.engine_defs", "--select", "key:raw",
                 "--start", "2024-01-01", "--end", "2024-01-02"]) == 0
""",
}


@pytest.mark.parametrize(
    ("calls", "dagster_yaml"),
    [("run_backfill", True), ("main", True), ("main", False)],
    ids=["api", "cli", "cli-stock"],
)
def test_two_backfills_in_one_process_leave_the_runs_database_whole(tmp_path, calls, dagster_yaml):
    # The second backfill's workers are forked from the fork server the first one started:
    # a fork carrying the first instance's open SQLite connections wrote the second's runs
    # through a WAL index SQLite had since deleted, and a checkpoint overwrote runs.db's
    # first page ("file is not a database"). Without dagster.yaml: Dagster's defaults, which
    # the command writes through the same pooled run storage.
    home = tmp_path / "home"
    env = instance_env(home) if dagster_yaml else {"DAGSTER_HOME": str(home)}
    home.mkdir(exist_ok=True)
    subprocess.run(
        [sys.executable, "-c", TWO_BACKFILLS_IN_ONE_PROCESS[calls]],
        cwd=REPO,
        env={**os.environ, **env},
        check=True,
        timeout=300,
    )
    with closing(sqlite3.connect(home / "history" / "runs.db")) as runs_db:
        assert runs_db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    backfill_ids = recorded_ids(home)
    assert len(backfill_ids) == 2
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for backfill_id in backfill_ids:
            assert recorded_backfill(home, backfill_id).status == BackfillStatus.PUBLISHED
            runs = instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
            assert {run.status for run in runs} == {dg.DagsterRunStatus.SUCCESS}
            node_runs = [run.tags["dagster/partition"] for run in runs if PUBLISH_RUN_TAG not in run.tags]
            assert sorted(node_runs) == ["2024-01-01", "2024-01-02"]
