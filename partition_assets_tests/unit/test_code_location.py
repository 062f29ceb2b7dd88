"""Loading a code location given as a file (partition_assets/code_location.py): loaded again
unchanged in the same process, it is not executed again (as a module name is not imported
again); once its text changed, it is. A target names a module or a file, and optionally one
object of it (`:ATTRIBUTE`), also for the code server of launched runs."""

import pytest

from partition_assets.backfill.running.launcher import load_target
from partition_assets.code_location import load_definitions, split_target
from partition_assets.dagster_internals import ModuleTarget, PythonFileTarget

LOCATION = """
import dagster as dg


@dg.asset
def {name}() -> None: ...


defs = dg.Definitions(assets=[{name}])
"""


def test_a_file_loaded_again_unchanged_is_not_executed_again_and_a_changed_one_is(tmp_path):
    path = tmp_path / "location.py"
    path.write_text(LOCATION.format(name="orders"))

    first = load_definitions(str(path))
    again = load_definitions(str(path))
    path.write_text(LOCATION.format(name="invoices"))
    changed = load_definitions(str(path))

    assert again is first
    assert {key.to_user_string() for key in first.resolve_asset_graph().get_all_asset_keys()} == {"orders"}
    assert {key.to_user_string() for key in changed.resolve_asset_graph().get_all_asset_keys()} == {"invoices"}


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("pkg.definitions", ("pkg.definitions", None)),
        ("pkg.definitions:analytics", ("pkg.definitions", "analytics")),
        ("/srv/code/definitions.py:defs", ("/srv/code/definitions.py", "defs")),
        ("/srv/code/definitions.py", ("/srv/code/definitions.py", None)),
    ],
)
def test_a_target_names_its_module_or_file_and_optionally_one_attribute(target, expected):
    assert split_target(target) == expected


def test_the_code_server_of_launched_runs_is_given_the_attribute_a_target_names():
    module = load_target("pkg.definitions:analytics")
    file = load_target("/srv/code/definitions.py:defs")
    assert isinstance(module, ModuleTarget) and (module.module_name, module.attribute) == (
        "pkg.definitions",
        "analytics",
    )
    assert isinstance(file, PythonFileTarget) and (file.python_file, file.attribute) == (
        "/srv/code/definitions.py",
        "defs",
    )
