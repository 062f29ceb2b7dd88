"""One Delta commit (delta-rs, no Delta jars on Spark's classpath): files already moved
into the table's layout in, every file of a scope's partitions out, so a reader sees
the old partitions or the new ones, never a mix.

Commits are serialized: on a concurrent commit the table is brought up to date and the
commit retried on top of it, so writers of disjoint partitions all land and, of two
writers of the same partition, the later one wins whole. A missing table is created
by the commit, with the write's schema and partitioning. A commit given a new schema
(a backfill's schema change) writes it in the same commit as its files.

Not guaranteed: a commit that loses to concurrent writers 50 times gives up
(CommitError), its files left in the layout as orphans until vacuum. A commit that adds
columns makes two commits (the schema first); old rows read the new columns as null.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

import pyarrow as pa
from deltalake import DeltaTable, Schema
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import (
    AddAction,
    CommitProperties,
    RemoveAction,
    Transaction,
    create_table_with_add_actions,
)

from partition_assets.errors import CommitError, SchemaChangeError
from partition_assets.storage.delta.log import LoggedFile, files_by_partition, open_table, table_schema
from partition_assets.storage.failpoints import failpoint
from partition_assets.storage.partition_scope import PartitionScope
from partition_assets.storage.schema import new_columns
from partition_assets.storage.write_staging import StagedFile, StagedWrite

_MAX_COMMIT_ATTEMPTS = 50
_T = TypeVar("_T")


def add_action(file: StagedFile | LoggedFile, modification_time: int | None = None) -> AddAction:
    """The add action that brings `file` (already in the table's layout) into the table,
    with its row count as its only statistics. `modification_time` is a logged file's own,
    to bring it back unchanged; None stamps it now (Delta requires one: it is file
    metadata, not asset logic)."""
    return AddAction(
        path=file.path,
        size=file.size,
        partition_values=file.partition_values,
        modification_time=int(time.time() * 1000) if modification_time is None else modification_time,
        data_change=True,
        stats=json.dumps({"numRecords": file.num_records}),
    )


def remove_actions(table: DeltaTable, scope: PartitionScope | None) -> list[RemoveAction]:
    """Removes for every file of `scope`'s partitions (all files when None)."""
    deletion_clock_ms = int(time.time() * 1000)
    return [
        RemoveAction(
            path=file.path,
            data_change=True,
            deletion_timestamp=deletion_clock_ms,
            size=file.size,
            partition_values=dict[str, str | None](file.partition_values),
        )
        for row, files in files_by_partition(table).items()
        if scope is None or row in scope.rows
        for file in files
    ]


def check_schema(table: DeltaTable | None, staged: StagedWrite, allow_new_columns: bool) -> None:
    """Raises TableSchemaError when publishing `staged` would break the table's schema.

    Raises:
        TableSchemaError: `staged` is partitioned differently from the table, lacks or retypes one
            of its columns, or adds columns without `allow_new_columns`.
    """
    if table is not None:
        new_columns(*table_schema(table), staged, allow_new_columns)


def commit(
    table: DeltaTable | None,
    template: StagedWrite,
    adds: list[AddAction],
    scope: PartitionScope | None,
    custom_metadata: Mapping[str, str],
    allow_new_columns: bool,
    check: Callable[[DeltaTable | None], None],
    app_transaction: Transaction | None = None,
    new_schema: pa.Schema | None = None,
) -> tuple[int, int]:
    """Commits `adds` (files already in the table's layout) and removes every file of
    `scope`, creating the table (with `template`'s schema and partitioning) when it does
    not exist; returns the new version and the number of files removed.

    `check` runs on the snapshot each attempt commits on top of, and may refuse it.
    New nullable columns are added first, in a commit of their own.

    Args:
        table: The snapshot the first attempt commits on top of; None when there was no table.
        template: A staged write standing for the commit's table, schema and partitioning.
        check: Raises to refuse the snapshot it is given; it propagates and nothing is committed.
        app_transaction: An application transaction the commit carries (a backfill's publish).
        new_schema: The table's schema after the commit, written by the same commit (its metaData
            action) instead of checking `template` against the table's: a backfill's schema change.

    Raises:
        TableSchemaError: The write does not fit the schema of the snapshot an attempt commits on.
        SchemaChangeError: `new_schema` is given for a scope no overwrite filter can name.
        CommitError: The commit lost to concurrent writers 50 times; the table is unchanged.
    """
    partition_by = list(template.partition_columns) or None
    transactions = [app_transaction] if app_transaction else None

    def attempt(current: DeltaTable | None) -> tuple[int, int]:
        check(current)
        if current is None:
            failpoint("committing")
            create_table_with_add_actions(
                template.table_uri,
                Schema.from_arrow(template.schema),
                adds,
                mode="error",
                partition_by=partition_by,
                # No retry inside delta-rs: a create that lost to a concurrent first write
                # would land as version 1 or later while this returns 0; it fails instead,
                # and the retry below appends on top of the table the other write created.
                commit_properties=CommitProperties(
                    custom_metadata=dict(custom_metadata), max_commit_retries=0, app_transactions=transactions
                ),
            )
            return 0, 0
        properties = CommitProperties(
            custom_metadata=dict(custom_metadata), max_commit_retries=0, app_transactions=transactions
        )
        if new_schema is not None:
            return replace_with_schema(current, adds, scope, new_schema, properties)
        added = new_columns(*table_schema(current), template, allow_new_columns)
        if added:
            current.alter.add_columns(list(Schema.from_arrow(pa.schema(added)).fields))
        removes = remove_actions(current, scope)
        read_version = current.version()
        failpoint("committing")
        current.create_write_transaction(
            [*adds, *removes],
            mode="append",
            schema=current.schema(),
            partition_by=partition_by,
            commit_properties=properties,
        )
        failpoint("committed")
        return read_version + 1, len(removes)

    return with_commit_retries(template.table_uri, table, attempt)


def replace_with_schema(
    current: DeltaTable,
    adds: list[AddAction],
    scope: PartitionScope | None,
    schema: pa.Schema,
    properties: CommitProperties,
) -> tuple[int, int]:
    """ONE commit on top of `current` that sets the table's schema to `schema` (a metaData
    action), removes every file of `scope`'s partitions (all when None) and adds `adds`;
    returns the new version and the number of files removed. delta-rs writes a schema only
    with an overwrite, whose removes it derives from a partition filter (`overwrite_filter`).

    Raises:
        SchemaChangeError: No overwrite filter names exactly `scope`; nothing was committed.
        CommitFailedError: A concurrent commit took the version `current` is at (the caller retries).
    """
    partition_filter = overwrite_filter(scope)
    removed = len(remove_actions(current, scope))
    read_version = current.version()
    failpoint("committing")
    current.create_write_transaction(
        list(adds),
        mode="overwrite",
        schema=Schema.from_arrow(schema),
        partition_by=list(current.metadata().partition_columns) or None,
        partition_filters=partition_filter,
        commit_properties=properties,
    )
    failpoint("committed")
    return read_version + 1, removed


def has_overwrite_filter(scope: PartitionScope | None) -> bool:
    """Whether `overwrite_filter` names `scope`."""
    return scope is None or len(scope.delta_filter()) == 1


def overwrite_filter(scope: PartitionScope | None) -> list[tuple[str, str, object]] | None:
    """The conjunctive partition filter naming exactly `scope`'s partitions (None: the whole
    table), as an overwrite takes it.

    Raises:
        SchemaChangeError: `scope` is several values of a first partition column each with its
            own second-column values (no one conjunction names it); nothing was committed.
    """
    if scope is None:
        return None
    if not has_overwrite_filter(scope):
        raise SchemaChangeError(
            f"partitions {scope.describe()} span several values of the table's first partition "
            "column, which no one overwrite filter names: change the schema over every partition "
            "(--all-partitions) instead. Nothing was committed."
        )
    return scope.delta_filter()[0]


def with_commit_retries(table_uri: str, table: DeltaTable | None, attempt: Callable[[DeltaTable | None], _T]) -> _T:
    """`attempt` (one commit on top of the snapshot it is given), retried on a fresh
    snapshot while concurrent commits take the version it read.

    Raises:
        CommitError: The attempt lost to concurrent commits 50 times; the table is unchanged.
    """
    for number in range(1, _MAX_COMMIT_ATTEMPTS + 1):
        try:
            return attempt(table)
        except CommitFailedError:
            pass  # another commit took the version this one read: retry on top of it
        except DeltaError:
            # A concurrent first write may have created the table since this one looked.
            if table is not None or not DeltaTable.is_deltatable(table_uri):
                raise
        time.sleep(random.uniform(0.01, 0.05) * number)
        if table is None:
            table = open_table(table_uri)
        else:
            table.update_incremental()
    raise CommitError(
        f"{_MAX_COMMIT_ATTEMPTS} commits to {table_uri} lost to concurrent writers; the "
        "table is unchanged (files moved into its layout are orphans until vacuum). Run it again."
    )
