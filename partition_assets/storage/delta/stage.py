"""Staging a frame for a backfill instead of writing it: validated as a write is, kept
under the table's `_backfills/<backfill_id>/` (listed in manifests, see
backfill_staging.py) and committed only when the backfill publishes (publish.py).
Until then readers of the table see none of it; the backfill reads it back through
`read.read_overlay`.

Not guaranteed: the checks see the table as it is when staging; a commit to it after
that is caught only when the backfill publishes (the schema is checked again, and the
staged partitions' files compared with what the backfill expects: ForeignCommitError).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame

from partition_assets.errors import TableNotFoundError
from partition_assets.storage.backfill_staging import incoming_folder, record_staging
from partition_assets.storage.delta.commit import check_schema
from partition_assets.storage.delta.log import open_table, table_schema
from partition_assets.storage.delta.read import read_overlay, staging_of
from partition_assets.storage.delta.write import merge_rows
from partition_assets.storage.partition_scope import PartitionScope
from partition_assets.storage.schema import check_partitioning, new_columns
from partition_assets.storage.table_format import PublishResult, WriteOptions
from partition_assets.storage.write_staging import StagedWrite, discard, stage_validated, table_filesystem


def stage_frame(
    frame: DataFrame,
    table_uri: str,
    scope: PartitionScope | None,
    options: WriteOptions,
    backfill_id: str,
) -> PublishResult:
    """Stages `frame` as backfill `backfill_id`'s new content of `scope`'s partitions
    (the whole table when None, which must then be unpartitioned), committing nothing.

    Validated as `write` is (rows outside the scope, an empty frame unless allowed,
    the schema against the published table and the backfill's earlier stagings), but
    with `options.allow_schema_change` only the partitioning is checked: the frame may
    drop, retype or add columns, and its publish refuses unless every partition the
    change needs was staged (publish.publish_staged);
    with `options.merge_keys`, upserts into the overlay's rows of the scope. The
    files land under the table's `_backfills/<backfill_id>/`, unreferenced by the log
    and out of reach of vacuum; a manifest records them with `options.commit_metadata`
    (`StagedTable.metadata_by_partition`). Staging a partition again supersedes its
    earlier staging. The result's version is None.

    Raises:
        PartitionScopeError: The frame does not fit `scope` (see `write`), or a merge key is no
            column of the frame.
        TableSchemaError: The frame breaks the published table's schema (without a table, the
            backfill's earlier staging's); with `allow_schema_change`, only its partitioning.
        BackfillIdError: `backfill_id` cannot name a folder; nothing was staged.
    """
    table = open_table(table_uri)
    earlier = staging_of(table, table_uri, backfill_id)
    if options.merge_keys:
        stored = read_overlay(frame.sparkSession, table_uri, scope, backfill_id)
        frame = merge_rows(frame, stored, scope, list(options.merge_keys))

    def validate(write: StagedWrite) -> None:
        if options.allow_schema_change:  # any column may change; its publish checks the partitions it covers
            if table is not None:
                check_partitioning(table_schema(table)[1], write)
            elif earlier is not None:
                check_partitioning(earlier.partition_columns, write)
            return
        check_schema(table, write, options.allow_new_columns)
        if table is None and earlier is not None:  # the first staging stands for the table
            new_columns(earlier.schema, earlier.partition_columns, write, options.allow_new_columns)

    write = stage_validated(frame, table_uri, scope, options, validate, incoming_folder(backfill_id))
    try:
        published = None if table is None else table_schema(table)[0]
        record_staging(write, backfill_id, scope.rows if scope else [()], options.commit_metadata, published)
    except BaseException:
        discard(write)
        raise
    return PublishResult.of([write], None, 0)


def stage_removal(table_uri: str, scope: PartitionScope | None, backfill_id: str, metadata: Mapping[str, str]) -> None:
    """Stages backfill `backfill_id`'s removal of every row of `scope`'s partitions (the whole
    table when None): a manifest naming them with no file, which its publish commits as one
    commit removing their published files (publish.py), as a staging that left a partition
    empty does. Nothing is committed; readers see the rows until the backfill publishes.

    Raises:
        TableNotFoundError: There is no table at `table_uri`; nothing was staged.
        BackfillIdError: `backfill_id` cannot name a folder; nothing was staged.
    """
    table = open_table(table_uri)
    if table is None:
        raise TableNotFoundError(f"no Delta table at {table_uri}: there is nothing to remove; nothing was staged")
    schema, columns = table_schema(table)
    _, root = table_filesystem(table_uri)
    removal = StagedWrite(table_uri, f"{root}/{incoming_folder(backfill_id)}/removal", schema, columns, ())
    record_staging(removal, backfill_id, scope.rows if scope else [()], metadata, schema)
