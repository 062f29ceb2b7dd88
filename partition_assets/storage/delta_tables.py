"""The former home of storage/delta/tables.py: its names, for importers of this path."""

from partition_assets.storage.delta.tables import open_table, table_version

__all__ = ["open_table", "table_version"]
