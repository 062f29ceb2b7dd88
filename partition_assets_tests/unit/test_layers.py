"""The package layers (README "Layout"): nothing below `backfill/` imports it, nor the
surfaces built on it (automation/, cli/, instance/, example/), so the layout reads as the
architecture and no import ring closes (it once ran storage -> deploy -> backfill -> storage).

Read from the source (every import statement, function-level ones included), not by
importing: a lazy import inside a function counts as much as one at the top.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "partition_assets"
# What the backfill packages build on: partitions, storage, Spark, deploys, process helpers,
# and the top-level modules every layer shares.
LOWER = [
    "partitions",
    "storage",
    "spark",
    "deploy",
    "processes",
    "code_location.py",
    "dagster_betas.py",
    "dagster_internals.py",
    "errors.py",
    "ids.py",
    "lint.py",
    "run_tags.py",
    "settings.py",
]
UPPER = ("backfill", "automation", "cli", "instance", "example")


def imported_modules(path: Path) -> list[str]:
    """Every module `path` imports absolutely; `from a import b` counts as `a` and `a.b`."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return names


def is_upper(module: str) -> bool:
    """Whether `module` is `backfill/` or a surface above it (or one of their modules)."""
    parts = module.split(".")
    return parts[0] == "partition_assets" and len(parts) > 1 and parts[1] in UPPER


def lower_modules() -> list[Path]:
    paths = [PACKAGE / part for part in LOWER]
    return [file for path in paths for file in ([path] if path.suffix == ".py" else sorted(path.rglob("*.py")))]


def test_every_package_and_top_level_module_has_a_layer():
    """A new package or module is placed below or above `backfill/` here, not left out."""
    placed = set(LOWER) | set(UPPER) | {"__init__.py", "__main__.py"}
    found = {path.name for path in PACKAGE.iterdir() if path.suffix == ".py" or (path / "__init__.py").exists()}
    assert found == placed


@pytest.mark.parametrize("module", lower_modules(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_no_module_below_backfill_imports_it_or_a_surface_above_it(module):
    assert [name for name in imported_modules(module) if is_upper(name)] == []


def test_the_check_sees_an_upward_import_wherever_it_is_written(tmp_path):
    """The rule above catches what it claims to: top-level, `from` and function-level imports."""
    source = tmp_path / "module.py"
    source.write_text(
        "import partition_assets.cli\n"
        "from partition_assets import backfill\n"
        "def later():\n"
        "    from partition_assets.instance.storage import RunStorage\n"
    )
    upward = {name for name in imported_modules(source) if is_upper(name)}
    assert {"partition_assets.cli", "partition_assets.backfill", "partition_assets.instance.storage"} <= upward
    assert not is_upper("partition_assets.storage.leases") and not is_upper("partition_assets.backfill_tags")
