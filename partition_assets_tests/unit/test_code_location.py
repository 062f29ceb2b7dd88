"""Loading a code location given as a file (partition_assets/code_location.py): loaded again
unchanged in the same process, it is not executed again (as a module name is not imported
again); once its text changed, it is."""

from partition_assets.code_location import load_definitions

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
