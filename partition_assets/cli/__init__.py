"""The `partition-assets` command line."""

from partition_assets.cli.main import main

__all__ = ["main"]
