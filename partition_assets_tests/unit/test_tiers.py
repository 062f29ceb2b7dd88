"""The test tree's layout (partition_assets_tests/conftest.py names the tiers): a test file of
unit/, integration/ or e2e/ is named after the module of partition_assets it tests
(`test_<module>.py`; `test_<package>_<module>.py` where two packages hold a module of that
name) or the command (`test_backfill_run.py`, `test_release_show.py`, `test_vacuum.py`),
optionally followed by the aspect it tests (`test_local_workers_death.py`), or is one of the
few scenarios of NAMED_FOR_NO_MODULE, each with its reason; a name belongs to one tier only,
so a file found by its name is the one meant; and the code locations the tests load are in
support/locations/, apart from the helpers in support/. conformance/ is left out of the
naming rule: its files are named after the Dagster rules they compare the engine with
(blocked partitions, skips, run config...), not after a module of this library.

Not guaranteed: that a file's name matches what it tests (a reviewer's call, not a rule): a
name that begins with a module's or a package's name passes whatever follows it.
"""

import argparse
import ast
from collections import defaultdict
from pathlib import Path

import partition_assets
import partition_assets_tests
from partition_assets.cli.main import build_parser

TESTS = Path(partition_assets_tests.__file__).parent
PACKAGE = Path(partition_assets.__file__).parent
TIERS = ("unit", "integration", "e2e", "conformance")
NAMED_TIERS = ("unit", "integration", "e2e")

# The test files named for no one module or command, each with why (keep this list short: a
# new test of a module is named after it).
NAMED_FOR_NO_MODULE = {
    "unit/test_layers.py": "the import layers of every package of partition_assets at once",
    "unit/test_public_api.py": "partition_assets' flat __all__ against the modules and the docs' API page",
    "unit/test_tiers.py": "the layout of the test tree itself",
    "unit/test_unit_guard.py": "the unit tier's own guard (partition_assets_tests/unit/conftest.py)",
    "unit/test_postgres_readme.py": "README's PostgreSQL block against the tests' configuration",
    "e2e/test_guide_your_project.py": "docs/guide/your-project.md run word for word: every command it shows",
    "e2e/test_installed_wheel.py": "the built wheel installed in a fresh venv: packaging, not a module",
    "e2e/test_multi_host.py": "one deployment on two hosts, every status-changing command across them",
    "e2e/test_safety_under_interference.py": "a staged backfill disturbed by commits, races, kills and the Launchpad",
    "e2e/test_shell.py": "the product through Dagster's own commands and `make dev`, no partition-assets command",
    "unit/test_soak_invariants.py": "the soak harness's checks (bench/soak/invariants.py), not the package's",
    "e2e/test_soak.py": "bench/soak/'s fault schedule over every process and server of a deployment",
    "integration/test_soak_production.py": "the soak harness's production actor (bench/soak/actors.py)",
    "e2e/test_upgrade_mid_backfill.py": "a backfill of the previous release finished by this one, across hosts",
}


def shared_test_file_names(root: Path) -> dict[str, list[str]]:
    """Each test file name found in more than one tier under `root`, with those tiers."""
    tiers_of = defaultdict(list)
    for tier in TIERS:
        for path in sorted((root / tier).glob("test_*.py")):
            tiers_of[path.name].append(tier)
    return {name: tiers for name, tiers in tiers_of.items() if len(tiers) > 1}


def code_locations_among_helpers(support: Path) -> list[str]:
    """The modules directly in `support` that bind a code location's `defs` at their top level."""
    found = []
    for path in sorted(support.glob("*.py")):
        for statement in ast.parse(path.read_text()).body:
            targets = statement.targets if isinstance(statement, ast.Assign) else []
            if any(isinstance(target, ast.Name) and target.id == "defs" for target in targets):
                found.append(path.name)
    return found


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The commands `parser` dispatches to, by name (none for a command without subcommands)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_names(parser: argparse.ArgumentParser) -> set[str]:
    """Each command of the CLI as a test file names it: `backfill_run`, `release_show`, `vacuum`."""
    names = set()
    for command, command_parser in subcommands(parser).items():
        actions = subcommands(command_parser)
        names |= {f"{command}_{action}" for action in actions} if actions else {command}
    return names


def module_names(package: Path) -> set[str]:
    """The names a test file of a module of `package` may take: each subpackage's name (but the
    `backfill` package's: its modules are in subpackages that name them, and `backfill` alone is
    a command with a verb), each module's name where no other module or package has it, and
    `<package>_<module>` for every module."""
    modules = [path for path in package.rglob("*.py") if not path.stem.startswith("__")]
    packages = [init.parent.name for init in package.rglob("*/__init__.py")]
    stems = [path.stem.lstrip("_") for path in modules] + packages
    names = {stem for stem in stems if stems.count(stem) == 1}
    names |= {f"{path.parent.name}_{path.stem.lstrip('_')}" for path in modules if path.parent != package}
    return (names | set(packages)) - {"backfill"}


def misnamed_test_files(root: Path, names: set[str], allowed: set[str]) -> list[str]:
    """The test files of `root`'s named tiers whose name is `test_<name>` or `test_<name>_<aspect>`
    for no name of `names`, and that `allowed` (paths `<tier>/<file>`) does not list."""
    found = []
    for tier in NAMED_TIERS:
        for path in sorted((root / tier).glob("test_*.py")):
            tested = path.stem.removeprefix("test_")
            named = any(tested == name or tested.startswith(f"{name}_") for name in names)
            if not named and f"{tier}/{path.name}" not in allowed:
                found.append(f"{tier}/{path.name}")
    return found


def test_each_test_file_is_named_after_a_module_or_a_command():
    names = module_names(PACKAGE) | command_names(build_parser())
    assert misnamed_test_files(TESTS, names, set(NAMED_FOR_NO_MODULE)) == [], (
        "name the file test_<module>.py or test_<command>.py (with an aspect after it if needed)"
    )


def test_the_names_a_test_file_may_take():
    names = module_names(PACKAGE) | command_names(build_parser())
    assert {"leases", "stage_runner", "cli_backfill", "backfill_run", "release_show", "vacuum", "spark"} <= names
    # two modules are named storage.py (instance/, dagster_instance/): the bare name is refused
    assert "storage" in names and "dagster_instance_storage" in names and "tables" not in names
    assert "backfill" not in names and "backfill_nosuchverb" not in names


def test_a_file_named_for_no_module_is_found_and_the_allowlist_lets_one_pass(tmp_path):
    for tier, name in [
        ("unit", "test_leases_threads.py"),
        ("unit", "test_what_a_backfill_prints.py"),
        ("e2e", "test_soak.py"),
    ]:
        (tmp_path / tier).mkdir(exist_ok=True)
        (tmp_path / tier / name).write_text("")
    (tmp_path / "integration").mkdir()
    assert misnamed_test_files(tmp_path, {"leases"}, {"e2e/test_soak.py"}) == ["unit/test_what_a_backfill_prints.py"]


def test_every_file_the_allowlist_names_exists():
    assert [path for path in NAMED_FOR_NO_MODULE if not (TESTS / path).is_file()] == []


def test_no_two_tiers_share_a_test_file_name():
    assert shared_test_file_names(TESTS) == {}, "name the file after the module or command it tests, per tier"


def test_a_name_two_tiers_share_is_found(tmp_path):
    for tier, name in [("unit", "test_leases.py"), ("integration", "test_leases.py"), ("e2e", "test_deploy.py")]:
        (tmp_path / tier).mkdir(exist_ok=True)
        (tmp_path / tier / name).write_text("")
    assert shared_test_file_names(tmp_path) == {"test_leases.py": ["unit", "integration"]}


def test_code_locations_are_in_support_locations_not_among_the_helpers():
    assert code_locations_among_helpers(TESTS / "support") == []
    assert "safe_defs.py" in code_locations_among_helpers(TESTS / "support" / "locations")
