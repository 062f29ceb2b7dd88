"""The table-format seam (storage/table_format.py): outside a format's own module, code asks a
format for a capability (FormatCapabilities), never for its class, and delta-rs is used only
in storage/delta/, as dagster-deltalake keeps its format code in its handler. Read from the
source, as test_layers.py reads imports (a lazy import inside a function counts too).

And what a caller asking for a capability gets from a format that lacks it."""

import ast
from pathlib import Path

import pytest

from partition_assets.errors import UnsupportedByFormatError
from partition_assets.storage import table_formats
from partition_assets.storage.parquet_table import ParquetFormat
from partition_assets.storage.table_format import Capability, required_staging, requires
from partition_assets.storage.table_formats import register_format
from partition_assets_tests.unit.test_layers import PACKAGE, imported_modules

DELTA_PACKAGE = PACKAGE / "storage" / "delta"
# User code, not the library: the example code location edits a Delta table itself, as a
# user's asset may.
USER_CODE = PACKAGE / "example"


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def concrete_formats() -> dict[str, Path]:
    """Each class of the package named `...Format` that is not a Protocol (a format), by its
    own code: the module defining it, or its package when that is one of storage/'s (storage/delta/)."""
    found = {}
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Format"):
                bases = {base.id if isinstance(base, ast.Name) else getattr(base, "attr", "") for base in node.bases}
                if "Protocol" not in bases:
                    found[node.name] = path.parent if path.parent.parent == PACKAGE / "storage" else path
    return found


def isinstance_checks(path: Path) -> set[str]:
    """The names `path` passes as the class argument of an `isinstance` call."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            classes = node.args[1] if len(node.args) > 1 else None
            for part in classes.elts if isinstance(classes, ast.Tuple) else [classes]:
                if isinstance(part, ast.Name):
                    names.add(part.id)
                elif isinstance(part, ast.Attribute):
                    names.add(part.attr)
    return names


def test_no_module_outside_storage_delta_imports_delta_rs():
    outside = [
        path.relative_to(PACKAGE).as_posix()
        for path in modules()
        if not path.is_relative_to(DELTA_PACKAGE) and not path.is_relative_to(USER_CODE)
        if any(name == "deltalake" or name.startswith("deltalake.") for name in imported_modules(path))
    ]
    assert outside == [], f"delta-rs used outside storage/delta/: {outside}"


# Modules outside storage/ that may import from storage/delta/: the backfill ledger, itself an
# append-only Delta table (not a user's table of some format), and Delta's names for column
# types, the logical types every format's schemas are compared in (storage/delta/types.py).
LEDGER = "backfill/state/ledger.py"
DELTA_TYPES = "partition_assets.storage.delta.types"


def test_no_module_outside_storage_reaches_into_the_delta_package():
    storage = PACKAGE / "storage"
    found = {}
    for path in modules():
        module = path.relative_to(PACKAGE).as_posix()
        if path.is_relative_to(storage) or path.is_relative_to(USER_CODE) or module == LEDGER:
            continue
        names = {
            name
            for name in imported_modules(path)
            if name.startswith("partition_assets.storage.delta") and not name.startswith(DELTA_TYPES)
        }
        if names:
            found[module] = sorted(names)
    assert found == {}, f"outside storage/, ask the format (TableFormat) instead: {found}"


def test_no_module_checks_a_concrete_format_by_its_class_outside_its_own_module():
    formats = concrete_formats()
    assert {"DeltaFormat", "ParquetFormat"} <= set(formats)
    checks = {
        path.relative_to(PACKAGE).as_posix(): sorted(name for name in isinstance_checks(path) if name in formats)
        for path in modules()
    }
    found = {
        module: names
        for module, names in checks.items()
        if any(not (PACKAGE / module).is_relative_to(formats[name]) for name in names)
    }
    assert found == {}, f"isinstance of a concrete format; ask FormatCapabilities instead: {found}"


def test_a_format_lacking_a_capability_is_refused_naming_it_the_capability_and_the_fix():
    with pytest.raises(UnsupportedByFormatError) as refused:
        required_staging(ParquetFormat(), "lake/t", "run it with --publish per-node")
    assert str(refused.value) == (
        "table lake/t is stored as parquet, which lacks the capability 'staged_publish' (to stage a "
        "backfill's partitions and publish each table in one commit): run it with --publish per-node. "
        "Nothing was written."
    )
    with pytest.raises(UnsupportedByFormatError, match="'versions'"):
        requires(ParquetFormat(), Capability.VERSIONS, "lake/t", "read it unpinned")


def test_a_second_format_class_under_a_taken_name_is_refused_and_the_same_class_again_changes_nothing():
    class Impostor(ParquetFormat):
        pass

    register_format(ParquetFormat())  # the built-in class again: nothing changes
    assert type(table_formats._registered["parquet"]) is ParquetFormat
    with pytest.raises(UnsupportedByFormatError) as refused:
        register_format(Impostor())
    assert "'parquet' is taken by ParquetFormat" in str(refused.value)
    assert "Nothing was registered" in str(refused.value)
    assert type(table_formats._registered["parquet"]) is ParquetFormat
