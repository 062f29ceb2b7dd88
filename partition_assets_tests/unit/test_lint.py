"""The wall-clock lint on a file holding each flagged form and look-alikes that are not
(wall_clock_assets.py), through the library and the Definitions-load opt-in (the real CLI:
partition_assets_tests/e2e/test_lint_wall_clock.py). No Spark: nothing is materialized."""

import dagster as dg
import pytest

from partition_assets.errors import CodeLocationError, WallClockError
from partition_assets.lint import FIX, check_wall_clock, lint_file, lint_module
from partition_assets_tests.support import REPO
from partition_assets_tests.support.locations import wall_clock_assets

FIXTURE = "partition_assets_tests/support/locations/wall_clock_assets.py"

# (line, call as written, asset, helpers from the asset to the call) for every flagged form.
EXPECTED = [
    (26, "datetime.datetime.now()", "datetime_module_now", ()),
    (31, "dt.datetime.utcnow()", "aliased_module_utcnow", ()),
    (36, "DateTime.today()", "imported_class_today", ()),
    (41, "date.today()", "date_today", ()),
    (46, "time.time()", "time_time", ()),
    (51, "epoch_seconds()", "imported_time_function", ()),
    (56, "pendulum.now()", "pendulum_now_and_today", ()),
    (56, "pendulum.today()", "pendulum_now_and_today", ()),
    (61, "pd.Timestamp.now()", "pandas_timestamp_now", ()),
    (66, "F.current_date()", "spark_functions", ()),
    (66, "F.current_timestamp()", "spark_functions", ()),
    (66, "F.localtimestamp()", "spark_functions", ()),
    (66, "F.now()", "spark_functions", ()),
    (71, "current_date()", "spark_function_imported_by_name", ()),
    (76, 'spark.sql("...current_date...")', "sql_strings", ()),
    (77, 'frame.where("...now()...")', "sql_strings", ()),
    (78, 'frame.selectExpr("...localtimestamp...")', "sql_strings", ()),
    (79, 'expr("...current_timestamp...")', "sql_strings", ()),
    (84, 'spark.sql("...current_date...")', "sql_through_a_module_constant", ()),
    (88, "F.current_timestamp()", "through_helpers", ("_prepare", "_stamp")),
    (101, "pendulum.today()", "helper_passed_not_called", ("_reference_clock",)),
    (148, "datetime.datetime.today()", "two_stamped_tables", ()),
    (155, "time.time()", "graph_of_a_clock_op", ("clock_op",)),
]
CLEAN_ASSETS = {"partition_time", "shadowed_names", "renamed_clean"}


def found(report):
    return [(f.line, f.call, f.asset, f.helpers) for f in report.findings]


def test_reading_the_file_finds_exactly_each_flagged_form():
    report = lint_file(REPO / FIXTURE)

    assert found(report) == EXPECTED
    assert {f.file for f in report.findings} == {str(REPO / FIXTURE)}
    flagged = {asset for _, _, asset, _ in EXPECTED}
    assert set(report.assets) == flagged | CLEAN_ASSETS


def test_importing_the_module_finds_the_same_through_its_asset_definitions():
    assert found(lint_module("partition_assets_tests.support.locations.wall_clock_assets")) == EXPECTED


def test_a_finding_names_the_place_the_call_the_helper_its_asset_and_the_fix():
    report = lint_file(REPO / FIXTURE)
    through_helper = next(f for f in report.findings if f.helpers)

    assert str(through_helper).replace(str(REPO) + "/", "") == (
        f"{FIXTURE}:88: F.current_timestamp() in helper _stamp, called by asset through_helpers via _prepare: {FIX}"
    )
    assert FIX == (
        "wall clock in asset logic; use context.partition_key / context.partition_time_window "
        "(or partition_key_range) instead"
    )


def test_a_missing_file_is_a_typed_error():
    with pytest.raises(CodeLocationError):
        lint_file(REPO / "partition_assets_tests" / "support" / "no_such_file.py")


def test_definitions_with_a_wall_clock_do_not_load_when_checked():
    with pytest.raises(WallClockError) as raised:
        check_wall_clock(dg.Definitions(assets=dg.load_assets_from_modules([wall_clock_assets])))

    assert [(f.line, f.call, f.asset, f.helpers) for f in raised.value.findings] == EXPECTED
    assert "the Definitions were not loaded" in str(raised.value)


def test_clean_definitions_are_returned_as_they_are():
    clean = [
        asset
        for asset in dg.load_assets_from_modules([wall_clock_assets])
        if isinstance(asset, dg.AssetsDefinition) and {key.to_user_string() for key in asset.keys} <= CLEAN_ASSETS
    ]
    assert len(clean) == len(CLEAN_ASSETS)
    defs = dg.Definitions(assets=clean)

    assert check_wall_clock(defs) is defs

    from partition_assets.example import defs as example_defs

    assert check_wall_clock(example_defs) is example_defs
