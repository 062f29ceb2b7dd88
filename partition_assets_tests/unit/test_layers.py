"""The package layers (README "Layout"): every package and top-level module of
partition_assets has a layer (LAYERS, lowest first), and imports only its own package and
those of lower layers, never one beside it (cli/ and automation/ both call
`backfill/commands/`, neither the other) nor above it, so the layout reads as the
architecture and no import ring closes (it once ran storage -> deploy -> backfill -> storage).
Inside `backfill/`, its sub-packages are layers too (BACKFILL_LAYERS), on top of
`backfill/model.py`.

Read from the source, not by importing: every import statement wherever it is written (a
lazy import inside a function counts as much as one at the top), and every string that
names a module of the package (what `importlib` or multiprocessing's preload would import).
"""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "partition_assets"
# partition_assets's packages and top-level modules, lowest layer first: shared modules; the
# formats of shared state; partitions, the Dagster instance's storage pieces and the code location; process helpers;
# deploys and Spark; table storage; the engine; its surfaces; the wiring, the command line
# and the public API; the example code location, which imports that API.
LAYERS = (
    ("errors", "lazy_names", "dagster_betas", "dagster_internals", "run_tags", "run_console"),
    ("state_formats",),
    ("ids", "settings", "code_location", "partitions", "dagster_instance"),
    ("processes", "lint"),
    ("deploy", "spark"),
    ("storage",),
    ("backfill",),
    ("automation", "cli", "instance"),
    ("_wiring", "__main__"),
    ("__init__",),
    ("example",),
)
# backfill/'s layers, lowest first: model.py, its sub-packages, and its __init__.py (the
# package's public names, above them all).
BACKFILL_LAYERS = ("model", "planning", "state", "publishing", "running", "dagster_ui", "commands", "__init__")
# A string naming a module of the package, e.g. "partition_assets.backfill.running.local_workers".
MODULE_NAME = re.compile(r"partition_assets(\.[A-Za-z_]\w*)+")


def imported_modules(path: Path, package: Path = PACKAGE) -> list[str]:
    """Every module `path` (a module of `package`) imports: `from a import b` counts as `a`
    and `a.b` (`b` a module or a name of `a`'s); relative imports resolved."""
    own = ("partition_assets", *path.relative_to(package).parent.parts)
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = own[: len(own) - node.level + 1] if node.level else ()
            module = ".".join((*base, *([node.module] if node.module else [])))
            names += [module, *(f"{module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return names


def named_modules(path: Path) -> list[str]:
    """The strings in `path` that name a package or module of partition_assets that LAYERS
    places (not metadata keys such as "partition_assets.release_id")."""
    return [
        node.value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and MODULE_NAME.fullmatch(node.value)
        and node.value.split(".")[1] in {name for layer in LAYERS for name in layer}
    ]


def place(module: str) -> tuple[str, int, int] | None:
    """`module`'s package (or top-level module) of partition_assets, its layer in LAYERS and
    its layer in BACKFILL_LAYERS (0 outside backfill/); a name imported from a package is
    placed as the package's __init__.py. None outside partition_assets."""
    parts = module.split(".")
    if parts[0] != "partition_assets":
        return None
    layer_of = {name: index for index, layer in enumerate(LAYERS) for name in layer}
    name = parts[1] if len(parts) > 1 and parts[1] in layer_of else "__init__"
    if name != "backfill":
        return name, layer_of[name], 0
    inner = parts[2] if len(parts) > 2 and parts[2] in BACKFILL_LAYERS else "__init__"
    return f"backfill.{inner}", layer_of[name], BACKFILL_LAYERS.index(inner)


def upward_imports(path: Path, package: Path = PACKAGE) -> list[str]:
    """What `path` (a module of `package`) imports or names from a package beside its own
    or in a layer above it."""
    own = place(".".join(("partition_assets", *path.relative_to(package).with_suffix("").parts)))
    assert own is not None, path
    found = []
    for name in [*imported_modules(path, package), *named_modules(path)]:
        other = place(name)
        if other is None or other[0] == own[0]:
            continue
        if other[1:] >= own[1:]:  # a higher layer, or the same one (beside it, or backfill/'s above)
            found.append(name)
    return found


def all_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_package_and_top_level_module_has_a_layer():
    """A new package or module is placed in LAYERS, not left out."""
    found = {path.stem for path in PACKAGE.iterdir() if path.suffix == ".py" or (path / "__init__.py").exists()}
    assert found == {name for layer in LAYERS for name in layer}


def test_every_backfill_sub_package_has_a_layer():
    found = {path.parent.name for path in (PACKAGE / "backfill").glob("*/__init__.py")}
    assert found == set(BACKFILL_LAYERS) - {"model", "__init__"}


@pytest.mark.parametrize("module", all_modules(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_no_module_imports_a_package_beside_its_own_or_above_it(module):
    assert upward_imports(module) == []


@pytest.mark.parametrize(
    ("module", "source", "upward"),
    [
        (
            "storage/top_level.py",
            "import partition_assets.backfill.state\n",
            ["partition_assets.backfill.state"],
        ),
        (
            "storage/in_function.py",
            "def later():\n    from partition_assets.cli.main import main\n",
            ["partition_assets.cli.main", "partition_assets.cli.main.main"],
        ),
        (
            "backfill/publishing/sub_layer.py",
            "def later():\n    from partition_assets.backfill.running.scheduling import Schedule\n",
            ["partition_assets.backfill.running.scheduling", "partition_assets.backfill.running.scheduling.Schedule"],
        ),
        (
            "backfill/model.py",
            "from partition_assets.backfill.planning.graph import Node\n",
            ["partition_assets.backfill.planning.graph", "partition_assets.backfill.planning.graph.Node"],
        ),
        (
            "backfill/running/surface.py",
            "from partition_assets.instance.engine_instance import PARENT_BACKFILL_TAG\n",
            [
                "partition_assets.instance.engine_instance",
                "partition_assets.instance.engine_instance.PARENT_BACKFILL_TAG",
            ],
        ),
        (
            "cli/beside.py",
            "from partition_assets.automation.job import sparse_backfill_job\n",
            ["partition_assets.automation.job", "partition_assets.automation.job.sparse_backfill_job"],
        ),
        (
            "processes/named.py",
            'RUNNER = "partition_assets.backfill.running.local_workers"\n',
            ["partition_assets.backfill.running.local_workers"],
        ),
        (
            "backfill/state/relative.py",
            "from ..commands import results\n",
            ["partition_assets.backfill.commands", "partition_assets.backfill.commands.results"],
        ),
        (
            "backfill/publishing/downward.py",
            "from partition_assets.backfill.model import Node\n"
            "import partition_assets.backfill.state\n"
            "from partition_assets.dagster_instance.storage import keep_connections\n"
            "def later():\n    from partition_assets.errors import PartitionAssetsError\n"
            'KEY = "partition_assets.backfill_id"\n',
            [],
        ),
    ],
    ids=[
        "top-level",
        "in-a-function",
        "between-backfill-sub-layers",
        "model-into-planning",
        "backfill-into-a-surface",
        "beside",
        "named-in-a-string",
        "relative",
        "downward-passes",
    ],
)
def test_the_check_catches_an_upward_import_of_each_kind(tmp_path, module, source, upward):
    """The rule above catches what it claims to, on a small source tree of its own."""
    path = tmp_path / module
    path.parent.mkdir(parents=True)
    path.write_text(source)
    assert upward_imports(path, tmp_path) == upward


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


@pytest.mark.parametrize("module", ["pause_job.py", "takeover_sensor.py"])
def test_the_launchpad_s_pause_and_takeover_change_state_through_the_commands(module):
    """They call backfill/commands/ (as the CLI does), not backfill/state/ directly."""
    imported = imported_modules(PACKAGE / "automation" / module)
    assert [name for name in imported if name.startswith("partition_assets.backfill.state")] == []
    assert any(name.startswith("partition_assets.backfill.commands") for name in imported)


# Where a name imported from a module of partition_assets is looked for: the code, its tests
# and the benchmarks.
SOURCE_TREES = ("partition_assets", "partition_assets_tests", "bench")
MODEL = "partition_assets.backfill.model"


def defined_names(path: Path) -> set[str]:
    """The names `path`'s own top-level statements define (classes, functions, assignments),
    not those it imports."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {target.id for target in targets if isinstance(target, ast.Name)}
    return names


def defined_in(module: str, root: Path) -> set[str]:
    """The names module `module` (of `root`'s SOURCE_TREES) defines; none for another module."""
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return defined_names(path)
    return set()


def imports_through_another_module(names: set[str], home: str, root: Path) -> list[str]:
    """Each `from X import name` under `root`'s SOURCE_TREES of one of `names` (defined in
    module `home`) from an X that only passes it on (X is not `home` and does not define a
    name of its own so called), as "file:line: from X import name"."""
    found = []
    for tree in SOURCE_TREES:
        for path in sorted((root / tree).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module not in (home, None):
                    found += [
                        f"{path.relative_to(root)}:{node.lineno}: from {node.module} import {alias.name}"
                        for alias in node.names
                        if alias.name in names and alias.name not in defined_in(node.module, root)
                    ]
    return found


def test_the_model_s_names_are_imported_from_the_model_alone():
    """`Node`, `RunUnit`, `NodeStatus`... have one import path, `partition_assets.backfill.model`:
    never the package (`partition_assets.backfill`) nor a module that imports them for its own
    use (`planning/graph.py`, `running/scheduling.py`), so that moving one of those modules
    breaks no import."""
    root = PACKAGE.parent
    names = defined_names(PACKAGE / "backfill" / "model.py")
    assert {"Node", "NodeResult", "NodeStatus", "RunUnit"} <= names
    assert imports_through_another_module(names, MODEL, root) == []


def test_the_one_path_check_catches_an_import_through_another_module(tmp_path):
    for tree in SOURCE_TREES:
        (tmp_path / tree).mkdir()
    (tmp_path / "bench" / "through_the_graph.py").write_text(
        "def later():\n    from partition_assets.backfill.planning.graph import BackfillGraph, Node\n"
    )
    # Importing it from its home, or another module's own `Node` from that module, passes.
    (tmp_path / "partition_assets" / "home.py").write_text(f"from {MODEL} import Node\n")
    (tmp_path / "partition_assets" / "own.py").write_text("class Node: ...\n")
    (tmp_path / "partition_assets_tests" / "uses_own.py").write_text("from partition_assets.own import Node\n")
    assert imports_through_another_module({"Node"}, MODEL, tmp_path) == [
        "bench/through_the_graph.py:2: from partition_assets.backfill.planning.graph import Node"
    ]
