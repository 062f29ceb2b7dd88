"""The test tree's layout (partition_assets_tests/conftest.py names the tiers): a test file is
named after the module or command it tests, so a name belongs to one tier only and a file
found by its name is the one meant; and the code locations the tests load are in
support/locations/, apart from the helpers in support/.

Not guaranteed: that a file's name matches what it tests (a reviewer's call, not a rule).
"""

import ast
from collections import defaultdict
from pathlib import Path

import partition_assets_tests

TESTS = Path(partition_assets_tests.__file__).parent
TIERS = ("unit", "integration", "e2e", "conformance")


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
