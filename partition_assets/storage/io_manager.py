"""Dagster IO managers: PySpark DataFrames in and out of one table per asset.

Generic over the table format: everything format-specific (staging, validation,
commits, merges, retries) is the format's `write` / `read`. What each format does
not guarantee is in its module docstrings (the delta package, parquet_table).

A node run of a staged backfill (its run tags say so, see partition_assets/run_tags.py, and
its lease proof shows that the backfill's coordinator launched it: dagster_instance/lease_proof.py)
stages its output instead of publishing it and reads its inputs as the backfill sees them
(`StagingFormat.read_overlay`). Every other write, a run whose tags claim a backfill it
cannot prove included, holds a lease on its partitions while it lasts and fails fast when a
backfill holds them (storage/leases.py).
"""

import json
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from typing import ClassVar, Literal

import dagster as dg
from pydantic import Field
from pyspark.sql import DataFrame

from partition_assets.dagster_instance.lease_proof import proven_backfill
from partition_assets.deploy.runtime import RUNTIME_METADATA, runtime_versions
from partition_assets.deploy.versioning import git_sha_metadata
from partition_assets.errors import (
    LeaseProofError,
    MissingPredecessorError,
    OutputTypeError,
    PartitionLeasedError,
    TableNotFoundError,
)
from partition_assets.partitions.mappings import SELF_DEPENDENCY_METADATA
from partition_assets.run_tags import (
    BACKFILL_ID_TAG,
    INPUTS_AS_OF_TAG,
    partitions_of_run,
    pinned_inputs,
    staging_backfill,
)
from partition_assets.spark import SparkResource
from partition_assets.storage.delta import DeltaFormat
from partition_assets.storage.leases import check_write, run_lease
from partition_assets.storage.parquet_table import ParquetFormat
from partition_assets.storage.partition_scope import PartitionScope, partition_columns
from partition_assets.storage.run_release import released_version
from partition_assets.storage.schema_change import SCHEMA_CHANGE_METADATA_KEY
from partition_assets.storage.table_format import (
    StagingFormat,
    TableFormat,
    WriteOptions,
    required_staging,
    staging,
    versioned,
)
from partition_assets.storage.table_formats import register_format

# Output metadata of a staged write: the backfill it was staged for (readers cannot see it yet).
STAGED_FOR_METADATA = "staged_for_backfill"
# Commit (and staging manifest) metadata of every write: its run, and the table versions it read.
RUN_ID_METADATA = "dagster_run_id"
INPUT_VERSIONS_METADATA = "input_versions"
# Output metadata of a write whose inputs were pinned: "original" or the ISO time (backfill/publishing/originals.py).
INPUTS_AS_OF_METADATA = "inputs_as_of"
# dagster-deltalake's asset metadata naming the folder of the table under the root.
SCHEMA_METADATA = "schema"


class InputOptions(dg.Config):
    """How an input is read: as AssetIn metadata, or as run config
    (`ops: {<asset>: {inputs: {<input>: {version: 3}}}}`) for inputs declared with
    `AssetIn(input_manager_key="io_manager")`. Run config wins."""

    partitions: Literal["mapped", "all"] = Field(
        default="mapped", description="'all' reads every partition, whatever the mapping."
    )
    version: int | None = Field(default=None, description="Read the table as of this version.")
    timestamp: str | None = Field(default=None, description="Read the table as of this ISO-8601 time.")


class SparkTableIOManager(dg.ConfigurableIOManager):
    """Stores each asset as a table at `<root_uri>/<asset key path>` (see `table_uri`).

    A run's output replaces exactly the run's partitions; inputs are read back
    filtered to the upstream partitions the mapping names. Asset metadata:
    - `partition_column` / `partition_columns`, or dagster-deltalake's `partition_expr`: storage
      column names (see partition_scope);
    - `schema`: the table's folder under the root, as dagster-deltalake places it (see `table_uri`);
    - `allow_empty: True`: an empty frame clears the run's partitions instead of failing;
    - `allow_new_columns: True`: new columns extend the table's schema (as nullable);
    - `merge_keys: [...]` (Delta): upsert on these keys within the run's partitions
      instead of replacing them; stored rows whose keys the frame lacks are kept;
    - `declare_schema_change(...)` (Delta): a staged backfill of the asset may drop, retype, add,
      rename or split columns, published in one commit (storage/schema_change.py); other writes
      keep refusing drops and retypes.
    """

    root_uri: str
    spark: dg.ResourceDependency[SparkResource]

    # The format of its tables: a subclass naming one picks it for the assets it stores
    # (SparkDeltaIOManager, SparkParquetIOManager) and registers it (storage/table_formats.py).
    table_format: ClassVar[TableFormat]

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: object) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if "table_format" in vars(cls):
            register_format(cls.table_format)

    @classmethod
    def input_config_schema(cls) -> type[dg.Config]:
        return InputOptions

    def table_uri(self, asset_key: dg.AssetKey, metadata: Mapping[str, object] | None = None) -> str:
        """`<root_uri>/<asset key path>`; with asset metadata `schema` (dagster-deltalake's
        convention), `<root_uri>/<schema>/<last part of the key>`, where dagster-deltalake's
        IO managers place the same asset."""
        schema = (metadata or {}).get(SCHEMA_METADATA)
        path = [str(schema), asset_key.path[-1]] if schema else asset_key.path
        return "/".join([self.root_uri.rstrip("/"), *path])

    def handle_output(self, context: dg.OutputContext, obj: DataFrame) -> None:
        """Writes `obj` to the asset's table: replaces exactly the run's partitions (or merges
        into them), or, in a node run of a staged backfill, stages it for the backfill.

        Raises:
            OutputTypeError: `obj` is not a pyspark DataFrame.
            PartitionLeasedError: Another backfill or run holds a lease on the run's partitions.
            LeaseProofError: The run's tags name a backfill, it carries no proof that the backfill's
                coordinator launched it (a re-execution, or tags typed in the Launchpad), and a
                backfill or another run holds a lease on its partitions.
            PartitionScopeError: The frame does not fit the run's partitions, or is empty without `allow_empty`.
            TableSchemaError: The frame breaks the table's schema or partitioning.
            UnsupportedByFormatError: The format cannot do what was asked (merge keys, or a staged
                backfill, on Parquet).
            ConcurrentPartitionWriteError: A merge kept losing to concurrent writers of its partitions.
            CommitError: The Delta commit could not be made; the table is unchanged.
            BackfillIdError: The run's backfill id tag cannot name a folder.
            EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is not a positive number.
            SparkServerGoneError: The Spark Connect server was killed or restarted while the run
                used it (SparkResource.naming_a_gone_server); nothing was committed.
        """
        with self.spark.naming_a_gone_server():
            self._handle_output(context, obj)

    def _handle_output(self, context: dg.OutputContext, obj: DataFrame) -> None:
        if not isinstance(obj, DataFrame):
            raise OutputTypeError(
                f"asset {context.asset_key.to_user_string()} returned {type(obj).__name__}; "
                f"{type(self).__name__} stores pyspark.sql.DataFrame outputs: return one"
            )
        metadata = context.definition_metadata
        input_versions = _input_versions.pop((context.run_id, context.step_key), {})
        tags, holder = _run_tags(context), _proven_backfill(context)
        staging_for = staging_backfill(tags, holder)
        options = WriteOptions(
            allow_empty=bool(metadata.get("allow_empty", False)),
            allow_new_columns=bool(metadata.get("allow_new_columns", False)),
            merge_keys=tuple(metadata.get("merge_keys") or ()),
            # Only a staged backfill may change columns, and only of an asset declaring it.
            allow_schema_change=SCHEMA_CHANGE_METADATA_KEY in metadata and staging_for is not None,
            # Who wrote it, from which inputs, on what: in the Delta log, or a staged write's manifest.
            commit_metadata={
                RUN_ID_METADATA: context.run_id,
                INPUT_VERSIONS_METADATA: json.dumps(input_versions),
                RUNTIME_METADATA: json.dumps(runtime_versions()),
                **git_sha_metadata(context),
            },
        )
        table_uri, scope = self.table_uri(context.asset_key, metadata), _output_scope(context)
        inputs_as_of = tags.get(INPUTS_AS_OF_TAG)
        if staging_for is not None:
            check_write(table_uri, scope, holder=staging_for)
            result = _staging_format(self.table_format, table_uri).stage(obj, table_uri, scope, options, staging_for)
        elif holder is not None:  # a node run of a backfill publishing per node: it holds the lease
            check_write(table_uri, scope, holder=holder)
            result = self.table_format.write(obj, table_uri, scope, options)
        else:
            with _production_lease(table_uri, scope, context.run_id, tags):
                result = self.table_format.write(obj, table_uri, scope, options)
        context.add_output_metadata(
            {
                "table_uri": result.table_uri,
                "table_format": self.table_format.name,
                **({STAGED_FOR_METADATA: staging_for} if staging_for else {}),
                INPUT_VERSIONS_METADATA: dg.MetadataValue.json(input_versions),
                **({INPUTS_AS_OF_METADATA: inputs_as_of} if inputs_as_of else {}),
                RUNTIME_METADATA: dg.MetadataValue.json(runtime_versions()),
                **({"delta_version": result.version} if result.version is not None else {}),
                "rows": result.rows,
                "rows_by_partition": dg.MetadataValue.json(
                    {"/".join(key) or "table": rows for key, rows in result.rows_by_partition.items()}
                ),
                "files_added": result.files_added,
                "files_removed": result.files_removed,
                **git_sha_metadata(context),
            }
        )

    def load_input(self, context: dg.InputContext) -> DataFrame | None:
        """The upstream table's rows of the partitions this input maps to (every row with
        `partitions="all"`): as of a pinned version or time when one is given, else as the run's
        backfill sees them while it stages, else (Delta) at the version of the release the run
        pinned at its start (storage/run_release.py: never a backfill half-published across
        tables), else as published. None for a self-dependency's
        first partition, which has no predecessor.

        Raises:
            TableNotFoundError: The upstream asset has no table (it never materialized).
            MissingPredecessorError: An earlier partition a self-dependency reads holds no data.
            UnsupportedByFormatError: A version or time pin, or a staged backfill, on a Parquet table.
            BackfillIdError: The run's backfill id tag cannot name a folder.
            JavaNotFoundError: The Spark session, started on first use, finds no Java >= 17.
            SparkConnectServerError: The Spark session's local Connect server could not be started.
            SparkServerGoneError: The Spark Connect server was killed or restarted while the run
                used it (SparkResource.naming_a_gone_server).
        """
        with self.spark.naming_a_gone_server():
            return self._load_input(context)

    def _load_input(self, context: dg.InputContext) -> DataFrame | None:
        options = InputOptions(**{**_known_options(context.definition_metadata), **(context.config or {})})
        upstream_metadata = context.upstream_output.definition_metadata if context.upstream_output else {}
        table_uri = self.table_uri(context.asset_key, upstream_metadata)
        pinned = pinned_inputs(_run_tags(context)).get(context.asset_key.to_user_string())
        if pinned is not None and options.version is None and options.timestamp is None:
            options = options.model_copy(update={"version": pinned})  # a re-run reading what the original read
        is_self_dependency = context.definition_metadata.get(SELF_DEPENDENCY_METADATA, False)
        scope = None
        if context.has_asset_partitions and options.partitions == "mapped":
            keys = context.asset_partition_keys
            if not keys:
                # e.g. the first partition of a self-dependency: there is no predecessor.
                return None
            scope = PartitionScope.for_keys(
                context.asset_partitions_def,
                keys,
                partition_columns(context.asset_partitions_def, upstream_metadata),
            )
        staging_for = staging_backfill(_run_tags(context), _proven_backfill(context))
        with_versions = versioned(self.table_format)
        if with_versions is not None and _reads_by_release(options, staging_for):
            # Never a backfill half-published across tables: the version of the run's release.
            version = released_version(context, self.root_uri.rstrip("/"), with_versions, table_uri)
            options = options.model_copy(update={"version": version})
        if is_self_dependency and scope is not None:
            self._check_predecessors(context, table_uri, scope, staging_for)
        if staging_for is not None and options.version is None and options.timestamp is None:
            frame = _staging_format(self.table_format, table_uri).read_overlay(
                self.spark.spark_session, table_uri, scope, staging_for
            )
        else:
            frame = self.table_format.read(
                self.spark.spark_session,
                table_uri,
                scope,
                version=options.version,
                timestamp=options.timestamp,
            )
        _record_input_version(context, self.table_format, table_uri, options, staging_for)
        if frame is None:
            if is_self_dependency:
                return None  # the run starts at the asset's first partition: no predecessor

            raise TableNotFoundError(
                f"no table for upstream asset {context.asset_key.to_user_string()} at {table_uri}: materialize it first"
            )
        # A self-dependency in a range run also maps to partitions this run replaces.
        if scope is not None and not is_self_dependency:
            missing = self._missing_partitions(table_uri, scope, staging_for)
            if missing:
                context.log.warning(
                    f"{context.asset_key.to_user_string()}: no rows stored for "
                    f"{len(missing)} of the {len(scope)} partitions this input maps to: "
                    f"{json.dumps(sorted(missing)[:5])}"
                )
        return frame

    def _check_predecessors(
        self, context: dg.InputContext, table_uri: str, scope: PartitionScope, staging_for: str | None
    ) -> None:
        """Raises MissingPredecessorError when a partition before the run's own that a
        self-dependency maps to holds no data (published, or staged by the run's
        backfill): the same whether or not the table exists, so that a running value
        never restarts from nothing in the middle of history."""
        own = _run_partition_rows(context, scope.columns)
        predecessors = PartitionScope(scope.columns, scope.rows - own)
        if not predecessors.rows:
            return  # the run starts at the asset's first partition
        missing = self._missing_partitions(table_uri, predecessors, staging_for)
        if missing:
            shown = PartitionScope(scope.columns, frozenset(missing))
            raise MissingPredecessorError(
                f"{context.asset_key.to_user_string()} reads its own earlier partition(s) {shown.describe(3)}, "
                "which hold no data: a running value must not restart from nothing in the middle of "
                f"history. Backfill from an earlier start (e.g. --start {min(missing)[0]}) or with "
                "--lookback N. Nothing was written."
            )

    def _missing_partitions(
        self, table_uri: str, scope: PartitionScope, staging_for: str | None
    ) -> set[tuple[str, ...]]:
        """The partitions of `scope` that hold no data as the run reads them: neither
        published nor staged by the run's backfill."""
        missing = set(self.table_format.missing_partitions(table_uri, scope))
        if missing and staging_for is not None:
            staged = _staging_format(self.table_format, table_uri).staged(table_uri, staging_for)
            missing -= set(staged.files_by_partition) if staged else set()
        return missing


class SparkDeltaIOManager(SparkTableIOManager):
    """Delta Lake tables: one atomic commit per run; versions, time travel, concurrent writers."""

    table_format: ClassVar[TableFormat] = DeltaFormat()


class SparkParquetIOManager(SparkTableIOManager):
    """Plain Parquet in `col=value/` folders; see parquet_table for what it does not guarantee."""

    table_format: ClassVar[TableFormat] = ParquetFormat()


# The versions of the tables a step read, by (run id, step key): its inputs load in the
# step's own process before its output is handled.
_input_versions: dict[tuple[str, str], dict[str, int | str]] = {}


def _record_input_version(
    context: dg.InputContext,
    table_format: TableFormat,
    table_uri: str,
    options: InputOptions,
    staging_for: str | None,
) -> None:
    """Notes which version of `table_uri` the step read: the pinned one, the latest
    published one, or "staged" when its backfill staged partitions of it."""
    with_versions = versioned(table_format)
    if with_versions is None or options.timestamp is not None:
        return
    version: int | str | None = options.version if options.version is not None else with_versions.version(table_uri)
    staged_by = staging(table_format)
    if staging_for is not None and options.version is None and staged_by and staged_by.staged(table_uri, staging_for):
        version = f"staged:{staging_for}"
    if version is not None and context.step_context is not None:
        step = (context.step_context.run_id, context.step_context.step.key)
        _input_versions.setdefault(step, {})[context.asset_key.to_user_string()] = version


def _run_partition_rows(context: dg.InputContext, columns: tuple[str, ...]) -> frozenset[tuple[str, ...]]:
    """The partitions the run doing the IO writes, as rows of `columns`."""
    try:
        run = context.step_context.dagster_run
    except dg.DagsterInvariantViolationError:
        return frozenset()
    keys = partitions_of_run(run, context.asset_partitions_def)
    return PartitionScope.for_keys(context.asset_partitions_def, keys, columns).rows


def _run_tags(context: dg.InputContext | dg.OutputContext) -> Mapping[str, str]:
    """The tags of the run doing the IO; none for a context built outside a run (tests)."""
    try:
        return context.step_context.run_tags
    except dg.DagsterInvariantViolationError:
        return {}


def _proven_backfill(context: dg.InputContext | dg.OutputContext) -> str | None:
    """The backfill the run doing the IO is a node run of, as its lease proof shows
    (dagster_instance/lease_proof.py); None for any other run, and for a context built outside a run."""
    try:
        step = context.step_context
    except dg.DagsterInvariantViolationError:
        return None
    return proven_backfill(step.instance, step.run_id, step.run_tags)


@contextmanager
def _production_lease(
    table_uri: str, scope: PartitionScope | None, run_id: str, tags: Mapping[str, str]
) -> Iterator[None]:
    """A run lease for a production write (leases.run_lease). When it is refused to a run whose
    tags name a backfill the run cannot prove it belongs to, LeaseProofError says why its tags
    did not count."""
    claimed = tags.get(BACKFILL_ID_TAG)
    with ExitStack() as held:
        try:
            held.enter_context(run_lease(table_uri, scope, run_id))
        except PartitionLeasedError as refusal:
            if claimed is None:
                raise
            raise LeaseProofError(
                f"run {run_id} is tagged {BACKFILL_ID_TAG}={claimed} but is not a node run that backfill's "
                "coordinator launched (it carries no valid lease proof: a re-execution copies the tags but "
                "not the proof, and tags typed in the Launchpad have none), so it writes as a production "
                f"run, which is refused: {refusal} To write these partitions as part of backfill {claimed}, "
                f"resume it (`partition-assets backfill resume {claimed}`); to write them in production, "
                "wait until it is published or discarded."
            ) from None
        yield


def _staging_format(table_format: TableFormat, table_uri: str) -> StagingFormat:
    return required_staging(
        table_format, table_uri, "run the backfill with --publish per-node, or store the asset in a format that has it"
    )


def _reads_by_release(options: InputOptions, staging_for: str | None) -> bool:
    """Whether an input of a format that keeps versions is read at its run's release
    (storage/run_release.py): read neither at a pinned version or time nor as a staged
    backfill's overlay."""
    return options.version is None and options.timestamp is None and not staging_for


def _known_options(metadata: Mapping[str, object] | None) -> dict:
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
