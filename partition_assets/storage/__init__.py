"""Storage: partition-scoped, atomic PySpark IO managers (Delta and Parquet)."""

from partition_assets.storage.io_manager import (
    InputOptions,
    SparkDeltaIOManager,
    SparkParquetIOManager,
)
from partition_assets.storage.maintenance import vacuum
from partition_assets.storage.partition_scope import (
    PartitionScopeError,
    partition_columns,
)
from partition_assets.storage.schema import TableSchemaError

__all__ = [
    "InputOptions",
    "PartitionScopeError",
    "SparkDeltaIOManager",
    "SparkParquetIOManager",
    "TableSchemaError",
    "partition_columns",
    "vacuum",
]
