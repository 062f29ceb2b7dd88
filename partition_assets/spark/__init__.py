"""Spark: the session resource, the shared local Spark Connect server, and Java discovery."""

from partition_assets.spark.connect_server import (
    LocalConnectServer,
    SparkConnectServerError,
)
from partition_assets.spark.java import JavaNotFoundError, find_java
from partition_assets.spark.resource import SparkResource

__all__ = [
    "JavaNotFoundError",
    "LocalConnectServer",
    "SparkConnectServerError",
    "SparkResource",
    "find_java",
]
