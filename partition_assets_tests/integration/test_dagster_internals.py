"""The seam to Dagster's private modules (partition_assets/dagster_internals.py), pinned: each
name it re-exports, imported from the seam, with the shape and behaviour its users rely on
(the user is named in each test), and the two private module names the library writes as
strings. A Dagster upgrade that moves or changes one fails here, naming it; a name added to
the seam without a pin here fails `test_every_name_in_the_seam_is_pinned_here`.

Pins elsewhere stay where they are: test_dagster_instance_storage.py (the storages end to end), test_launcher.py
(`submit_asset_run` launching real runs), e2e/test_deploy.py (a real code server's reply).
"""

import ast
import importlib
import inspect
import itertools
import json
import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import dagster_shared.telemetry as shared_telemetry
import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory
from dagster._core.definitions import data_version
from dagster._core.execution.asset_backfill import AssetBackfillData
from dagster._core.snap import JobSnap
from dagster._core.storage.tags import PARENT_BACKFILL_ID_TAG, USER_TAG
from dagster._daemon import backfill as daemon_backfill
from dagster._serdes import serialize_value
from dagster_graphql.implementation.execution import backfill as graphql_backfill
from sqlalchemy import create_engine, select
from sqlalchemy import inspect as inspect_database
from sqlalchemy.exc import IntegrityError

from partition_assets import dagster_internals
from partition_assets.backfill.dagster_ui.backfill_row import stored_status, write_if_status
from partition_assets.backfill.publishing import dagster_events
from partition_assets.backfill.publishing.event_batches import store_asset_events
from partition_assets.backfill.running.asset_runs import AssetRuns
from partition_assets.backfill.running.skips import yielded_output
from partition_assets.backfill.state.approval import DAGSTER_USER_TAG
from partition_assets.dagster_betas import quiet_dagster_betas
from partition_assets.dagster_instance import migrations, provenance_index
from partition_assets.dagster_instance.daemon_filter import BACKFILL_DAEMON_MODULE
from partition_assets.dagster_instance.key_values import sql_run_storage
from partition_assets.dagster_instance.migrations import remember_dagster_migrations
from partition_assets.dagster_instance.partition_status import failed_partitions
from partition_assets.dagster_instance.partition_wipe import wipe_partitions
from partition_assets.dagster_instance.storage import instance_storage_defaults
from partition_assets.dagster_instance.telemetry import remember_telemetry_ids
from partition_assets.dagster_internals import (
    ALEMBIC_SCRIPTS_LOCATION,
    IO_TYPE_EXTENSION,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    AssetGraph,
    AssetGraphSubset,
    AssetKeyPartitionKey,
    AssetMaterializationPlannedData,
    AssetObservationData,
    AssetStatusCacheValue,
    BaseAssetGraph,
    BaseAssetNode,
    BulkActionsFilter,
    BulkActionsTable,
    BulkActionStatus,
    CapturedLogContext,
    ComputeIOType,
    ConfigurableClassData,
    ConsolidatedSqliteEventLogStorage,
    DagsterGrpcClient,
    DagsterUserCodeUnreachableError,
    DynamicPartitionsStore,
    EventLogStorage,
    InMemoryJob,
    InstanceRef,
    KeyValueStoreTable,
    LegacyRunStorage,
    LocalComputeLogManager,
    ModuleTarget,
    PartitionBackfill,
    PartitionDimensionDefinition,
    PartitionsSubset,
    PythonFileTarget,
    SerializableErrorInfo,
    SqlEventLogStorage,
    SqlEventLogStorageTable,
    SqliteEventLogStorage,
    SqliteRunStorage,
    SqlRunStorage,
    StepMaterializationData,
    WorkspaceLoadTarget,
    WorkspaceProcessContext,
    compute_logs_directory,
    core_execute_in_process,
    dagster_telemetry,
    deserialize_value,
    ensure_file,
    get_and_update_asset_status_cache_value,
    is_valid_cron_string,
    merge_run_tags,
    pack_value,
    redirect_to_file,
    replace,
    reverse_cron_string_iterator,
    serializable_error_info_from_exc_info,
    submit_asset_run,
    touch_file,
)
from partition_assets.instance.engine_instance import PARENT_BACKFILL_TAG, EngineBackfillInstance
from partition_assets_tests.support.instances import also_on_postgres

PACKAGE = Path(__file__).resolve().parents[2] / "partition_assets"
SEAM = PACKAGE / "dagster_internals.py"

# The seam's names each test below pins (filled by `pins` as the tests are defined).
PINNED: set[str] = set()


def pins(*names: str) -> Callable:
    """Registers the seam names a test pins; each must be one the seam exports."""

    def register(test: Callable) -> Callable:
        PINNED.update(names)
        return test

    return register


# -- the seam itself ----------------------------------------------------------------------


def _imports_of_private_dagster(path: Path) -> list[str]:
    """The names `path` imports from `dagster._*` modules (`import dagster._x` counts as one)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dagster._"):
            names.extend(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names if alias.name.startswith("dagster._"))
    return names


def test_every_name_in_the_seam_is_pinned_here():
    # A set: a name the seam imports on first use is imported twice, for type checkers too.
    assert set(_imports_of_private_dagster(SEAM)) == set(dagster_internals.__all__)
    assert len(set(dagster_internals.__all__)) == len(dagster_internals.__all__)
    assert set(dagster_internals.__all__) == PINNED, "pin a new seam name here; drop the pin of a removed one"


def test_no_other_module_of_the_library_imports_dagsters_private_modules():
    importers = {
        str(path.relative_to(PACKAGE)): names
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != SEAM and (names := _imports_of_private_dagster(path))
    }
    assert importers == {}, "import them through partition_assets/dagster_internals.py"


def _private_module_strings() -> set[str]:
    """String constants of the library that name a `dagster._*` module."""
    return {
        node.value
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("dagster._")
    }


def test_the_private_modules_named_as_strings_are_the_two_pinned_below(tmp_path):
    legacy_storage = instance_storage_defaults(str(tmp_path))["storage"]
    assert legacy_storage is not None
    assert _private_module_strings() == {BACKFILL_DAEMON_MODULE, legacy_storage.module_name}


# -- named as strings ---------------------------------------------------------------------


class _DaemonProbe:
    """Stands for the instance the backfill daemon lists backfills from: records which
    module's function calls `get_backfills` (the frame EngineBackfillInstance.get_backfills
    reads) and which statuses it asks for."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[BulkActionStatus]]] = []

    def get_backfills(self, filters=None, cursor=None, limit=None, status=None):
        self.calls.append((sys._getframe(1).f_globals["__name__"], list(filters.statuses)))
        return []


def test_the_backfill_daemon_lists_what_it_runs_cancels_and_fails_from_its_own_module():
    """instance/engine_instance.py hides engine backfills from `get_backfills` calls made
    directly by a function of BACKFILL_DAEMON_MODULE."""
    daemon = importlib.import_module(BACKFILL_DAEMON_MODULE)
    probe = _DaemonProbe()
    list(daemon.execute_backfill_iteration(SimpleNamespace(instance=probe), logging.getLogger(__name__)))
    assert {module for module, _ in probe.calls} == {BACKFILL_DAEMON_MODULE}
    listed = {status for _, statuses in probe.calls for status in statuses}
    assert listed == {BulkActionStatus.REQUESTED, BulkActionStatus.CANCELING, BulkActionStatus.FAILING}
    # The override keeps the signature Dagster's callers use.
    override = inspect.signature(EngineBackfillInstance.get_backfills).parameters
    assert list(override) == list(inspect.signature(dg.DagsterInstance.get_backfills).parameters)


@pins("ConfigurableClassData", "InstanceRef", "compute_logs_directory")
def test_the_composite_storage_instance_storage_names_builds_the_storages_it_names(tmp_path):
    """dagster_instance/storage.py names Dagster's composite storage by module and class, with Dagster's
    instance defaults (InstanceRef.config_defaults) and its run storage's config."""
    home = str(tmp_path)
    defaults = InstanceRef.config_defaults(home)
    assert {"run_storage", "event_log_storage", "schedule_storage", "storage", "compute_logs"} <= set(defaults)
    assert all(isinstance(defaults[key], ConfigurableClassData) for key in ("run_storage", "schedule_storage"))
    assert compute_logs_directory(home) == os.path.join(home, "storage")
    ours = instance_storage_defaults(home)
    assert ours["storage"] is not None
    storage = ours["storage"].rehydrate()
    assert type(storage).__module__ == ours["storage"].module_name
    assert type(storage).__name__ == ours["storage"].class_name
    assert isinstance(storage.run_storage, SqliteRunStorage)
    assert type(storage.run_storage).__name__ == "RunStorage"  # ours, built from Dagster's config
    assert type(storage.event_log_storage).__name__ == "ConsolidatedEventLogStorage"
    storage.run_storage.dispose()
    storage.event_log_storage.dispose()


# -- dagster_instance/storage.py: the storages and compute-log manager it subclasses ---------------


@pins("ConsolidatedSqliteEventLogStorage", "SQLITE_BUSY_TIMEOUT_SECONDS")
def test_the_consolidated_event_log_goes_through_connect_and_tells_watchers_on_modified(tmp_path):
    """ConsolidatedEventLogStorage overrides `_connect` (every transaction), and its `watch`
    fills `_obs` and `_watchers` for Dagster's `on_modified` to read."""
    opened = []

    class Counting(ConsolidatedSqliteEventLogStorage):
        def _connect(self):
            opened.append(True)
            return super()._connect()

    assert isinstance(SQLITE_BUSY_TIMEOUT_SECONDS, int | float) and SQLITE_BUSY_TIMEOUT_SECONDS > 0
    storage = Counting(str(tmp_path))
    assert storage._obs is None and dict(storage._watchers) == {}
    assert Path(storage.get_db_path()).parent == tmp_path and storage._base_dir == str(tmp_path)
    assert storage._conn_string.startswith("sqlite:///")  # what its one engine connects to
    assert "callback" in inspect.signature(storage.watch).parameters
    seen = []
    storage._watchers["run-1"][lambda entry, cursor: seen.append(entry.user_message)] = None
    opened.clear()
    storage.store_event(
        dg.EventLogEntry(error_info=None, level="INFO", user_message="hello", run_id="run-1", timestamp=time.time())
    )
    storage.on_modified()
    assert seen == ["hello"]
    assert opened, "writes and reads go through _connect"
    storage.dispose()


@pins("SqliteEventLogStorage", "SQLITE_BUSY_TIMEOUT_SECONDS")
def test_the_run_sharded_event_log_connects_through_connect_once_initialized_under_its_lock(tmp_path):
    """dagster_instance/storage.py `RunShardedEventLogStorage` overrides `_connect(shard)`, every
    run's and the index's transactions, holding `_db_lock` (one database opened at a time);
    Dagster's `_initdb(engine)` builds an absent database's schema on the engine given, and
    `_connect` skips it for the shards in `_initialized_dbs`; the schema checks it remembers
    are the storage's `has_table` and `_has_asset_key_col_on_connection`."""
    opened: list[str] = []

    class Counting(SqliteEventLogStorage):
        def _connect(self, shard):
            opened.append(shard)
            return super()._connect(shard)

    storage = Counting(str(tmp_path))
    assert isinstance(storage._initialized_dbs, set) and isinstance(storage._db_lock, type(threading.Lock()))
    assert storage.path_for_shard("run-1") == str(tmp_path / "run-1.db")
    assert storage.conn_string_for_shard("index") == f"sqlite:///{tmp_path / 'index.db'}"
    opened.clear()  # the index's, built when the storage was created
    storage.store_event(
        dg.EventLogEntry(error_info=None, level="INFO", user_message="hello", run_id="run-1", timestamp=time.time())
    )
    assert opened == ["run-1"] and "run-1" in storage._initialized_dbs
    assert [entry.user_message for entry in storage.get_logs_for_run("run-1")] == ["hello"]
    with storage.index_connection():
        assert storage._db_lock.locked()
    assert opened == ["run-1", "run-1", "index"]
    engine = create_engine(f"sqlite:///{tmp_path / 'built.db'}")
    storage._initdb(engine)
    with engine.connect() as connection:
        assert inspect_database(connection).has_table(SqlEventLogStorageTable.name)
    engine.dispose()
    assert storage.has_table(SqlEventLogStorageTable.name)
    with storage.index_connection() as connection:
        assert storage._has_asset_key_col_on_connection(connection, "last_materialization_timestamp")
    storage.dispose()


@pins("EventLogStorage", "SqlEventLogStorage", "SqlEventLogStorageTable", "SqliteEventLogStorage")
@pins("StepMaterializationData", "AssetObservationData")
def test_asset_events_written_in_batches_read_back_as_yielded_ones(home, tmp_path):
    """backfill/publishing/event_batches.py: on both SQLite event logs (the repo's consolidated
    one, Dagster's default run-sharded one) a batch reads back as events the op yielded would:
    in its run, with partition and metadata, the last as the asset's latest; Postgres's event
    log is a SQL one too (test_event_batches.py compares the batch with Dagster's own path on it)."""
    from dagster_postgres.event_log import PostgresEventLogStorage

    assert issubclass(PostgresEventLogStorage, SqlEventLogStorage) and issubclass(SqlEventLogStorage, EventLogStorage)
    for name in (
        "_event_to_row",
        "_store_asset_event_tags",
        "_store_asset_event",
        "index_transaction",
        "run_connection",
    ):
        assert callable(getattr(SqlEventLogStorage, name)), name
    assert "id" in SqlEventLogStorageTable.c
    days = ["2024-01-01", "2024-01-02", "2024-01-03"]
    events = [dg.AssetMaterialization("a", partition=day, metadata={"n": i}) for i, day in enumerate(days)]
    events.append(dg.AssetObservation("a", partition=days[0], metadata={"seen": True}))

    @dg.op
    def report():
        store_asset_events(dg.OpExecutionContext.get(), events)

    @dg.job
    def reporting():
        report()

    with dg.DagsterInstance.get() as consolidated, dg.instance_for_test(temp_dir=str(tmp_path)) as run_sharded:
        assert isinstance(run_sharded.event_log_storage, SqliteEventLogStorage)  # Dagster's default
        for target in (consolidated, run_sharded):
            assert isinstance(target.event_log_storage, SqlEventLogStorage)
            run_id = reporting.execute_in_process(instance=target).run_id
            records = [
                record
                for record in target.fetch_materializations(dg.AssetKey("a"), limit=10, ascending=True).records
                if record.run_id == run_id
            ]
            assert [(r.run_id, r.partition_key, r.asset_materialization.metadata["n"].value) for r in records] == [
                (run_id, day, i) for i, day in enumerate(days)
            ]
            assert isinstance(records[0].event_log_entry.dagster_event.event_specific_data, StepMaterializationData)
            assert target.get_latest_materialization_event(dg.AssetKey("a")).dagster_event.partition == days[-1]
            assert target.get_materialized_partitions(dg.AssetKey("a")) == set(days)
            [observed] = [
                r for r in target.fetch_observations(dg.AssetKey("a"), limit=10).records if r.run_id == run_id
            ]
            assert isinstance(observed.event_log_entry.dagster_event.event_specific_data, AssetObservationData)
            assert observed.event_log_entry.dagster_event.step_key == "report"


@pins("AssetMaterializationPlannedData")
@also_on_postgres("home")
def test_partitions_planned_by_a_failed_run_read_failed_until_materialized(home, tmp_path):
    """backfill/publishing/dagster_events.py `record_failures`: partitions planned (written in a
    batch: event_batches.py) by a reporting run that fails read failed in Dagster's partition
    status, on both SQLite event logs and on Postgres's, as the steps a failed run of Dagster's
    never ran do; nothing reads materialized; a later materialization of one reads materialized."""
    days, key = ["2024-01-01", "2024-01-02"], dg.AssetKey("a")
    partitions_def = dg.DailyPartitionsDefinition("2024-01-01")
    planned = [AssetMaterializationPlannedData(key, partition=day) for day in days]
    with dg.DagsterInstance.get() as consolidated, dg.instance_for_test(temp_dir=str(tmp_path)) as run_sharded:
        for target in (consolidated, run_sharded):
            dagster_events.run_reporting(target, planned, {}, "partition_assets_plan", failure="blocked")
            [run] = target.get_runs(dg.RunsFilter(job_name="partition_assets_plan"))
            assert run.status == dg.DagsterRunStatus.FAILURE
            assert target.get_latest_planned_materialization_info(key, days[1]).run_id == run.run_id
            assert target.get_materialized_partitions(key) == set()
            failed = dict.fromkeys(days, dg.AssetPartitionStatus.FAILED)
            assert target.get_status_by_partition(key, days, partitions_def) == failed
            dagster_events.run_reporting(
                target, [dg.AssetMaterialization(key, partition=days[0])], {}, "partition_assets_x"
            )
            assert target.get_status_by_partition(key, days, partitions_def) == {
                days[0]: dg.AssetPartitionStatus.MATERIALIZED,
                days[1]: dg.AssetPartitionStatus.FAILED,
            }


@pins("AssetStatusCacheValue", "get_and_update_asset_status_cache_value")
def test_the_failed_partitions_read_from_dagster_s_status_subsets_are_those_it_calls_failed(home):
    """dagster_instance/partition_status.py (what --catch-up runs again although materialized):
    Dagster's status cache read as its failed and in-progress subsets names, of the partitions
    asked, those `get_status_by_partition` calls FAILED: planned by a failed run, materialized
    before it or never; an asset Dagster keeps no status for has none."""
    days = [f"2024-01-0{n}" for n in range(1, 6)]
    key, partitions_def = dg.AssetKey("a"), dg.DailyPartitionsDefinition("2024-01-01", end_date="2024-01-06")
    with dg.DagsterInstance.get() as instance:
        made = [dg.AssetMaterialization(key, partition=day) for day in days[:2]]
        dagster_events.run_reporting(instance, made, {}, "partition_assets_x")
        planned = [AssetMaterializationPlannedData(key, partition=day) for day in days[1:4]]
        dagster_events.run_reporting(instance, planned, {}, "partition_assets_plan", failure="blocked")
        status = instance.get_status_by_partition(key, days, partitions_def)
        called_failed = {day for day, state in status.items() if state == dg.AssetPartitionStatus.FAILED}

        assert called_failed == set(days[1:4])
        assert failed_partitions(instance, key, partitions_def, days) == called_failed
        assert failed_partitions(instance, key, partitions_def, days[2:]) == {days[2], days[3]}
        assert failed_partitions(instance, dg.AssetKey("never"), partitions_def, days) == set()
        cached = get_and_update_asset_status_cache_value(instance, key, partitions_def)
        assert isinstance(cached, AssetStatusCacheValue)
        assert set(cached.deserialize_failed_partition_subsets(partitions_def).get_partition_keys()) == called_failed
        assert not cached.deserialize_in_progress_partition_subsets(partitions_def).get_partition_keys()


@pins("SqlEventLogStorage", "SqlEventLogStorageTable")
def test_a_partition_wipe_on_the_sql_event_logs_leaves_the_partitions_missing_until_materialized_again(home, tmp_path):
    """dagster_instance/partition_wipe.py: Dagster 1.13's SQL event logs cannot wipe a partition
    (NotImplementedError: once they can, the library uses Dagster's own), so the wipe clears
    the partition index of its materialization events and the cached status; on both SQLite
    event logs the partitions then read missing (materialized partitions and the UI's status)
    while the runs' logs keep the events, and a new materialization makes them materialized."""
    for column in ("asset_key", "partition", "dagster_event_type"):
        assert column in SqlEventLogStorageTable.c
    days = ["2024-01-01", "2024-01-02", "2024-01-03"]
    partitions_def = dg.DailyPartitionsDefinition("2024-01-01", end_date="2024-01-04")
    key = dg.AssetKey("a")

    def materialize(instance: dg.DagsterInstance, partitions: list[str]) -> str:
        @dg.op
        def report():
            for day in partitions:
                yield dg.AssetMaterialization(key, partition=day)
            yield dg.Output(None)

        @dg.job
        def reporting():
            report()

        return reporting.execute_in_process(instance=instance).run_id

    with dg.DagsterInstance.get() as consolidated, dg.instance_for_test(temp_dir=str(tmp_path)) as run_sharded:
        for instance in (consolidated, run_sharded):
            run_id = materialize(instance, days)
            assert instance.get_status_by_partition(key, days, partitions_def)["2024-01-02"] == (
                dg.AssetPartitionStatus.MATERIALIZED
            )  # the status cache now holds it
            with pytest.raises(NotImplementedError):
                instance.event_log_storage.wipe_asset_partitions(key, ["2024-01-02"])

            assert wipe_partitions(instance, key, ["2024-01-02"])

            assert instance.get_materialized_partitions(key) == {"2024-01-01", "2024-01-03"}
            status = instance.get_status_by_partition(key, days, partitions_def)
            assert status.get("2024-01-02") != dg.AssetPartitionStatus.MATERIALIZED
            materializations = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
            assert len(materializations) == 3
            materialize(instance, ["2024-01-02"])
            assert instance.get_materialized_partitions(key) == set(days)


@pins("SqlEventLogStorage")
def test_the_provenance_index_reads_events_after_its_cursor_dagster_s_version_tags_and_asset_wipes(home, tmp_path):
    """dagster_instance/provenance_index.py: on both SQLite event logs, its tables live where
    `index_transaction` connects (the consolidated database; the index shard of the per-run
    log); `get_event_records` with `after_cursor` (a storage id) and ascending returns the
    materializations after it alone; a materialization's data version and the upstream data
    versions it read are the tags the index names (Dagster's tag of `up` is the version it
    computed for the read, not always `up`'s own data version); a wiped asset's events are older than its
    `last_wipe_timestamp`, and Dagster lists no asset record of an asset wiped and not
    materialized since (the index leaves those rows out, as Dagster its events)."""
    assert provenance_index.DATA_VERSION_TAG == data_version.DATA_VERSION_TAG
    assert provenance_index.INPUT_DATA_VERSION_TAG_PREFIX == f"{data_version.INPUT_DATA_VERSION_TAG_PREFIX}/"
    days = dg.DailyPartitionsDefinition("2024-01-01", end_date="2024-01-03")

    @dg.asset(partitions_def=days, code_version="1")
    def up() -> int:
        return 1

    @dg.asset(partitions_def=days, code_version="1")
    def down(up: int) -> int:
        return up

    with dg.DagsterInstance.get() as consolidated, dg.instance_for_test(temp_dir=str(tmp_path)) as run_sharded:
        for instance in (consolidated, run_sharded):
            assert dg.materialize([up, down], partition_key="2024-01-01", instance=instance).success
            assert provenance_index.update_index(instance, progress=lambda line: None) == 2
            storage = provenance_index.sql_event_log(instance)
            with storage.index_transaction() as connection:
                assert inspect_database(connection).has_table(provenance_index.PROVENANCE.name)
            cursor = storage.get_maximum_record_id()
            assert dg.materialize([up], partition_key="2024-01-02", instance=instance).success
            lines: list[str] = []
            assert provenance_index.update_index(instance, progress=lines.append) == 1 and lines == []
            after = storage.get_event_records(
                dg.EventRecordsFilter(dg.DagsterEventType.ASSET_MATERIALIZATION, after_cursor=cursor),
                limit=10,
                ascending=True,
            )
            assert [(r.asset_key, r.partition_key) for r in after] == [(up.key, "2024-01-02")]
            latest = provenance_index.latest_provenance(
                instance, [up.key, down.key], progress=lambda line: None, with_inputs=True
            )
            made_up = latest[up.key]["2024-01-01"]
            assert made_up.data_version is not None
            (made_down,) = instance.fetch_materializations(down.key, limit=1).records
            read = (made_down.asset_materialization.tags or {})[data_version.get_input_data_version_tag(up.key)]
            assert latest[down.key]["2024-01-01"].input_data_versions == {"up": read}
            instance.wipe_assets([up.key])
            assert instance.get_asset_records([up.key]) == []  # wiped, not materialized since
            latest = provenance_index.latest_provenance(instance, [up.key, down.key], progress=lambda line: None)
            assert latest[up.key] == {} and set(latest[down.key]) == {"2024-01-01"}
            assert dg.materialize([up], partition_key="2024-01-02", instance=instance).success
            (record,) = instance.get_asset_records([up.key])
            assert record.asset_entry.asset_details is not None
            assert record.asset_entry.asset_details.last_wipe_timestamp > made_up.timestamp
            latest = provenance_index.latest_provenance(instance, [up.key], progress=lambda line: None)
            assert set(latest[up.key]) == {"2024-01-02"}


@pins("SqliteRunStorage")
def test_the_run_storage_goes_through_connect_and_from_local_builds_the_subclass(tmp_path):
    """RunStorage overrides `connect` and builds itself with `from_local(base_dir, inst_data=)`."""
    opened = []

    class Counting(SqliteRunStorage):
        def connect(self):
            opened.append(True)
            return super().connect()

    storage = Counting.from_local(base_dir=str(tmp_path), inst_data=None)
    assert isinstance(storage, Counting)
    assert storage._conn_string.startswith("sqlite:///")
    opened.clear()
    assert storage.get_runs() == []
    assert opened
    assert set(inspect.signature(SqliteRunStorage.from_local).parameters) == {"base_dir", "inst_data"}
    storage.dispose()


@pins("LegacyRunStorage", "SqlRunStorage")
def test_an_instance_run_storage_is_a_sql_storage_or_wraps_one_and_connect_executes_statements(home, tmp_path):
    """backfill/state/store.py runs its own statements through `SqlRunStorage.connect()`: the
    repo's dagster.yaml names one directly; a composite `storage:` block of Dagster's
    `LegacyRunStorage` holds it as `_storage.run_storage`."""
    with dg.DagsterInstance.get() as instance:
        assert isinstance(instance.run_storage, SqlRunStorage)
    wrapper = LegacyRunStorage.from_config_value(
        None,
        {
            "module_name": "dagster._core.storage.sqlite_storage",
            "class_name": "DagsterSqliteStorage",
            "config_yaml": f"base_dir: {tmp_path}\n",
        },
    )
    inner = wrapper._storage.run_storage
    assert isinstance(inner, SqlRunStorage)
    with inner.connect() as connection:
        assert connection.exec_driver_sql("SELECT 1").scalar() == 1


@pins("KeyValueStoreTable")
def test_the_key_value_table_is_where_cursor_values_live_one_row_per_key(home):
    """dagster_instance/key_values.py swaps values in Dagster's `kvs` table directly: what it
    inserts `get_cursor_values` reads, what `set_cursor_values` writes it updates, and a
    second row of one key is refused (its compare-and-set of an absent key relies on that)."""
    with dg.DagsterInstance.get() as instance:
        storage = sql_run_storage(instance)
        with storage.connect() as connection:
            connection.execute(KeyValueStoreTable.insert().values(key="k", value="inserted"))
        assert instance.run_storage.get_cursor_values({"k"}) == {"k": "inserted"}
        instance.run_storage.set_cursor_values({"k": "set"})
        with storage.connect() as connection:
            assert (
                connection.execute(
                    select(KeyValueStoreTable.c.value).where(KeyValueStoreTable.c.key == "k")
                ).scalar_one()
                == "set"
            )
        with pytest.raises(IntegrityError), storage.connect() as connection:
            connection.execute(KeyValueStoreTable.insert().values(key="k", value="again"))


@also_on_postgres("home")
def test_a_run_deleted_and_created_again_under_its_id_is_another_run_record(home):
    """dagster_instance/lease_proof.py binds a node run's id to its run record's storage id and creation
    time: a run deleted and created again under the same id (as Dagster's GraphQL can) gets
    another creation time, whatever its storage id (SQLite reuses the highest one)."""
    with dg.DagsterInstance.get() as instance:
        run_id = instance.add_run(dg.DagsterRun(job_name="nodes", run_id=str(uuid.uuid4()))).run_id
        first = instance.get_run_record_by_id(run_id)
        instance.delete_run(run_id)
        instance.add_run(dg.DagsterRun(job_name="nodes", run_id=run_id))
        again = instance.get_run_record_by_id(run_id)
        assert first is not None and again is not None
        assert again.create_timestamp != first.create_timestamp


@dg.asset
def one_row() -> None: ...


@pins("ALEMBIC_SCRIPTS_LOCATION")
def test_dagster_s_migration_scripts_are_read_once_per_process_not_per_run_database(tmp_path, monkeypatch):
    """On Dagster's default event log (a SQLite database per run), each run's new database is
    checked and stamped against Dagster's migration scripts, alembic's `ScriptDirectory`
    built from `ALEMBIC_SCRIPTS_LOCATION` each time; remembered (dagster_instance/migrations.py),
    it is built once per storage in the process whatever the runs."""
    builds: list[str | None] = []
    build = migrations._build

    def counted(cls: type[ScriptDirectory], config: Config) -> ScriptDirectory:
        builds.append(config.get_main_option("script_location"))
        return build(cls, config)

    monkeypatch.setattr(migrations, "_build", counted)
    monkeypatch.setattr(migrations, "_built", {})
    monkeypatch.setattr(ScriptDirectory, "from_config", classmethod(lambda cls, config: migrations._build(cls, config)))

    def runs(instance: dg.DagsterInstance, count: int) -> None:
        for _ in range(count):
            assert dg.materialize([one_row], instance=instance).success

    for name in ("unremembered", "remembered"):
        (tmp_path / name).mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "unremembered")) as instance:
        assert instance.event_log_storage.is_run_sharded  # Dagster's default: a database per run
        runs(instance, 1)
        builds.clear()
        runs(instance, 3)
    assert builds.count(ALEMBIC_SCRIPTS_LOCATION) >= 2 * 3  # checked, then stamped, per run database

    builds.clear()
    remember_dagster_migrations()
    with dg.instance_for_test(temp_dir=str(tmp_path / "remembered")) as instance:
        runs(instance, 4)
    # At most once per storage's alembic.ini (runs, event log, schedules), whatever the runs.
    assert set(builds) == {ALEMBIC_SCRIPTS_LOCATION} and len(builds) <= 3


def _dagsters(function):
    """Dagster's function under any remembering wrapper of dagster_instance/telemetry.py."""
    return inspect.unwrap(function, stop=lambda wrapper: not getattr(wrapper, "_partition_assets_remembered", False))


@pins("dagster_telemetry")
def test_dagster_s_telemetry_ids_are_read_once_per_process_not_per_step(tmp_path, monkeypatch):
    """With telemetry on (Dagster's default: no dagster.yaml), each step's start and end write a
    line of ids to the instance's telemetry log (`log_dagster_event`), each id read anew through
    `dagster_telemetry._get_instance_telemetry_info` (the run storage's id a transaction) and
    `get_or_set_user_id`; remembered (dagster_instance/telemetry.py), each is read once per
    process, and the same lines are written."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))  # the user's telemetry id: ~/.dagster
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    # Dagster's own functions for the test, restored after it: an earlier test of this process
    # that started local workers (start_fork_server) has remembered them already.
    monkeypatch.setattr(
        dagster_telemetry, "_get_instance_telemetry_info", _dagsters(dagster_telemetry._get_instance_telemetry_info)
    )
    monkeypatch.setattr(shared_telemetry, "get_or_set_user_id", _dagsters(shared_telemetry.get_or_set_user_id))
    shared_telemetry.cleanup_telemetry_logger()  # the process's telemetry log: this DAGSTER_HOME's
    try:
        with dg.DagsterInstance.get() as instance:
            assert instance.telemetry_enabled
            assert dg.materialize([one_row], instance=instance).success  # the ids written
            reads: list[str] = []
            storage_id = instance.run_storage.get_run_storage_id
            monkeypatch.setattr(
                instance.run_storage, "get_run_storage_id", lambda: reads.append("read") or storage_id()
            )

            def reads_over_three_runs() -> int:
                reads.clear()
                for _ in range(3):
                    assert dg.materialize([one_row], instance=instance).success
                return len(reads)

            assert reads_over_three_runs() == 3 * 2  # a step's start and its success, per run
            remember_telemetry_ids()
            assert reads_over_three_runs() <= 1
    finally:
        shared_telemetry.cleanup_telemetry_logger()
    lines = [json.loads(line) for line in (tmp_path / "home" / "logs" / "event.log").read_text().splitlines()]
    steps = [line for line in lines if line["action"] in ("step_start_event", "step_success_event")]
    assert len(steps) == 7 * 2  # every run's lines, remembered or not
    ids = {(line["instance_id"], line["run_storage_id"], line["user_id"]) for line in steps}
    assert len(ids) == 1 and all(ids.pop())


@dg.asset
def with_output_metadata() -> dg.Output[int]:
    return dg.Output(3, metadata={"rows": 3})  # stored by Dagster's IO manager: a HANDLED_OUTPUT too


def test_output_events_read_from_each_run_s_database_are_those_dagster_reads(tmp_path):
    """On Dagster's default event log (a database per run of Dagster's event table), a
    publish reads each node run's events of the types it asks (outputs, check results; here
    STEP_OUTPUT and HANDLED_OUTPUT) from the run's database directly
    (dagster_events._per_run_database_events): the same events, in the same order, as
    Dagster's own read of each run; a run id without a database has none."""
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        storage = instance.event_log_storage
        assert isinstance(storage, SqliteEventLogStorage) and storage.is_run_sharded
        run_ids = {dg.materialize([with_output_metadata], instance=instance).run_id for _ in range(3)}
        types = {dg.DagsterEventType.STEP_OUTPUT, dg.DagsterEventType.HANDLED_OUTPUT}
        dagster_s = [record for run_id in sorted(run_ids) for record in instance.all_logs(run_id, of_type=types)]
        assert len(dagster_s) == 2 * 3
        assert dagster_events._per_run_database_events(storage, run_ids | {"no-such-run"}, types) == dagster_s


SOMETIMES_DAYS = dg.DailyPartitionsDefinition("2024-01-01")


@dg.asset(partitions_def=SOMETIMES_DAYS, output_required=False)
def sometimes(context: dg.AssetExecutionContext):
    if context.partition_key.endswith("1"):
        yield dg.Output(1)


@dg.asset_check(asset=sometimes, partitions_def=SOMETIMES_DAYS)
def sometimes_checked() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True)


@dg.asset
def returns_none() -> None: ...


@dg.asset(deps=[returns_none])
def reports() -> dg.MaterializeResult:
    return dg.MaterializeResult()


@dg.multi_asset(outs={"left": dg.AssetOut(), "right": dg.AssetOut()})
def both_sides():
    return 1, 2


@dg.op
def inner_op() -> int:
    return 1


@dg.graph_asset
def from_a_graph():
    return inner_op()


def test_a_run_that_yields_no_output_has_no_step_output_of_the_asset_s_op_output(instance):
    """What running/skips.py `yielded_output` reads: the asset's op output (the job's asset
    layer's `get_op_output_handle`) is the STEP_OUTPUT of the step named by its node handle,
    present when the asset yielded its output (`-> None`, a MaterializeResult, a multi-asset's
    outputs and a graph asset's included), absent when it yielded none."""
    job = dg.Definitions(assets=[sometimes]).resolve_implicit_global_asset_job_def()
    yielded = dg.materialize([sometimes], instance=instance, partition_key="2024-01-01")
    skipped = dg.materialize([sometimes], instance=instance, partition_key="2024-01-02")
    assert yielded.success and skipped.success
    assert yielded_output(job, sometimes.key, yielded.all_events)
    assert not yielded_output(job, sometimes.key, skipped.all_events)
    forms = [returns_none, reports, both_sides, from_a_graph]
    job = dg.Definitions(assets=forms).resolve_implicit_global_asset_job_def()
    ran = dg.materialize(forms, instance=instance)
    keys = [returns_none.key, reports.key, dg.AssetKey("left"), dg.AssetKey("right"), from_a_graph.key]
    assert all(yielded_output(job, key, ran.all_events) for key in keys)


@pins("AssetCheckEvaluationTargetMaterializationData", "replace")
def test_a_check_result_recorded_again_with_the_materialization_it_judged_is_current(instance):
    """What a staged publish relies on to re-record the node runs' check results
    (dagster_events.py `judging_stored`): an evaluation recorded before a later
    materialization is not current; recorded again naming that materialization, it is."""
    check_key = sometimes_checked.check_key
    dg.materialize([sometimes, sometimes_checked], instance=instance, partition_key="2024-01-01")
    evaluation = instance.event_log_storage.get_latest_asset_check_execution_by_key([check_key])[check_key].evaluation
    later = dg.AssetMaterialization(sometimes.key, partition="2024-01-01")
    dagster_events.run_reporting(instance, [later], {}, "later_materialization")
    assert not _check_info(instance, check_key).is_current
    dagster_events.run_reporting(instance, [later, evaluation], {}, "publish_like")
    info = _check_info(instance, check_key)
    assert info.is_current and info.latest_execution_status.value == "SUCCEEDED"


def _check_info(instance: dg.DagsterInstance, check_key: dg.AssetCheckKey):
    """The check's latest execution of its one partition."""
    [info] = instance.event_log_storage.get_asset_check_partition_info([check_key])
    return info


@pins("LocalComputeLogManager", "CapturedLogContext", "ComputeIOType", "IO_TYPE_EXTENSION")
@pins("redirect_to_file", "ensure_file", "touch_file")
def test_the_compute_log_manager_reads_the_files_direct_capture_writes(tmp_path):
    """DirectComputeLogManager writes a step's stdout and stderr to the paths Dagster's
    manager reads (`get_captured_local_path` with IO_TYPE_EXTENSION), by `redirect_to_file`,
    then touches `complete_artifact_path`: Dagster's manager reads them back and sees the
    capture complete."""
    manager = LocalComputeLogManager(base_dir=str(tmp_path / "logs"), inst_data=None)
    log_key = ["run-1", "compute_logs", "step"]
    paths = {
        io_type: manager.get_captured_local_path(log_key, IO_TYPE_EXTENSION[io_type])
        for io_type in (ComputeIOType.STDOUT, ComputeIOType.STDERR)
    }
    for io_type, path in paths.items():
        assert ensure_file(path) == path and Path(path).exists()
        with open(tmp_path / f"{io_type.value}.stream", "w") as stream, redirect_to_file(stream, path):
            os.write(stream.fileno(), f"to {io_type.value}\n".encode())
    assert not manager.is_capture_complete(log_key)
    touch_file(manager.complete_artifact_path(log_key))
    assert manager.is_capture_complete(log_key)
    data = manager.get_log_data(log_key)
    assert (data.stdout, data.stderr) == (b"to stdout\n", b"to stderr\n")
    assert CapturedLogContext(log_key).log_key == log_key
    assert "capture_logs" in vars(LocalComputeLogManager)  # the method DirectComputeLogManager replaces


# -- the asset graph (backfill/planning/graph.py, automation/, publishing/tables.py) ----------


DAYS = dg.DailyPartitionsDefinition("2024-01-01", end_date="2024-01-05")
REGIONS = dg.StaticPartitionsDefinition(["eu", "us"])
CAMPAIGNS = dg.DynamicPartitionsDefinition(name="campaigns")
SINGLE_RUN = dg.BackfillPolicy.single_run()


@dg.asset(partitions_def=DAYS, group_name="orders")
def raw() -> None: ...


@dg.asset(
    partitions_def=dg.MultiPartitionsDefinition({"ds": DAYS, "region": REGIONS}),
    deps=[dg.AssetDep(raw, partition_mapping=dg.MultiToSingleDimensionPartitionMapping("ds"))],
    backfill_policy=SINGLE_RUN,
)
def by_region() -> int:
    return 1


@dg.asset(partitions_def=CAMPAIGNS)
def campaign() -> None: ...


DEFINITIONS = dg.Definitions(assets=[raw, by_region, campaign])


@pins("AssetGraph", "BaseAssetGraph", "BaseAssetNode", "PartitionDimensionDefinition")
def test_the_asset_graph_and_its_nodes_have_what_planning_reads():
    graph = DEFINITIONS.resolve_asset_graph()
    assert isinstance(graph, AssetGraph) and isinstance(graph, BaseAssetGraph)
    # automation/repository.py: a sensor's repository holds the same graph.
    assert isinstance(dg.build_sensor_context(definitions=DEFINITIONS).repository_def.asset_graph, AssetGraph)
    assert graph.has(raw.key) and set(graph.get_all_asset_keys()) == {raw.key, by_region.key, campaign.key}
    assert graph.toposorted_asset_keys.index(raw.key) < graph.toposorted_asset_keys.index(by_region.key)
    node = graph.get(by_region.key)
    assert isinstance(node, BaseAssetNode)
    assert node.parent_keys == {raw.key} and graph.get(raw.key).child_keys == {by_region.key}
    assert node.backfill_policy == SINGLE_RUN and graph.get(raw.key).backfill_policy is None
    assert graph.get(raw.key).group_name == "orders" and node.io_manager_key == "io_manager"
    assert node.is_materializable
    assert isinstance(graph.get_partition_mapping(by_region.key, raw.key), dg.MultiToSingleDimensionPartitionMapping)
    assert list(dg.AssetSelection.groups("orders").resolve(graph)) == [raw.key]
    # publishing/tables.py: the output an IO manager stores.
    assets_def = graph.assets_def_for_key(by_region.key)
    output = assets_def.node_def.output_def_named(assets_def.get_output_name_for_asset_key(by_region.key))
    assert not output.dagster_type.is_nothing
    dimensions = node.partitions_def.partitions_defs
    assert all(isinstance(d, PartitionDimensionDefinition) for d in dimensions)
    assert [(d.name, d.partitions_def) for d in dimensions] == [("ds", DAYS), ("region", REGIONS)]


@pins("DynamicPartitionsStore")
def test_the_instance_is_the_dynamic_partitions_store_planning_passes():
    assert issubclass(dg.DagsterInstance, DynamicPartitionsStore)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("campaigns", ["spring"])
        assert CAMPAIGNS.get_partition_keys(dynamic_partitions_store=instance) == ["spring"]


# -- backfill/dagster_ui/mirror.py and instance/engine_instance.py: Dagster's backfills ------


@pins("PartitionBackfill", "AssetGraphSubset", "AssetKeyPartitionKey", "BulkActionStatus", "BulkActionsFilter")
@pins("SerializableErrorInfo", "serializable_error_info_from_exc_info")
def test_a_backfill_written_as_the_mirror_writes_it_reads_back_as_written():
    graph = DEFINITIONS.resolve_asset_graph()
    days = [f"2024-01-0{day}" for day in (1, 2, 3)]
    nodes = {AssetKeyPartitionKey(raw.key, day) for day in days}
    assert AssetKeyPartitionKey(raw.key) == (raw.key, None)
    target = AssetGraphSubset.from_asset_partition_set(nodes, graph)
    assert set(target.iterate_asset_partitions()) == nodes and target.asset_keys == {raw.key}
    assert sorted(target.get_partitions_subset(raw.key).get_partition_keys()) == days
    done = AssetGraphSubset.from_asset_partition_set({AssetKeyPartitionKey(raw.key, days[0])}, graph)
    assert AssetGraphSubset.create_empty_subset() | done == done
    assert set((target - done).iterate_asset_partitions()) == nodes - {AssetKeyPartitionKey(raw.key, days[0])}
    try:
        raise RuntimeError("the coordinator stopped")
    except RuntimeError:
        error = serializable_error_info_from_exc_info(sys.exc_info())
    assert isinstance(error, SerializableErrorInfo) and error.cls_name == "RuntimeError"
    with dg.instance_for_test() as instance:
        backfill = PartitionBackfill.from_asset_graph_subset(
            backfill_id="pinned",
            backfill_timestamp=time.time(),
            tags={"team": "finance"},
            dynamic_partitions_store=instance,
            asset_graph_subset=target,
            title=None,
            description="a pinned backfill",
            run_config=None,
        )
        assert backfill.is_asset_backfill and backfill.status == BulkActionStatus.REQUESTED
        assert set(backfill.asset_selection) == {raw.key}
        instance.add_backfill(backfill._replace(tags={**backfill.tags, "engine": "sparse"}))
        stored = instance.get_backfill("pinned")
        assert stored is not None and stored.tags == {"team": "finance", "engine": "sparse"}
        data = stored.get_asset_backfill_data(graph)
        assert set(data.target_subset.iterate_asset_partitions()) == nodes
        data = data._replace(
            requested_subset=target,
            materialized_subset=done,
            failed_and_downstream_subset=target - done,
            requested_runs_for_target_roots=True,
        )
        ended = time.time()
        instance.update_backfill(
            stored.with_asset_backfill_data(data, instance, graph)
            .with_status(BulkActionStatus.COMPLETED_FAILED)
            .with_end_timestamp(ended)
            .with_error(error)
        )
        again = instance.get_backfill("pinned")
        assert again is not None
        assert (again.status, again.backfill_end_timestamp, again.error) == (
            BulkActionStatus.COMPLETED_FAILED,
            ended,
            error,
        )
        read = again.get_asset_backfill_data(graph)
        assert read.materialized_subset == done and read.failed_and_downstream_subset == target - done
        listed = instance.get_backfills(filters=BulkActionsFilter(statuses=[BulkActionStatus.COMPLETED_FAILED]))
        assert [b.backfill_id for b in listed] == ["pinned"]
    assert {"REQUESTED", "CANCELING", "CANCELED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED"} <= {
        status.name for status in BulkActionStatus
    }


@pins("BulkActionsTable", "pack_value", "PartitionsSubset")
def test_the_mirror_s_row_and_per_asset_serialization_read_back_through_the_instance():
    """backfill_row.py reads the status column of `bulk_actions` and writes status and body;
    backfill_body.py splices per-asset items of a packed AssetGraphSubset (`__mapping_items__`
    pairs of packed key and subset) into a packed PartitionBackfill (`asset_backfill_data`)."""
    graph = DEFINITIONS.resolve_asset_graph()
    target = AssetGraphSubset.from_asset_partition_set(
        {AssetKeyPartitionKey(raw.key, day) for day in ("2024-01-01", "2024-01-02")}, graph
    )
    (subset,) = target.partitions_subsets_by_asset_key.values()
    assert isinstance(subset, PartitionsSubset)
    packed = pack_value(target)
    assert set(packed) == {"__class__", "partitions_subsets_by_asset_key", "non_partitioned_asset_keys"}
    [(key, item)] = packed["partitions_subsets_by_asset_key"]["__mapping_items__"]
    assert key == pack_value(raw.key) and item == pack_value(subset.to_serializable_subset())
    assert set(BulkActionsTable.c.keys()) >= {"key", "status", "body"}
    with dg.instance_for_test() as instance:
        backfill = PartitionBackfill.from_asset_graph_subset(
            backfill_id="row",
            backfill_timestamp=time.time(),
            tags={},
            dynamic_partitions_store=instance,
            asset_graph_subset=target,
            title=None,
            description=None,
            run_config=None,
        )
        instance.add_backfill(backfill)
        assert set(pack_value(backfill)["asset_backfill_data"]) >= {"target_subset", "materialized_subset"}
        assert stored_status(instance, "row") == BulkActionStatus.REQUESTED
        assert stored_status(instance, "gone") is None
        done = backfill.with_status(BulkActionStatus.COMPLETED_SUCCESS)

        assert not write_if_status(instance, "row", BulkActionStatus.CANCELING, done.status, serialize_value(done))
        assert instance.get_backfill("row") == backfill
        assert write_if_status(instance, "row", BulkActionStatus.REQUESTED, done.status, serialize_value(done))
        assert instance.get_backfill("row") == done
        listed = instance.get_backfills(filters=BulkActionsFilter(statuses=[BulkActionStatus.COMPLETED_SUCCESS]))
        assert [b.backfill_id for b in listed] == ["row"]


# -- backfill/running/launcher.py: workspace load targets and submitting a run --------------


@pins("WorkspaceProcessContext", "ModuleTarget", "PythonFileTarget", "WorkspaceLoadTarget")
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Error loading repository location")  # Dagster's own, on the failed load
def test_a_workspace_of_a_file_that_fails_to_load_names_the_error(tmp_path):
    """The load targets as `_load_target` builds them, and what `_check_loaded` reads."""
    broken = tmp_path / "broken_location.py"
    broken.write_text("raise RuntimeError('this location does not load')\n")
    module = ModuleTarget("some.module", attribute=None, working_directory=str(tmp_path), location_name=None)
    assert isinstance(module, WorkspaceLoadTarget)
    target = PythonFileTarget(str(broken), attribute=None, working_directory=str(tmp_path), location_name=None)
    assert isinstance(target, WorkspaceLoadTarget)
    with dg.instance_for_test() as instance, WorkspaceProcessContext(instance, target, version=dg.__version__) as ws:
        context = ws.create_request_context()
        [name] = context.code_location_names
        error = context.get_code_location_error(name)
        assert error is not None and "broken_location.py" in error.message


@pins("submit_asset_run")
def test_submit_asset_run_is_the_coroutine_the_launcher_awaits():
    assert inspect.iscoroutinefunction(submit_asset_run)  # the launcher runs it with asyncio.run
    assert list(inspect.signature(submit_asset_run).parameters) == [
        "run_id",
        "run_request",
        "run_request_index",
        "instance",
        "workspace_process_context",
        "workspace",
        "run_request_execution_data_cache",
        "debug_crash_flags",
        "logger",
    ]


# -- deploy/deployments.py: asking a code server what it loaded ------------------------------


@pins("DagsterGrpcClient", "DagsterUserCodeUnreachableError", "deserialize_value")
def test_the_grpc_client_of_a_port_nobody_serves_raises_unreachable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = DagsterGrpcClient(port=port, host="127.0.0.1")
    with pytest.raises(DagsterUserCodeUnreachableError):
        client.list_repositories()
    # What a server that failed to load replies, serialized, reads back as the error.
    error = SerializableErrorInfo(message="ImportError: no module\n", stack=["line 1\n"], cls_name="ImportError")
    loaded = deserialize_value(serialize_value(error))
    assert isinstance(loaded, SerializableErrorInfo) and loaded.message == error.message
    assert "ImportError" in loaded.to_string()


# -- deploy/versioning.py and automation/schedule.py ----------------------------------------


@pins("replace")
def test_replace_rebuilds_definitions_with_the_fields_given():
    definitions = dg.Definitions(assets=[raw], metadata={"a": dg.MetadataValue.text("1")})
    replaced = replace(definitions, assets=[raw, by_region], metadata={"b": dg.MetadataValue.text("2")})
    assert isinstance(replaced, dg.Definitions)
    assert list(replaced.assets or []) == [raw, by_region]
    assert dict(replaced.metadata or {}) == {"b": dg.MetadataValue.text("2")}
    assert list(definitions.assets or []) == [raw]  # the original is untouched


@pins("is_valid_cron_string", "reverse_cron_string_iterator")
def test_the_cron_helpers_check_a_cron_and_list_its_fires_newest_first():
    assert is_valid_cron_string("0 6 * * 1-5") and not is_valid_cron_string("every weekday at six")
    monday = datetime(2024, 1, 8, 6, tzinfo=UTC)
    fires = list(itertools.islice(reverse_cron_string_iterator(monday.timestamp(), "0 6 * * 1-5", "UTC"), 3))
    # At or before the timestamp, newest first, skipping the weekend.
    assert fires == [monday, datetime(2024, 1, 5, 6, tzinfo=UTC), datetime(2024, 1, 4, 6, tzinfo=UTC)]
    [berlin] = itertools.islice(reverse_cron_string_iterator(monday.timestamp(), "0 6 * * *", "Europe/Berlin"), 1)
    assert (berlin.hour, str(berlin.tzinfo)) == (6, "Europe/Berlin") and berlin < monday


# -- a worker's runs ------------------------------------------------------------------------

_PINNED_DAYS = dg.DailyPartitionsDefinition("2024-01-01", end_date="2024-01-10")


def _asset_job() -> dg.JobDefinition:
    """A daily asset that runs partition ranges, and an unpartitioned one downstream of it."""
    with quiet_dagster_betas():  # backfill_policy is a beta parameter

        @dg.asset(partitions_def=_PINNED_DAYS, backfill_policy=dg.BackfillPolicy.single_run())
        def days(context: dg.AssetExecutionContext) -> None:
            context.log.info(f"days {context.partition_keys}")

        @dg.asset(deps=[days])
        def total() -> None:
            pass

        return dg.Definitions(assets=[days, total]).resolve_implicit_global_asset_job_def()


def _recorded(instance: dg.DagsterInstance, result: dg.ExecuteInProcessResult) -> tuple:
    """What a run recorded, but its id: tags, asset selection, snapshots, events, materializations."""
    run = instance.get_run_by_id(result.run_id)
    assert run is not None
    return (
        result.success,
        run.tags,
        run.asset_selection,
        run.job_snapshot_id,
        run.execution_plan_snapshot_id,
        [event.event_type_value for event in result.all_events],
        [(event.asset_key, event.partition) for event in result.get_asset_materialization_events()],
    )


@pins("InMemoryJob", "core_execute_in_process", "merge_run_tags")
def test_an_asset_s_in_process_job_built_once_records_each_run_as_execute_in_process_does(instance):
    """backfill/running/asset_runs.py: a worker's runs of an asset through its in-process job built
    once (Dagster's execute_in_process body) record what execute_in_process records, each time."""
    job = _asset_job()
    # The parameters AssetRuns passes, by name, and the job wrapper it builds once.
    assert {"run_config", "job", "instance", "output_capturing_enabled", "raise_on_error", "run_tags"} | {
        "asset_selection",
        "run_id",
    } <= set(inspect.signature(core_execute_in_process).parameters)
    assert {"job_def", "partition_key", "tags", "asset_selection", "instance", "run_config"} <= set(
        inspect.signature(merge_run_tags).parameters
    )
    assert InMemoryJob(job_def=job).get_definition() is job
    days, total = dg.AssetKey("days"), dg.AssetKey("total")
    runs = AssetRuns(job)
    range_tags = {
        "dagster/asset_partition_range_start": "2024-01-03",
        "dagster/asset_partition_range_end": "2024-01-05",
    }
    for key, partition, tags in [
        (days, "2024-01-02", {"team": "a"}),
        (days, "2024-01-06", {}),  # the same asset again: its job is reused
        (days, None, range_tags),
        (total, None, {"team": "b"}),
    ]:
        ours = runs.execute(instance, key, partition, tags)
        dagsters = job.execute_in_process(
            instance=instance, asset_selection=[key], partition_key=partition, tags=tags, raise_on_error=False
        )
        assert _recorded(instance, ours) == _recorded(instance, dagsters)
        assert ours.success and ours.run_id != dagsters.run_id
    # The run takes the id given: a node run's lease proof is bound to it (dagster_instance/lease_proof.py).
    given = str(uuid.uuid4())
    assert runs.execute(instance, days, "2024-01-07", {}, given).run_id == given
    # Bad input fails as execute_in_process fails, with no run recorded.
    before = len(instance.get_run_records())
    with pytest.raises(dg.DagsterUnknownPartitionError, match="1999-01-01"):
        runs.execute(instance, days, "1999-01-01", {})
    with pytest.raises(dg.DagsterInvalidSubsetError, match="nope"):
        runs.execute(instance, dg.AssetKey("nope"), None, {})
    assert len(instance.get_run_records()) == before


def test_a_worker_s_runs_of_an_asset_build_its_subset_job_once(instance, monkeypatch):
    """create_run_for_job asks the run's job for its subset of the asset selection on every
    run (Dagster builds a new job, and its snapshot, each time); AssetRuns' jobs build it once."""
    built = []
    build = dg.JobDefinition._get_job_def_for_asset_selection

    def counting(job: dg.JobDefinition, selection_data: object) -> dg.JobDefinition:
        built.append(job.name)
        return build(job, selection_data)

    monkeypatch.setattr(dg.JobDefinition, "_get_job_def_for_asset_selection", counting)
    runs = AssetRuns(_asset_job())
    assert runs.execute(instance, dg.AssetKey("days"), "2024-01-02", {}).success
    after_the_first_run = len(built)  # the asset's job, and its subset for the run
    for partition in ("2024-01-03", "2024-01-04"):
        assert runs.execute(instance, dg.AssetKey("days"), partition, {}).success
    assert len(built) == after_the_first_run, built


def test_a_worker_s_runs_of_several_assets_build_the_whole_job_s_snapshot_once(instance, monkeypatch):
    """Each asset's run stores the snapshot of the whole job its job is a subset of (Dagster's
    parent snapshot); AssetRuns builds it once for every asset, where as_ephemeral_job per asset
    built the whole job, and its snapshot, again for each."""
    whole_job_snapshots = []
    from_job_def = JobSnap.from_job_def

    def counting(job: dg.JobDefinition) -> JobSnap:
        if not job.is_subset:
            whole_job_snapshots.append(job.name)
        return from_job_def(job)

    monkeypatch.setattr(JobSnap, "from_job_def", counting)
    runs = AssetRuns(_asset_job())
    assert runs.execute(instance, dg.AssetKey("days"), "2024-01-02", {}).success
    assert runs.execute(instance, dg.AssetKey("total"), None, {}).success
    assert whole_job_snapshots == ["__ASSET_JOB"]


# -- the webserver's and the daemon's handling of backfills ------------------------------

ENGINE_DEFS = "partition_assets_tests.support.locations.engine_defs"


def test_dagster_internals_the_engine_relies_on():
    """What partition_assets/instance/ (engine_instance.py, daemon_filter.py) and backfill/dagster_ui/ (mirror.py,
    adoption.py) read and write in the webserver's and daemon's handling of backfills."""
    # The webserver's launch stores the backfill through the instance, and Cancel is a status write.
    assert "instance.add_backfill(backfill)" in inspect.getsource(graphql_backfill.create_and_launch_partition_backfill)
    assert "with_status(BulkActionStatus.CANCELING)" in inspect.getsource(graphql_backfill.cancel_partition_backfill)
    # Re-execute copies the parent's tags and adds this one.
    assert "PARENT_BACKFILL_ID_TAG: backfill.backfill_id" in inspect.getsource(
        graphql_backfill.retry_partition_backfill
    )
    assert PARENT_BACKFILL_ID_TAG == PARENT_BACKFILL_TAG
    # The tag Dagster (Dagster+) puts its creator's user in, on a run or a backfill (its `user`):
    # the approval policy's launcher and Launchpad approver (backfill/state/approval.py).
    assert USER_TAG == DAGSTER_USER_TAG
    assert "self.tags.get(USER_TAG)" in inspect.getsource(PartitionBackfill.user.fget)
    # The daemon lists what it executes, cancels and fails through instance.get_backfills, from this module.
    assert daemon_backfill.__name__ == BACKFILL_DAEMON_MODULE
    iteration = inspect.getsource(daemon_backfill.execute_backfill_iteration)
    for status in ("REQUESTED", "CANCELING", "FAILING"):
        assert (
            f"instance.get_backfills(\n        filters=BulkActionsFilter(statuses=[BulkActionStatus.{status}])"
            in iteration
        )
    # The statuses and fields the mirror writes.
    assert {"REQUESTED", "CANCELING", "CANCELED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED"} <= {
        s.name for s in BulkActionStatus
    }
    assert {"status", "tags", "backfill_end_timestamp", "error", "asset_backfill_data"} <= set(
        PartitionBackfill._fields
    )
    assert {"target_subset", "requested_subset", "materialized_subset", "failed_and_downstream_subset"} <= set(
        AssetBackfillData._fields
    )
    assert callable(AssetGraphSubset.from_asset_partition_set)
    # instance_class: extra config keys reach the class's __init__.
    with dg.instance_for_test(
        overrides={
            "instance_class": {"module": "partition_assets.instance", "class": "EngineBackfillInstance"},
            "partition_assets": {"engine_modules": [ENGINE_DEFS]},
        }
    ) as instance:
        assert isinstance(instance, EngineBackfillInstance)
        assert instance.engine_modules == [ENGINE_DEFS]
