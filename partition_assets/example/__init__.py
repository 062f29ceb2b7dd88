"""The example pipeline, served as the `example` code location."""

from partition_assets.example.definitions import defs

__all__ = ["defs"]
