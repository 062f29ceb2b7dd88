"""What a table format (Delta, Parquet) provides to the IO managers."""

from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from partition_assets.storage.partition_scope import PartitionScope
from partition_assets.storage.staging import StagedWrite


@dataclass(frozen=True)
class PublishResult:
    version: int | None  # the table version the write created, where the format has versions
    files_added: int
    files_removed: int


class TableFormat(Protocol):
    name: str

    def validate(self, staged: StagedWrite, allow_new_columns: bool) -> None:
        """Raises if publishing `staged` would break the table; runs before anything is published."""

    def merge(
        self,
        spark: SparkSession,
        table_uri: str,
        scope: PartitionScope | None,
        incoming: DataFrame,
        keys: list[str],
    ) -> tuple[DataFrame, frozenset[str]]:
        """`incoming` upserted into `scope`'s stored rows on `keys`, and the files that read."""

    def publish(
        self,
        staged: StagedWrite,
        scope: PartitionScope | None,
        *,
        run_id: str,
        allow_new_columns: bool,
        expected_files: frozenset[str] | None = None,
    ) -> PublishResult:
        """Replaces exactly `scope`'s partitions (the whole table when None) with `staged`;
        with `expected_files`, only if those are still the scope's files."""

    def read(
        self,
        spark: SparkSession,
        table_uri: str,
        scope: PartitionScope | None,
        *,
        version: int | None = None,
        timestamp: str | None = None,
    ) -> DataFrame | None:
        """`scope`'s rows (all when None), opening only their files; None when no table exists."""

    def missing_partitions(self, table_uri: str, scope: PartitionScope) -> set[tuple[str, ...]]:
        """The partitions of `scope` that hold no rows."""


def spark_schema(schema: pa.Schema, partition_columns: tuple[str, ...] | list[str]) -> StructType:
    """The table's schema as Spark reads it back: partition columns last."""
    data = [f for f in schema if f.name not in partition_columns]
    return from_arrow_schema(pa.schema(data + [schema.field(c) for c in partition_columns]))
