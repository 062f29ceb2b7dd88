"""The one seam between partition_assets and Dagster's private modules (`dagster._*`).

Dagster's public API does not reach everything this library needs: the asset graph's node
types and subsets, backfill records and statuses (and their table and serialized form,
written per asset by backfill/dagster_ui/), the run-launching internals (workspace
load targets, `submit_asset_run`), the SQLite storages and compute-log manager that
dagster_instance/storage.py extends, the SQL run storage under Dagster's composite wrapper
(dagster_instance/key_values.py finds it; backfill/state/store.py keeps its tables there) and its
key-value table (compare-and-set: dagster_instance/key_values.py), the gRPC client of a code server,
serialized errors, cron arithmetic, the body of `execute_in_process` (a worker runs each
asset's in-process job built once: backfill/running/asset_runs.py), `replace` on a record,
the SQL event log's batch write and asset event data, planned materializations included
(backfill/publishing/event_batches.py),
where Dagster's migration scripts live (dagster_instance/migrations.py reads them once per process),
its asset status cache read as subsets (dagster_instance/partition_status.py), its telemetry
module (dagster_instance/telemetry.py reads the telemetry ids once per process).
Every private name the library imports is imported here and nowhere else. Two private
modules are named as strings instead, where a module name is what counts:
`dagster._daemon.backfill` (instance/engine_instance.py compares its callers' module with
it) and `dagster._core.storage.legacy_storage` (dagster_instance/storage.py has Dagster load its
composite storage from it). partition_assets_tests/integration/test_dagster_internals.py pins each name and
both modules with the behaviour the library relies on, and fails when a name is added here
without a pin or a private import appears elsewhere: a Dagster upgrade that moves or
changes one fails there, naming it.

Not guaranteed: these names follow Dagster's private modules, which may change in any
Dagster release; pyproject.toml allows one minor series of Dagster for that reason, and
constraints.txt pins the release `make install` installs and the tests pass on.
"""

from typing import TYPE_CHECKING, Any

from dagster._core import telemetry as dagster_telemetry
from dagster._core.definitions.asset_checks.asset_check_evaluation import AssetCheckEvaluationTargetMaterializationData
from dagster._core.definitions.assets.graph.asset_graph import AssetGraph
from dagster._core.definitions.assets.graph.asset_graph_subset import AssetGraphSubset
from dagster._core.definitions.assets.graph.base_asset_graph import BaseAssetGraph, BaseAssetNode
from dagster._core.definitions.events import AssetKeyPartitionKey
from dagster._core.definitions.job_base import InMemoryJob
from dagster._core.definitions.partitions.subset import PartitionsSubset
from dagster._core.definitions.partitions.utils.multi import PartitionDimensionDefinition
from dagster._core.errors import DagsterUserCodeUnreachableError
from dagster._core.events import AssetMaterializationPlannedData, AssetObservationData, StepMaterializationData
from dagster._core.execution.backfill import BulkActionsFilter, BulkActionStatus, PartitionBackfill
from dagster._core.execution.compute_logs import redirect_to_file
from dagster._core.execution.execute_in_process import core_execute_in_process, merge_run_tags
from dagster._core.execution.submit_asset_runs import submit_asset_run
from dagster._core.instance.ref import InstanceRef, compute_logs_directory
from dagster._core.instance.types import DynamicPartitionsStore
from dagster._core.storage.compute_log_manager import CapturedLogContext, ComputeIOType
from dagster._core.storage.event_log.base import EventLogStorage
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage
from dagster._core.storage.event_log.sqlite.consolidated_sqlite_event_log import (
    SQLITE_BUSY_TIMEOUT_SECONDS,
    ConsolidatedSqliteEventLogStorage,
)
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.legacy_storage import LegacyRunStorage
from dagster._core.storage.local_compute_log_manager import IO_TYPE_EXTENSION, LocalComputeLogManager
from dagster._core.storage.partition_status_cache import (
    AssetStatusCacheValue,
    get_and_update_asset_status_cache_value,
)
from dagster._core.storage.runs.schema import BulkActionsTable, KeyValueStoreTable
from dagster._core.storage.runs.sql_run_storage import SqlRunStorage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.sql import ALEMBIC_SCRIPTS_LOCATION
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import ModuleTarget, PythonFileTarget, WorkspaceLoadTarget
from dagster._record import replace
from dagster._serdes import ConfigurableClassData, deserialize_value, pack_value
from dagster._utils import ensure_file, touch_file
from dagster._utils.error import SerializableErrorInfo, serializable_error_info_from_exc_info
from dagster._utils.schedules import is_valid_cron_string, reverse_cron_string_iterator

if TYPE_CHECKING:  # for type checkers; at run time `__getattr__` below imports it on first use
    from dagster._grpc.client import DagsterGrpcClient

__all__ = [
    "ALEMBIC_SCRIPTS_LOCATION",
    "AssetCheckEvaluationTargetMaterializationData",
    "AssetGraph",
    "AssetGraphSubset",
    "AssetKeyPartitionKey",
    "AssetMaterializationPlannedData",
    "AssetObservationData",
    "AssetStatusCacheValue",
    "BaseAssetGraph",
    "BaseAssetNode",
    "BulkActionStatus",
    "BulkActionsTable",
    "BulkActionsFilter",
    "CapturedLogContext",
    "ComputeIOType",
    "ConfigurableClassData",
    "ConsolidatedSqliteEventLogStorage",
    "DagsterGrpcClient",
    "DagsterUserCodeUnreachableError",
    "DynamicPartitionsStore",
    "EventLogStorage",
    "IO_TYPE_EXTENSION",
    "InMemoryJob",
    "InstanceRef",
    "KeyValueStoreTable",
    "LegacyRunStorage",
    "LocalComputeLogManager",
    "ModuleTarget",
    "PartitionBackfill",
    "PartitionDimensionDefinition",
    "PartitionsSubset",
    "PythonFileTarget",
    "SQLITE_BUSY_TIMEOUT_SECONDS",
    "SerializableErrorInfo",
    "SqlEventLogStorage",
    "SqlEventLogStorageTable",
    "SqlRunStorage",
    "SqliteEventLogStorage",
    "SqliteRunStorage",
    "StepMaterializationData",
    "WorkspaceLoadTarget",
    "WorkspaceProcessContext",
    "compute_logs_directory",
    "core_execute_in_process",
    "dagster_telemetry",
    "deserialize_value",
    "ensure_file",
    "get_and_update_asset_status_cache_value",
    "is_valid_cron_string",
    "merge_run_tags",
    "pack_value",
    "redirect_to_file",
    "replace",
    "reverse_cron_string_iterator",
    "serializable_error_info_from_exc_info",
    "submit_asset_run",
    "touch_file",
]


def __getattr__(name: str) -> Any:
    """`DagsterGrpcClient`, imported on first use: only a deploy talks to a code server, and
    importing gRPC took ~50 ms of every command's start-up."""
    if name == "DagsterGrpcClient":
        from dagster._grpc.client import DagsterGrpcClient

        return DagsterGrpcClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
