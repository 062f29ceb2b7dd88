"""The package layers (README "Layout"): nothing below `backfill/` imports it, nor the
surfaces built on it (automation/, cli/, instance/, example/), so the layout reads as the
architecture and no import ring closes (it once ran storage -> deploy -> backfill -> storage).
Inside `backfill/`, its sub-packages are layers too, each importing only those below it
(BACKFILL_LAYERS), on top of `backfill/model.py`; and the two surfaces that parse and render
commands, cli/ and automation/, never import each other: both call `backfill/commands/`.

Read from the source (every import statement, function-level ones included), not by
importing: a lazy import inside a function counts as much as one at the top.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "partition_assets"
# What the backfill packages build on: partitions, storage, Spark, deploys, process helpers,
# the Dagster instance's storage pieces, and the top-level modules every layer shares.
LOWER = [
    "partitions",
    "storage",
    "spark",
    "deploy",
    "processes",
    "dagster_instance",
    "code_location.py",
    "dagster_betas.py",
    "dagster_internals.py",
    "errors.py",
    "ids.py",
    "lint.py",
    "run_console.py",
    "run_tags.py",
    "settings.py",
]
# `_wiring` (a module: partition_assets.definitions) wires a project from them all.
UPPER = ("backfill", "automation", "cli", "instance", "example", "_wiring")
# backfill/'s sub-packages, lowest first; model.py is below them all.
BACKFILL_LAYERS = ("planning", "state", "publishing", "running", "dagster_ui", "commands")


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
    placed = set(LOWER) | set(UPPER) | {"__init__", "__main__"}
    found = {path.stem for path in PACKAGE.iterdir() if path.suffix == ".py" or (path / "__init__.py").exists()}
    placed = {name.removesuffix(".py") for name in placed}
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


def backfill_layer(module: str) -> int | None:
    """The position of `module`'s sub-package of backfill/ in BACKFILL_LAYERS (model.py: -1;
    backfill/__init__.py: above them all), None outside backfill/."""
    parts = module.split(".")
    if parts[:2] != ["partition_assets", "backfill"] or len(parts) < 3:
        return None
    if parts[2] == "__init__":  # the package's public names: above every layer, as commands/
        return len(BACKFILL_LAYERS)
    return BACKFILL_LAYERS.index(parts[2]) if parts[2] in BACKFILL_LAYERS else -1


def upward_in_backfill(path: Path, package: Path = PACKAGE) -> list[str]:
    """What `path` (a module of backfill/ in `package`) imports from a layer above its own."""
    own = backfill_layer(".".join(("partition_assets", *path.relative_to(package).with_suffix("").parts)))
    assert own is not None, path
    return [name for name in imported_modules(path) if (backfill_layer(name) or -1) > own]


@pytest.mark.parametrize(
    "module",
    sorted((PACKAGE / "backfill").rglob("*.py")),
    ids=lambda path: str(path.relative_to(PACKAGE)),
)
def test_no_module_of_backfill_imports_a_layer_above_its_own(module):
    assert upward_in_backfill(module) == []


def test_every_backfill_sub_package_has_a_layer():
    found = {path.parent.name for path in (PACKAGE / "backfill").glob("*/__init__.py")}
    assert found == set(BACKFILL_LAYERS)


def test_the_backfill_check_sees_an_upward_import_and_lets_a_downward_one_pass(tmp_path):
    publishing = tmp_path / "backfill" / "publishing"
    publishing.mkdir(parents=True)
    upward = publishing / "upward.py"
    upward.write_text("def later():\n    from partition_assets.backfill.running.scheduling import Schedule\n")
    downward = publishing / "downward.py"
    downward.write_text("from partition_assets.backfill.model import Node\nimport partition_assets.backfill.state\n")
    assert upward_in_backfill(upward, tmp_path) == [
        "partition_assets.backfill.running.scheduling",
        "partition_assets.backfill.running.scheduling.Schedule",
    ]
    assert upward_in_backfill(downward, tmp_path) == []


@pytest.mark.parametrize(
    ("surface", "other"), [("cli", "automation"), ("automation", "cli")], ids=["cli", "automation"]
)
def test_cli_and_automation_never_import_each_other(surface, other):
    importing = {
        str(path.relative_to(PACKAGE)): name
        for path in sorted((PACKAGE / surface).rglob("*.py"))
        for name in imported_modules(path)
        if name.split(".")[:2] == ["partition_assets", other]
    }
    assert importing == {}


def test_the_launchpad_jobs_call_commands_and_capture_no_output():
    """automation/ renders results itself: no stdout captured, no command line faked."""
    for path in (PACKAGE / "automation").rglob("*.py"):
        text = path.read_text()
        assert "redirect_stdout" not in text and "argparse.Namespace(" not in text, path
