"""Storage: partition-scoped, atomic PySpark IO managers."""

from partition_assets.storage.delta_table import DeltaSchemaError
from partition_assets.storage.io_manager import SparkDeltaIOManager
from partition_assets.storage.partition_scope import PartitionScopeError, partition_columns

__all__ = ["DeltaSchemaError", "PartitionScopeError", "SparkDeltaIOManager", "partition_columns"]
