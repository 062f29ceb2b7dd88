"""The table formats partition_assets knows, by name: Delta and Parquet built in, and every
format an IO manager class names (`SparkTableIOManager.table_format`) once its class is
defined. What works on a table without knowing its format asks here: vacuum
(storage/maintenance.py) and the release log's readers (storage/release_reads.py,
storage/run_release.py) find the format that holds a table (`table_format_at`) and call it
through the TableFormat protocol, never a format's own library.

Built-in formats are imported when first asked for, so that this module, and `release list`
through it, load no Spark (test_cli_imports.py).

Not guaranteed: a format defined in a code location is known in the processes that import
it (its IO manager's module); a command given only a path (`partition-assets vacuum`) knows
the built-in ones and those. Two formats holding one folder: the first registered wins.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.fs as pafs

from partition_assets.errors import ReleaseExpiredError, TableNotFoundError, UnsupportedByFormatError
from partition_assets.storage.table_format import TableFormat, versioned

# The built-in formats: name -> (module, class), imported when first asked for.
_BUILT_IN = {
    "delta": ("partition_assets.storage.delta.format", "DeltaFormat"),
    "parquet": ("partition_assets.storage.parquet_table", "ParquetFormat"),
}
_registered: dict[str, TableFormat] = {}


def register_format(table_format: TableFormat) -> None:
    """Makes `table_format` known under its `name`, after those known before it; the same
    format class registered again (another IO manager naming it) changes nothing.

    Raises:
        UnsupportedByFormatError: Another format class already has that name (a table's format
            would be ambiguous); nothing was registered.
    """
    known = _registered.setdefault(table_format.name, table_format)
    if type(known) is not type(table_format):
        raise UnsupportedByFormatError(
            f"table format name {table_format.name!r} is taken by {type(known).__qualname__}, so "
            f"{type(table_format).__qualname__} cannot be registered under it: give it another `name`. "
            "Nothing was registered."
        )


def registered_formats() -> Iterator[TableFormat]:
    """Every known format: the built-in ones first, each imported when reached, then in
    registration order."""
    for name, (module, cls) in _BUILT_IN.items():
        if name not in _registered:
            register_format(getattr(importlib.import_module(module), cls)())
        yield _registered[name]
    yield from [table_format for name, table_format in _registered.items() if name not in _BUILT_IN]


def format_at(table_uri: str) -> TableFormat | None:
    """The format of the table stored at `table_uri` (the formats asked in turn); None when no
    known format holds one there."""
    return next((f for f in registered_formats() if f.holds_table(table_uri)), None)


def table_format_at(table_uri: str) -> TableFormat:
    """The format of the table stored at `table_uri`.

    Raises:
        TableNotFoundError: `table_uri` does not exist, or holds a table of no known format.
    """
    fs, root = pafs.FileSystem.from_uri(table_uri)
    if fs.get_file_info(root).type == pafs.FileType.NotFound:
        raise TableNotFoundError(f"{table_uri} does not exist: pass the folder of a table (e.g. .lake/<asset>)")
    found = format_at(table_uri)
    if found is None:
        names = ", ".join(f.name for f in registered_formats())
        raise TableNotFoundError(
            f"{table_uri} is not a table: no known format ({names}) holds one there; pass the folder of a "
            "table (e.g. .lake/<asset>)"
        )
    return found


def current_version(table_uri: str) -> int | None:
    """The latest version of the table at `table_uri`, through its format; None when there is
    no table, or its format keeps no versions."""
    found = format_at(table_uri)
    with_versions = None if found is None else versioned(found)
    return None if with_versions is None else with_versions.version(table_uri)


def read_at_version(table_uri: str, version: int) -> pa.Table:
    """Every row of the table at `table_uri` as of `version`, through its format.

    Raises:
        ReleaseExpiredError: The version can no longer be read (no table of a format that keeps
            versions is there any more, or its files were removed); nothing was read.
    """
    found = format_at(table_uri)
    with_versions = None if found is None else versioned(found)
    if with_versions is None:
        raise ReleaseExpiredError(f"no table of a format that keeps versions at {table_uri}; nothing was read")
    return with_versions.read_version(table_uri, version)
