"""The runtime a write ran on: Python and the libraries that shape its output.

A re-run reproduces the original only with the same date, data, code and runtime (the
reference reading's "fourth implicit input"). Every write of the IO managers records
`runtime_versions()` in its materialization metadata and commit; a backfill warns
(`runtime_differences`) when the partitions it rewrites were written on another one.

Not recorded: the JVM, Spark's server-side version when a remote Spark Connect server is
used (the client's pyspark is), or any other library an asset imports.
"""

from __future__ import annotations

import functools
import platform
from collections.abc import Mapping
from importlib.metadata import version

RUNTIME_METADATA = "runtime"
_LIBRARIES = ("pyspark", "dagster", "deltalake")


@functools.cache
def runtime_versions() -> dict[str, str]:
    """{"python": ..., "pyspark": ..., "dagster": ..., "deltalake": ...} of this process."""
    return {"python": platform.python_version(), **{name: version(name) for name in _LIBRARIES}}


def runtime_differences(original: Mapping[str, str], current: Mapping[str, str]) -> list[str]:
    """What changed from `original` to `current`, e.g. ["pyspark 4.0.1 -> 4.1.1"]; components
    that only one of them records are left out."""
    return [
        f"{name} {original[name]} -> {current[name]}"
        for name in sorted(original.keys() & current.keys())
        if original[name] != current[name]
    ]
