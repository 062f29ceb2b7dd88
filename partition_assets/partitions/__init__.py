"""Partitions and the mappings between them."""

from partition_assets.partitions import mappings
from partition_assets.partitions.definitions import (
    PartitionDefinitionError,
    cron,
    daily,
    dynamic,
    hourly,
    monthly,
    multi,
    static,
    weekly,
)

__all__ = [
    "PartitionDefinitionError",
    "cron",
    "daily",
    "dynamic",
    "hourly",
    "mappings",
    "monthly",
    "multi",
    "static",
    "weekly",
]
