"""partition_assets: backfill-safe partitioned assets for Dagster + PySpark.

The public API is the flat `__all__` below: `from partition_assets import definitions, daily,
mappings, backfill_gate, ...` is all a project imports (docs/reference/api.md lists each
name, docs/guide/your-project.md uses them). Each name is imported from the module that
defines it the first time it is read: the command line starts without Dagster or Spark
(`import partition_assets.cli.main` runs this file too).

The commands of `partition-assets backfill` are functions here too (`plan_backfill`,
`run_backfill`, `backfill_status`, ...), each taking a `BackfillSpec` or a backfill id and
the Dagster instance; those that run nodes report to a `Console` (`PrintingConsole` prints).

Rooms: `partitions` (definitions and mappings), `spark` (session resource), `storage` (IO
managers), `backfill` (the engine), `automation` (its Dagster jobs and sensors), `cli`, and
`example` (the example code location, written against this API alone).

Not guaranteed: a name of a module below (e.g. `partition_assets.backfill.model.Node`)
may move between releases; the names of `__all__` stay.
"""

from partition_assets.lazy_names import exported_lazily

__all__ = [
    "BackfillSpec",
    "Budget",
    "CodeLocationError",
    "Console",
    "DELTA_IO_MANAGER_KEY",
    "InputOptions",
    "PartitionAssetsError",
    "PartitionScopeError",
    "PrintingConsole",
    "ReleaseExpiredError",
    "ReleasePin",
    "SilentConsole",
    "SparkDeltaIOManager",
    "SparkParquetIOManager",
    "SparkResource",
    "TableNotFoundError",
    "TableSchemaError",
    "UnguardedScriptError",
    "UnknownReleaseError",
    "WiringError",
    "approve_backfill",
    "backfill_approval",
    "backfill_gate",
    "backfill_ledger",
    "backfill_operation_jobs",
    "backfill_status",
    "cancel_backfill",
    "catch_up_sensor",
    "coordinator_takeover_sensor",
    "cron",
    "daily",
    "declare_schema_change",
    "default_schedule_status",
    "default_status",
    "definitions",
    "detach_backfill",
    "diff_backfill",
    "discard_backfill",
    "extend_backfill",
    "dynamic",
    "eager_partitions_sensor",
    "gate_checks",
    "hourly",
    "lake_root",
    "list_backfills",
    "mappings",
    "monthly",
    "multi",
    "partitioned_schedule",
    "pause_backfill",
    "pause_backfill_job",
    "pinned_versions",
    "plan_backfill",
    "publish_backfill",
    "quiet_dagster_betas",
    "read_tables",
    "resume_backfill",
    "retract_partitions",
    "retry_backfill",
    "rollback_backfill",
    "run_backfill",
    "sparse_backfill_job",
    "static",
    "unpause_backfill",
    "vacuum",
    "weekly",
    "with_git_versions",
]

# The module each public name is imported from, on first use (PEP 562).
_HOMES = {
    "partition_assets._wiring": ("DELTA_IO_MANAGER_KEY", "definitions", "lake_root"),
    "partition_assets.partitions": (
        "cron",
        "daily",
        "dynamic",
        "hourly",
        "mappings",
        "monthly",
        "multi",
        "static",
        "weekly",
    ),
    "partition_assets.storage": (
        "InputOptions",
        "ReleasePin",
        "SparkDeltaIOManager",
        "SparkParquetIOManager",
        "declare_schema_change",
        "pinned_versions",
        "read_tables",
        "vacuum",
    ),
    "partition_assets.spark": ("SparkResource",),
    "partition_assets.backfill": ("Budget", "backfill_approval", "backfill_gate", "gate_checks"),
    "partition_assets.automation": (
        "catch_up_sensor",
        "coordinator_takeover_sensor",
        "default_schedule_status",
        "default_status",
        "eager_partitions_sensor",
        "partitioned_schedule",
        "pause_backfill_job",
        "sparse_backfill_job",
    ),
    "partition_assets.automation.operations": ("backfill_operation_jobs",),
    # The commands, as a script calls them (docs/guide/your-project.md, "A script").
    "partition_assets.backfill.commands": (
        "Console",
        "PrintingConsole",
        "SilentConsole",
        "approve_backfill",
        "backfill_ledger",
        "backfill_status",
        "cancel_backfill",
        "detach_backfill",
        "diff_backfill",
        "discard_backfill",
        "extend_backfill",
        "list_backfills",
        "pause_backfill",
        "plan_backfill",
        "publish_backfill",
        "resume_backfill",
        "retract_partitions",
        "retry_backfill",
        "rollback_backfill",
        "run_backfill",
        "unpause_backfill",
    ),
    "partition_assets.backfill.planning.spec": ("BackfillSpec",),
    "partition_assets.deploy": ("with_git_versions",),
    "partition_assets.dagster_betas": ("quiet_dagster_betas",),
    "partition_assets.errors": (
        "CodeLocationError",
        "PartitionAssetsError",
        "PartitionScopeError",
        "TableNotFoundError",
        "TableSchemaError",
        "UnknownReleaseError",
        "ReleaseExpiredError",
        "UnguardedScriptError",
        "WiringError",
    ),
}
__getattr__, __dir__ = exported_lazily(__name__, _HOMES)
