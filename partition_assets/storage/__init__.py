"""Storage: partition-scoped, atomic PySpark IO managers (Delta and Parquet).

`DeltaFormat().write(frame, table_uri, scope, WriteOptions(...))` (or
`ParquetFormat()`) writes a frame to a table outside Dagster, exactly as the IO
managers do; `replace_partitions` publishes several staged writes in one commit.
`read_tables` / `pinned_versions` read several tables of a lake at one release (release_reads).
A format of your own: a `TableFormat` with its `FormatCapabilities`, picked by a subclass of
`SparkTableIOManager` (docs/guide/storage.md, "Adding a table format").
"""

from partition_assets.lazy_names import exported_lazily

__all__ = [
    "DeltaFormat",
    "FormatCapabilities",
    "InputOptions",
    "ParquetFormat",
    "PartitionScope",
    "PartitionScopeError",
    "PublishResult",
    "ReleasePin",
    "SparkDeltaIOManager",
    "SparkParquetIOManager",
    "SparkTableIOManager",
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

# Each name is imported from its module when first read (lazy_names.py): `release list` reads
# release_reads.py without the IO managers' Dagster and Spark.
_HOMES = {
    "partition_assets.errors": (
        "PartitionScopeError",
        "TableSchemaError",
    ),
    "partition_assets.storage.delta": ("DeltaFormat",),
    "partition_assets.storage.delta.write": ("replace_partitions",),
    "partition_assets.storage.io_manager": (
        "InputOptions",
        "SparkDeltaIOManager",
        "SparkParquetIOManager",
        "SparkTableIOManager",
    ),
    "partition_assets.storage.maintenance": ("vacuum",),
    "partition_assets.storage.parquet_table": ("ParquetFormat",),
    "partition_assets.storage.partition_scope": (
        "PartitionScope",
        "partition_columns",
    ),
    "partition_assets.storage.release_reads": (
        "ReleasePin",
        "pinned_versions",
        "read_tables",
    ),
    "partition_assets.storage.schema_change": ("declare_schema_change",),
    "partition_assets.storage.table_format": (
        "FormatCapabilities",
        "PublishResult",
        "TableFormat",
        "VacuumResult",
        "WriteOptions",
    ),
}
__getattr__, __dir__ = exported_lazily(__name__, _HOMES)
