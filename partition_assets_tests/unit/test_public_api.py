"""The public API (partition_assets/__init__.py): one flat `__all__`, each name read from the
module defining it; the docs' API page lists exactly those names; the example code location
imports nothing deeper than `partition_assets` (its own modules aside)."""

import ast
import re

import pytest

import partition_assets
from partition_assets import backfill
from partition_assets_tests.support import REPO

API_PAGE = REPO / "docs" / "reference" / "api.md"
EXAMPLE = REPO / "partition_assets" / "example"


def documented_names(section: str = "") -> set[str]:
    """The names in the first column of the API page's tables (of its `## {section}` alone
    when one is named)."""
    text = API_PAGE.read_text()
    if section:
        text = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(\w+)` \|", text, flags=re.MULTILINE))


def test_the_api_page_lists_exactly_the_public_names():
    assert documented_names() == set(partition_assets.__all__)
    assert len(partition_assets.__all__) == len(set(partition_assets.__all__))


def test_every_public_name_is_importable_from_partition_assets_as_its_module_defines_it():
    namespace: dict = {}
    exec("from partition_assets import *", namespace)
    home_of = {name: module for module, names in partition_assets._HOMES.items() for name in names}
    for name in partition_assets.__all__:
        home = home_of[name]
        assert namespace[name] is getattr(__import__(home, fromlist=[name]), name), name
    # No name is read lazily that __all__ does not list.
    assert set(home_of) == set(partition_assets.__all__)


def test_a_name_the_api_does_not_hold_is_an_attribute_error():
    try:
        partition_assets.definition  # noqa: B018
    except AttributeError as error:
        assert "'definition'" in str(error)
    else:
        raise AssertionError("partition_assets.definition was found")


def test_the_backfill_package_exports_exactly_the_safe_backfill_names_of_the_api_page():
    """`partition_assets.backfill` holds what a code location declares (its gates and approval),
    the same objects as `partition_assets`'s, and no engine internal: `Node`, `Schedule` or
    `execute` are imported from their modules."""
    assert set(backfill.__all__) == documented_names("Safe backfills")
    assert {name for names in backfill._HOMES.values() for name in names} == set(backfill.__all__)
    for name in backfill.__all__:
        assert getattr(backfill, name) is getattr(partition_assets, name), name
    for internal in ("Node", "Schedule", "Throttle", "execute", "build_graph"):
        with pytest.raises(AttributeError, match=f"'{internal}'"):
            getattr(backfill, internal)


def test_the_example_imports_from_partition_assets_alone():
    deeper = {}
    for path in sorted(EXAMPLE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for module in modules:
                own = module == "partition_assets" or module.startswith("partition_assets.example")
                if module.split(".")[0] == "partition_assets" and not own:
                    deeper[path.name] = module
    assert deeper == {}


# What a script that plans, runs and reads a backfill needs (docs/guide/your-project.md, "A script").
SCRIPT_NAMES = {
    "BackfillSpec",
    "Console",
    "PrintingConsole",
    "SilentConsole",
    "UnguardedScriptError",
    "plan_backfill",
    "run_backfill",
    "backfill_status",
    "list_backfills",
    "resume_backfill",
    "retry_backfill",
    "cancel_backfill",
    "pause_backfill",
    "unpause_backfill",
    "diff_backfill",
    "publish_backfill",
    "approve_backfill",
    "discard_backfill",
    "extend_backfill",
    "rollback_backfill",
    "backfill_ledger",
    "retract_partitions",
    "detach_backfill",
}


def test_a_script_finds_the_commands_the_spec_and_a_printing_console_in_partition_assets(capsys):
    assert SCRIPT_NAMES <= set(partition_assets.__all__)
    partition_assets.PrintingConsole().line("backfill 0123456789ab: 4 nodes")
    assert capsys.readouterr().out == "backfill 0123456789ab: 4 nodes\n"
