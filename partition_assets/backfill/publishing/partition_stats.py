"""Per-partition statistics of a table's rows, computed by Spark in one query: what a
backfill's gate compares between the published (old) and the staged (new) content.

The checksum of a partition is the sum, as decimal(38,0), of one xxhash64 per row.
Each row's hash covers every non-partition column, taken in the order of their
names (so a frame with reordered columns hashes the same), each preceded by its
name and by a null flag (so a null differs from "" or 0, and a null cannot move
between columns unnoticed). A sum is independent of row order and of how the rows
are split into files or Spark partitions, and counts a duplicated row twice.
The sum is decimal because PySpark 4 runs in ANSI mode, where summing 64-bit
hashes as longs raises an overflow; decimal(38,0) holds the sum of 10^19 rows.

Not guaranteed: the checksum is not cryptographic (two different partitions
collide with probability about 2^-64 per change, and someone crafting rows can
collide on purpose); it depends on the columns' types (an int 1 and a long 1 hash
differently), so compare checksums of the same schema; columns of map type cannot
be hashed (Spark refuses them). Measure sums are doubles: nulls count as zero and
large sums lose precision like any double.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from partition_assets.storage.schema_change import ColumnMapping

_ROWS = "__rows"
_HASH_SUM = "__hash_sum"
_KEY_IS_NULL = "__key_is_null"


@dataclass(frozen=True)
class PartitionStats:
    """What one partition holds, in numbers a gate can compare."""

    rows: int
    checksum: str  # order-independent content checksum computed by Spark
    measures: Mapping[str, float]  # sum of each declared measure column
    null_keys: int  # rows with a null in any key column
    duplicate_keys: int  # rows whose (non-null) key occurs more than once in the partition
    # each non-partition column's checksum (when asked for: a schema change's diff names columns)
    column_checksums: Mapping[str, str] = field(default_factory=dict, compare=False)


def partition_stats(
    frame: DataFrame,
    partition_columns: Sequence[str],
    measures: Sequence[str] = (),
    keys: Sequence[str] = (),
    by_column: bool = False,
) -> dict[tuple[str, ...], PartitionStats]:
    """The stats of every partition of `frame` that has rows, keyed by its
    partition-column values (as strings), from one Spark query.

    Without `keys` the query is one aggregation grouped by the partition columns;
    with `keys` it first groups by partition and key (counting each key's rows),
    then by partition, so duplicates are found without a join. Rows with a null
    key are counted in `null_keys` and never as duplicates. With `by_column`, each
    column's checksum too (the row checksum's recipe over that column alone).
    """
    partition_columns = list(partition_columns)
    # A key may include partition columns; they are grouped on once.
    key_columns = [k for k in keys if k not in partition_columns]
    content = sorted(c for c in frame.columns if c not in partition_columns)
    rows = frame.select(
        *[F.col(c).cast("string").alias(c) for c in partition_columns],
        *[F.col(k) for k in key_columns],
        _row_hash(content).cast("decimal(38,0)").alias(_HASH_SUM),
        *[F.col(m).cast("double").alias(_measure(m)) for m in measures],
        *[_row_hash([c]).cast("decimal(38,0)").alias(_column_hash(c)) for c in (content if by_column else ())],
    )
    per_key = rows
    if keys:
        # One row per (partition, key): how many rows carry that key, and their sums.
        per_key = rows.groupBy(*partition_columns, *key_columns).agg(
            F.count(F.lit(1)).alias(_ROWS),
            F.sum(_HASH_SUM).alias(_HASH_SUM),
            *[F.sum(_measure(m)).alias(_measure(m)) for m in measures],
            *[F.sum(_column_hash(c)).alias(_column_hash(c)) for c in (content if by_column else ())],
        )
        per_key = per_key.withColumn(_KEY_IS_NULL, _any_null(keys))
        key_rows = F.col(_ROWS)
    else:
        key_rows = F.lit(1)
    aggregated = per_key.groupBy(*partition_columns).agg(
        F.sum(key_rows).alias(_ROWS),
        F.sum(_HASH_SUM).alias(_HASH_SUM),
        *[F.coalesce(F.sum(_measure(m)), F.lit(0.0)).alias(_measure(m)) for m in measures],
        *[F.sum(_column_hash(c)).alias(_column_hash(c)) for c in (content if by_column else ())],
        *(
            [
                F.sum(F.when(F.col(_KEY_IS_NULL), key_rows).otherwise(0)).alias("null_keys"),
                F.sum(F.when(~F.col(_KEY_IS_NULL) & (key_rows > 1), key_rows).otherwise(0)).alias("duplicate_keys"),
            ]
            if keys
            else [F.lit(0).alias("null_keys"), F.lit(0).alias("duplicate_keys")]
        ),
    )
    return {
        tuple(row[c] for c in partition_columns): PartitionStats(
            rows=int(row[_ROWS]),
            checksum=str(row[_HASH_SUM]),
            measures={m: float(row[_measure(m)]) for m in measures},
            null_keys=int(row["null_keys"]),
            duplicate_keys=int(row["duplicate_keys"]),
            column_checksums={c: str(row[_column_hash(c)]) for c in (content if by_column else ())},
        )
        for row in aggregated.collect()
    }


def _row_hash(columns: Sequence[str]) -> Column:
    """One 64-bit hash of a row's values; Spark's xxhash64 skips nulls, hence the flags."""
    parts: list[Column] = []
    for name in columns:
        parts += [F.lit(name), F.isnull(F.col(name)), F.col(name)]
    return F.xxhash64(*parts) if parts else F.lit(0)


def _any_null(columns: Sequence[str]) -> Column:
    condition = F.lit(False)
    for name in columns:
        condition = condition | F.isnull(F.col(name))
    return condition


def _measure(column: str) -> str:
    return f"__measure_{column}"


def _column_hash(column: str) -> str:
    return f"__column_hash_{column}"


def mapped_to_old(frame: DataFrame, old: StructType, mapping: ColumnMapping) -> DataFrame:
    """`frame` (a backfill's new content) in the columns and types of `old` (the published
    schema), through the declared `mapping`, so that checksums and measures compare
    like with like: a renamed column under its old name, a split one as the sum of its
    parts, a retyped one cast back (try_cast: null where the value does not fit), a
    dropped one null. Columns `frame` adds stay, after the old ones."""
    selected, used = [], set()
    for old_field in old.fields:
        applied = mapping.applied(old_field.name, frame.columns)
        sources = list(applied) if applied else [c for c in (old_field.name,) if c in frame.columns]
        used.update(sources)
        value = functools.reduce(operator.add, [F.col(c) for c in sources]) if sources else F.lit(None)
        selected.append(value.try_cast(old_field.dataType).alias(old_field.name))
    return frame.select(*selected, *[F.col(c) for c in frame.columns if c not in used and c not in old.names])
