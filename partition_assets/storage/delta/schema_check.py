"""Proving that a Delta table reads in one schema after a commit that changed its schema (a
backfill's publish or rollback of a schema change): every data file is checked against the
table's schema, through delta-rs's snapshot and each file's Parquet footer, and Spark reads
the columns the commit changed from every file.

A Delta table has one schema, but its files keep the schema they were written in: a file
holding a column the table lacks (written before a rollback restored the old schema) reads
that column's old name as null, and one holding a changed column in another type fails
Spark's read (PARQUET_COLUMN_DATA_TYPE_MISMATCH). Rollback refuses what would lead there
(rollback.py); this check proves it after every schema commit.

Cost: a commit that kept the schema is checked by two log reads, nothing else. A schema
commit costs one footer read per data file (a few KiB each) and one Spark job reading the
changed columns of every file (a scan of those columns only, no other column).

Not guaranteed: the check runs after the commit it checks: a failure names the files and
says how to undo the commit, it does not prevent it. A file lacking a column the table has
is not a failure (a column added over a partial range reads null there, by design).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from partition_assets.errors import MixedSchemaError
from partition_assets.storage.delta.log import files_by_partition, open_table, table_schema
from partition_assets.storage.delta.read import read_partitions
from partition_assets.storage.schema_change import delta_type_name, diff_schemas
from partition_assets.storage.write_staging import table_filesystem

# Spark's error condition for a file it cannot read (e.g. FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH).
_FAILED_READ = "FAILED_READ_FILE"


def check_one_schema(spark: Callable[[], SparkSession], table_uri: str, version: int) -> None:
    """MixedSchemaError when the commit at `version` changed the table's schema and a data file
    of that version holds a column the schema lacks, or a column the commit changed in another
    type than the schema's, or when Spark fails to read the changed columns of every file.
    Nothing when the commit kept the schema (or created the table). `spark` gives the session
    Spark's read runs in, called only for a schema change.

    Raises:
        MixedSchemaError: As above; the commit stands, the message says how to undo it.
    """
    if version < 1:
        return
    # The two versions' schemas from their metadata alone: a snapshot with its file list
    # (thousands of files for a table of thousands of partitions) is loaded only for a change.
    after = _schema_only(table_uri, version)
    before = _schema_only(table_uri, version - 1)
    if after is None or before is None:
        return
    change = diff_schemas(table_schema(before)[0], table_schema(after)[0])
    if not change:
        return
    table = open_table(table_uri, version=version)
    if table is None:
        return
    schema, partition_columns = table_schema(table)
    old_schema = table_schema(before)[0]
    # The columns whose values the commit brought: new ones (added, renamed to, split into) and retyped ones.
    changed = [f.name for f in schema if f.name not in partition_columns and f.name not in old_schema.names]
    changed += [c.column for c in change.changes if c.kind == "retyped"]
    problems = _file_problems(table, schema, partition_columns, set(changed))
    if not problems and changed:
        problems = _spark_problems(spark(), table, changed)
    if problems:
        raise MixedSchemaError(
            f"table {table_uri} at version {version} (a schema change) holds files of another schema: "
            f"{'; '.join(problems[:5])}{' ...' if len(problems) > 5 else ''}. Readers see those columns as "
            f"null or fail. Undo the commit (restore version {version - 1}, e.g. `partition-assets backfill "
            "rollback` of the backfill that made it, or a Delta restore), then publish again."
        )


def _schema_only(table_uri: str, version: int) -> DeltaTable | None:
    try:
        return DeltaTable(table_uri, version=version, without_files=True)
    except DeltaTableNotFoundError:
        return None


def _file_problems(
    table: DeltaTable, schema: pa.Schema, partition_columns: tuple[str, ...], changed: set[str]
) -> list[str]:
    """Each file whose footer holds a column the schema lacks, or a changed column in another type."""
    fs, root = table_filesystem(table.table_uri)
    problems = []
    for files in files_by_partition(table).values():
        for file in files:
            footer = pq.read_schema(f"{root}/{file.path}", filesystem=fs)
            extra = [f.name for f in footer if f.name not in schema.names and f.name not in partition_columns]
            retyped = [
                f"{f.name} {delta_type_name(f.type)}"
                for f in footer
                if f.name in changed and delta_type_name(f.type) != delta_type_name(schema.field(f.name).type)
            ]
            if extra or retyped:
                found = ", ".join([*(f"{name} (not in the table's schema)" for name in extra), *retyped])
                problems.append(f"{file.path}: {found}")
    return problems


def _spark_problems(spark: SparkSession, table: DeltaTable, columns: list[str]) -> list[str]:
    """Spark's failure to read `columns` from every file of the table (empty when it reads them)."""
    try:
        read_partitions(spark, table, None).agg(*(F.count(F.col(c)) for c in columns)).collect()
    except PySparkException as error:
        if not (error.getCondition() or "").startswith(_FAILED_READ):
            raise  # not a file Spark cannot read (the server is gone, ...): not this check's finding
        return [f"Spark fails to read {', '.join(columns)}: {str(error).splitlines()[0]}"]
    return []
