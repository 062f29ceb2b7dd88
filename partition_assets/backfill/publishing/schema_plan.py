"""What a backfill changes in its tables' schemas, known before anything runs: the schema
the code declares (`dagster/column_schema` metadata) against each table's published one,
per column (storage/schema_change.py), and whether the backfill's partitions allow it.

A drop, retype, rename or split needs every partition of the table rewritten (a Delta
table has one schema): a backfill over fewer is refused before anything is recorded or
written, with the fix (the whole range, or --all-partitions). An added column keeps a
partial range possible; the table's other partitions read it as null.

Not guaranteed: an asset declaring no column schema is not checked here (its output's
schema is known once it runs; the publish then refuses a partial range just as well);
declared types are Delta's names (long, integer, double, decimal(p,s), string, date,
timestamp, boolean, ...), with Spark's aliases bigint and int.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
import pyarrow as pa

from partition_assets.backfill.publishing.tables import BackfillTable
from partition_assets.errors import SchemaChangeError
from partition_assets.storage.delta.types import arrow_type
from partition_assets.storage.schema_change import COLUMN_SCHEMA_METADATA, ColumnMapping, SchemaChange, diff_schemas

_ALIASES = {"bigint": "long", "int": "integer", "smallint": "short", "tinyint": "byte", "bool": "boolean"}


@dataclass(frozen=True)
class TableSchemaPlan:
    """One table's schema change, and whether the backfill covers every partition it needs."""

    table: BackfillTable
    change: SchemaChange
    partitions_left: int  # published partitions of the table the backfill does not rewrite
    readers: tuple[str, ...] = ()  # assets outside the backfill that read the table

    def describe(self) -> list[str]:
        lines = [f"schema change of {self.table.asset.to_user_string()} ({self.table.uri}):"]
        lines += [f"  {line}" for line in self.change.describe()]
        if self.readers and self.change.changed_columns:
            lines.append(
                f"  read outside the backfill by {', '.join(self.readers)}: they see "
                f"{', '.join(self.change.changed_columns)} change once it publishes (--keep-previous keeps the "
                "old version readable)"
            )
        if not self.change.rewrites_every_partition and self.partitions_left:
            lines.append(
                f"  added columns only: the {self.partitions_left} partitions outside the range read them as null"
            )
        return lines


def declared_schema(metadata: Mapping[str, Any]) -> pa.Schema | None:
    """The output schema the asset declares in `dagster/column_schema` metadata; None when none.

    Raises:
        SchemaChangeError: A declared column type is not a Delta type name; nothing was run.
    """
    declared = metadata.get(COLUMN_SCHEMA_METADATA)
    declared = getattr(declared, "schema", declared)  # the metadata value wraps the TableSchema
    if not isinstance(declared, dg.TableSchema):
        return None
    fields = []
    for column in declared.columns:
        name = _ALIASES.get(column.type.lower(), column.type.lower())
        try:
            fields.append(pa.field(column.name, arrow_type(name), nullable=True))
        except ValueError:
            raise SchemaChangeError(
                f"column {column.name!r} declares type {column.type!r} in {COLUMN_SCHEMA_METADATA}, which is no "
                "Delta type: use long, integer, double, decimal(18,6), string, date, timestamp, boolean. "
                "Nothing was run."
            ) from None
    return pa.schema(fields)


def plan_schema_changes(
    tables: Mapping[dg.AssetKey, BackfillTable], readers: Mapping[dg.AssetKey, Sequence[str]] | None = None
) -> list[TableSchemaPlan]:
    """The tables whose declared schema differs from their published one, with the change
    and the assets outside the backfill that read them (`readers`, by table).

    Raises:
        SchemaChangeError: A change needs every partition and the backfill rewrites fewer, naming
            the fix; or a declared type is no Delta type. Nothing was recorded or written.
    """
    plans = []
    for table in tables.values():
        declared = declared_schema(table.metadata)
        if declared is None or not table.table_format.capabilities.schema_changes:
            continue
        published = table.staging_format.schema(table.uri)
        if published is None:
            continue  # the backfill creates the table: any schema goes
        data_columns = [f.name for f in published if f.name not in table.columns]
        change = diff_schemas(
            pa.schema([published.field(name) for name in data_columns]),
            pa.schema([f for f in declared if f.name not in table.columns]),
            ColumnMapping.from_metadata(table.metadata),
        )
        if not change:
            continue
        published_rows = set(table.staging_format.partition_files(table.uri, None))
        rewritten = table.scope.rows if table.scope is not None else published_rows
        plan = TableSchemaPlan(
            table, change, len(published_rows - rewritten), tuple((readers or {}).get(table.asset, ()))
        )
        if change.rewrites_every_partition and plan.partitions_left:
            raise SchemaChangeError(
                "\n".join(plan.describe())
                + f"\nthe backfill rewrites {len(published_rows & rewritten)} of the table's {len(published_rows)} "
                "partitions, but a dropped, retyped, renamed or split column needs every partition rewritten "
                "(a Delta table has one schema). Backfill the whole range, or pass --all-partitions. "
                "Nothing was recorded or written."
            )
        plans.append(plan)
    return plans
