"""Storage: partition-scoped, atomic PySpark IO managers (Delta and Parquet).

`DeltaFormat().write(frame, table_uri, scope, WriteOptions(...))` (or
`ParquetFormat()`) writes a frame to a table outside Dagster, exactly as the IO
managers do; `replace_partitions` publishes several staged writes in one commit.
`read_tables` / `pinned_versions` read several tables of a lake at one release (release_reads).
"""

from partition_assets.errors import PartitionScopeError, TableSchemaError
from partition_assets.storage.delta import DeltaFormat
from partition_assets.storage.delta.write import replace_partitions
from partition_assets.storage.io_manager import (
    InputOptions,
    SparkDeltaIOManager,
    SparkParquetIOManager,
)
from partition_assets.storage.maintenance import vacuum
from partition_assets.storage.parquet_table import ParquetFormat
from partition_assets.storage.partition_scope import PartitionScope, partition_columns
from partition_assets.storage.release_reads import ReleasePin, pinned_versions, read_tables
from partition_assets.storage.schema_change import declare_schema_change
from partition_assets.storage.table_format import (
    PublishResult,
    TableFormat,
    VacuumResult,
    WriteOptions,
)

__all__ = [
    "DeltaFormat",
    "InputOptions",
    "ParquetFormat",
    "PartitionScope",
    "PartitionScopeError",
    "PublishResult",
    "ReleasePin",
    "SparkDeltaIOManager",
    "SparkParquetIOManager",
    "TableFormat",
    "TableSchemaError",
    "VacuumResult",
    "WriteOptions",
    "declare_schema_change",
    "partition_columns",
    "pinned_versions",
    "read_tables",
    "replace_partitions",
    "vacuum",
]
