"""Schema rules shared by every table format: a write may add columns (when allowed),
never drop or retype them, and the partitioning never changes. A backfill declaring a
schema change is the one way to drop or retype columns (storage/schema_change.py)."""

import pyarrow as pa

from partition_assets.errors import TableSchemaError
from partition_assets.storage.delta.types import same_delta_type
from partition_assets.storage.write_staging import StagedWrite


def new_columns(
    table_schema: pa.Schema,
    table_partitioning: tuple[str, ...],
    staged: StagedWrite,
    allow_new_columns: bool,
) -> list[pa.Field]:
    """The frame's columns the table lacks; any other difference is a TableSchemaError.

    Raises:
        TableSchemaError: The write is partitioned differently from the table, lacks or retypes
            one of its columns, or adds columns without `allow_new_columns`.
    """
    where = f"table {staged.table_uri}"
    check_partitioning(table_partitioning, staged)
    existing = {f.name: f.type for f in table_schema}
    incoming = {f.name: f.type for f in staged.schema}
    dropped = [name for name in existing if name not in incoming]
    if dropped:
        raise TableSchemaError(
            f"the frame lacks column(s) {dropped} of {where}: produce them (null where "
            "unknown); to drop them, declare the schema change on the asset (declare_schema_change) "
            "and backfill every partition with a staged backfill. Nothing was written."
        )
    retyped = {
        name: (existing[name], incoming[name])
        for name in existing
        if not same_delta_type(existing[name], incoming[name])  # readers report strings as large or view types
    }
    if retyped:
        described = ", ".join(f"{n}: {old} -> {new}" for n, (old, new) in retyped.items())
        raise TableSchemaError(
            f"the frame changes column types of {where} ({described}): cast them back; "
            "to change a type, declare the schema change on the asset (declare_schema_change) and "
            "backfill every partition with a staged backfill. Nothing was written."
        )
    added = [f for f in staged.schema if f.name not in existing]
    if added and not allow_new_columns:
        raise TableSchemaError(
            f"the frame adds column(s) {[f.name for f in added]} to {where}: set asset "
            "metadata allow_new_columns=True to add them as nullable columns, or drop them. "
            "Nothing was written."
        )
    return added


def check_partitioning(table_partitioning: tuple[str, ...], staged: StagedWrite) -> None:
    """Raises TableSchemaError when `staged` is partitioned differently from the table: no
    write, not even a declared schema change, repartitions a table.

    Raises:
        TableSchemaError: The partition columns differ.
    """
    if table_partitioning != staged.partition_columns:
        raise TableSchemaError(
            f"table {staged.table_uri} is partitioned by {list(table_partitioning)} but this write by "
            f"{list(staged.partition_columns)}: keep the asset's partitions definition and "
            "partition columns, or write to a new table. Nothing was written."
        )
