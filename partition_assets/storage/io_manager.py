"""Dagster IO manager: PySpark DataFrames in and out of one Delta table per asset."""


import json
from typing import Literal

import dagster as dg
from pydantic import Field
from pyspark.sql import DataFrame

from partition_assets.partitions.mappings import SELF_DEPENDENCY_METADATA
from partition_assets.spark import SparkResource
from partition_assets.storage.delta_table import (
    open_table,
    partitions_without_files,
    read_partitions,
    replace_partitions,
)
from partition_assets.storage.partition_scope import (
    PartitionScope,
    PartitionScopeError,
    partition_columns,
)
from partition_assets.storage.staging import stage_dataframe


class InputOptions(dg.Config):
    """How an input is read; set per input as AssetIn metadata or as run config
    (`ops: {<asset>: {inputs: {<input>: {version: 3}}}}`), run config winning."""

    partitions: Literal["mapped", "all"] = Field(
        default="mapped", description="'all' reads every partition, whatever the mapping."
    )
    version: int | None = Field(default=None, description="Read the table as of this version.")
    timestamp: str | None = Field(
        default=None, description="Read the table as of this ISO-8601 time."
    )


class SparkDeltaIOManager(dg.ConfigurableIOManager):
    """Stores each asset as a Delta table at `<root_uri>/<asset key path>`.

    A run's output replaces exactly the run's partitions in one atomic commit.
    Inputs are read back filtered to the upstream partitions the mapping names.
    Asset metadata:
    - `partition_column` / `partition_columns`: storage column names (see partition_scope);
    - `allow_empty: True`: an empty frame clears the run's partitions instead of failing;
    - `allow_new_columns: True`: new columns extend the table's schema (as nullable).
    Inputs take InputOptions.
    """

    root_uri: str
    spark: dg.ResourceDependency[SparkResource]

    @classmethod
    def input_config_schema(cls) -> type[dg.Config]:
        return InputOptions

    def table_uri(self, asset_key: dg.AssetKey) -> str:
        return "/".join([self.root_uri.rstrip("/"), *asset_key.path])

    def handle_output(self, context: dg.OutputContext, obj: DataFrame) -> None:
        if not isinstance(obj, DataFrame):
            raise TypeError(
                f"asset {context.asset_key.to_user_string()} returned {type(obj).__name__}; "
                "SparkDeltaIOManager stores pyspark.sql.DataFrame outputs"
            )
        scope = _output_scope(context)
        table_uri = self.table_uri(context.asset_key)
        staged = stage_dataframe(obj, table_uri, scope)
        if not staged.files and not context.definition_metadata.get("allow_empty", False):
            raise PartitionScopeError(
                f"asset {context.asset_key.to_user_string()} produced no rows for "
                f"{scope.describe() if scope else 'the table'}; nothing was written. "
                "Set metadata allow_empty=True to clear the partitions instead."
            )
        result = replace_partitions(
            staged,
            scope,
            custom_metadata={"dagster_run_id": context.run_id},
            allow_new_columns=bool(context.definition_metadata.get("allow_new_columns", False)),
        )
        context.add_output_metadata(
            {
                "table_uri": table_uri,
                "delta_version": result.version,
                "rows": staged.num_records,
                "rows_by_partition": dg.MetadataValue.json(
                    {"/".join(key) or "table": rows for key, rows in result.rows_by_partition.items()}
                ),
                "files_added": result.files_added,
                "files_removed": result.files_removed,
            }
        )

    def load_input(self, context: dg.InputContext) -> DataFrame | None:
        options = InputOptions(**{**_known_options(context.definition_metadata), **(context.config or {})})
        table_uri = self.table_uri(context.asset_key)
        table = open_table(table_uri, version=options.version, timestamp=options.timestamp)
        is_self_dependency = context.definition_metadata.get(SELF_DEPENDENCY_METADATA, False)
        if table is None and is_self_dependency:
            return None  # the asset's first run: there is no predecessor yet
        if table is None:
            raise FileNotFoundError(
                f"no Delta table for upstream asset {context.asset_key.to_user_string()} at "
                f"{table_uri}: materialize it first"
            )
        scope = None
        if context.has_asset_partitions and options.partitions == "mapped":
            keys = context.asset_partition_keys
            if not keys:
                # e.g. the first partition of a self-dependency: there is no predecessor.
                return None
            upstream_metadata = (
                context.upstream_output.definition_metadata if context.upstream_output else {}
            )
            scope = PartitionScope.for_keys(
                context.asset_partitions_def,
                keys,
                partition_columns(context.asset_partitions_def, upstream_metadata),
            )
            # A self-dependency in a range run also maps to partitions this run replaces.
            missing = set() if is_self_dependency else partitions_without_files(table, scope)
            if missing:
                context.log.warning(
                    f"{context.asset_key.to_user_string()}: no rows stored for "
                    f"{len(missing)} of the {len(scope)} partitions this input maps to: "
                    f"{json.dumps(sorted(missing)[:5])}"
                )
        return read_partitions(self.spark.spark_session, table, scope)


def _known_options(metadata: dict | None) -> dict:
    return {k: v for k, v in (metadata or {}).items() if k in InputOptions.model_fields}


def _output_scope(context: dg.OutputContext) -> PartitionScope | None:
    if not context.has_asset_partitions:
        return None
    partitions_def = context.asset_partitions_def
    return PartitionScope.for_keys(
        partitions_def,
        context.asset_partition_keys,
        partition_columns(partitions_def, context.definition_metadata),
    )
