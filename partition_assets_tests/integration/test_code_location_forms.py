"""The engine loads every form of code location Dagster loads (partition_assets/code_location.py): a
`@repository`, a `dg`-scaffolded project's `@dg.definitions` function loading its `defs/` folder,
one object of a module named `MODULE:ATTRIBUTE` or `FILE.py:ATTRIBUTE`, a workspace.yaml's entry,
and the module a `[tool.dg]` project names. The webserver's backfills of the first two are adopted
(`backfill run` runs them through its workers, which load the location again, in
test_code_location_user_projects.py, beside Dagster's own runs of them). A module holding several, none, or a
`@dg.definitions` function that raises, an attribute it does not hold, and a workspace of two are
refused with a message naming them, and nothing is recorded."""

import dagster as dg
import pytest

from partition_assets.backfill.dagster_ui.adoption import adopted_plan
from partition_assets.backfill.model import Node
from partition_assets.cli.main import main
from partition_assets.code_location import load_definitions
from partition_assets_tests.support import REPO
from partition_assets_tests.support.records import recorded_ids
from partition_assets_tests.support.ui_backfills import dialog_backfill

FORMS = "partition_assets_tests.support.locations.code_location_forms"
FORMS_FOLDER = REPO / "partition_assets_tests" / "support" / "locations" / "code_location_forms"
TWO_DAYS = ["--select", "key:visits+", "--start", "2024-01-02", "--end", "2024-01-03"]
REPOSITORY = f"{FORMS}.repository_location"
DG_PROJECT = f"{FORMS}.dg_project.definitions"


def run_in_process(argv: list[str], capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    "target",
    [
        ["-m", REPOSITORY],
        ["-m", DG_PROJECT],
        ["-m", f"{FORMS}.several_locations:all_visits"],
        ["-f", f"{FORMS_FOLDER / 'several_locations.py'}:all_visits"],
        ["-w", str(FORMS_FOLDER / "workspace.yaml")],
        [],  # the dg project's pyproject.toml names it, from its folder
    ],
    ids=[
        "repository",
        "dg definitions function",
        "module:attribute",
        "file:attribute",
        "workspace",
        "[tool.dg] project",
    ],
)
def test_the_engine_plans_each_form_of_code_location_dagster_loads(target, home, monkeypatch, capsys):
    if not target:
        monkeypatch.chdir(FORMS_FOLDER / "dg_project")
    code, out, err = run_in_process(["backfill", "plan", *target, *TWO_DAYS], capsys)
    assert code == 0, err
    assert "4 nodes" in out, out


@pytest.mark.parametrize("module", [REPOSITORY, DG_PROJECT], ids=["repository", "dg definitions function"])
def test_a_webserver_backfill_of_a_repository_or_a_definitions_function_is_adopted_by_the_engine(module, instance):
    days = ["2024-01-02", "2024-01-03"]
    keys = [dg.AssetKey("visits"), dg.AssetKey("doubled_visits")]
    # As the webserver's launch dialog builds it.
    launched = dialog_backfill("launched", load_definitions(module).resolve_asset_graph(), days, keys, instance)
    _, graph = adopted_plan(launched, [module], instance)
    assert set(graph.nodes()) == {Node(key, day) for key in keys for day in days}


@pytest.mark.parametrize(
    ("target", "names"),
    [
        (
            ["-m", f"{FORMS}.several_locations"],
            "holds 2 code locations (all_visits, visits_only): name the one to load",
        ),
        (["-m", f"{FORMS}.no_location"], "holds no code location (its `defs` is the undecorated function defs)"),
        # A dg project's root module (`create-dagster project` puts its code location in definitions.py).
        (["-m", f"{FORMS}.dg_project"], "holds no code location: define a dg.Definitions object"),
        (["-m", f"{FORMS}.dg_project"], f", or name its definitions module: -m {FORMS}.dg_project.definitions;"),
        (
            ["-m", f"{FORMS}.raising_location"],
            f"@dg.definitions function {FORMS}.raising_location.defs raised KeyError",
        ),
        (
            ["-m", f"{FORMS}.several_locations:visits_al"],
            "several_locations.visits_al is missing, not a dg.Definitions",
        ),
        (
            ["-w", str(FORMS_FOLDER / "two_locations_workspace.yaml")],
            "2 python_module or python_file entries (analytics,",
        ),
    ],
    ids=[
        "several",
        "none",
        "none, nothing said twice",
        "dg project root",
        "raising",
        "no such attribute",
        "workspace of two",
    ],
)
def test_a_module_with_several_none_or_a_raising_definitions_function_is_refused_and_nothing_recorded(
    target, names, home, capsys
):
    code, _, err = run_in_process(["backfill", "run", *target, *TWO_DAYS], capsys)
    assert code == 2 and names in err and "nothing was written" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert recorded_ids(home) == []
    with dg.DagsterInstance.get() as instance:
        assert instance.get_runs() == []


def test_a_dg_project_loaded_by_autoload_defs_alone_is_refused_naming_the_fix(home, tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.dg.project]\nroot_module = "my_project"\nautoload_defs = true\n')
    monkeypatch.chdir(tmp_path)
    code, _, err = run_in_process(["backfill", "run", *TWO_DAYS], capsys)
    assert code == 2 and "autoload_defs, which the engine does not: add a definitions.py" in err, err
    assert "nothing was written" in err and "Traceback" not in err, err
    assert recorded_ids(home) == []
