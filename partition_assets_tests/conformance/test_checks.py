"""Every check result where Dagster puts it (issue 51 point 2): asset checks as Dagster users
write them (blocking or not, partitioned or not) judge an asset, on Dagster's default IO
manager (its node runs record their materializations) and in a Delta table (a staged backfill
records its materializations when it publishes). After the backfill, each check's latest
evaluation judged the partition's latest materialization (`is_current`: the Checks tab reads
Passed or Failed, not "not evaluated"), as after Dagster's own runs. A blocking check that
fails keeps its partition's downstream from running, as in Dagster, and the engine's last
line names it."""

import pytest

from partition_assets_tests.conformance.compare import by_dagster, holdings, on_the_engine, side_by_side
from partition_assets_tests.support.locations.user_projects.checked_visits import BLOCKED_DAY

MODULE = "partition_assets_tests.support.locations.user_projects.checked_visits"
DELTA_MODULE = "partition_assets_tests.support.locations.user_projects.checked_deliveries"
PASSING_DAYS = ["2024-01-01", "2024-01-02"]
# Where DELTA_MODULE's lake is (read when it is imported: by the engine's run, not here).
LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"


@pytest.mark.filterwarnings("ignore:Function `asset_materialize_command` is superseded")
def test_after_a_staged_publish_every_check_judged_the_materialization_dagster_would_show(
    home, home_template, tmp_path, monkeypatch
):
    both = side_by_side(MODULE, "*", PASSING_DAYS, home, home_template, tmp_path, monkeypatch)
    on_engine = both.on_engine

    assert both.dagster_runs == [True, True]
    assert both.code == 0, both.output
    assert on_engine == both.by_dagster
    assert on_engine.checks[("visits_are_counted", None)] == ("SUCCEEDED", True)
    assert on_engine.checks[("no_bots", None)] == ("FAILED", True)
    assert {on_engine.checks[("visits_of_the_day", day)] for day in PASSING_DAYS} == {("SUCCEEDED", True)}


@pytest.mark.filterwarnings("ignore:Function `asset_materialize_command` is superseded")
def test_after_a_staged_publish_of_a_delta_table_every_check_judged_its_published_materialization(
    spark_resource, lake, home, home_template, tmp_path, monkeypatch
):
    monkeypatch.setenv(LAKE_ENV, str(lake))
    both = side_by_side(DELTA_MODULE, "*", PASSING_DAYS, home, home_template, tmp_path, monkeypatch)
    on_engine = both.on_engine

    assert both.dagster_runs == [True, True]
    assert both.code == 0, both.output
    assert on_engine == both.by_dagster
    assert on_engine.materialized == {"deliveries": set(PASSING_DAYS)}
    assert on_engine.checks[("deliveries_arrived", None)] == ("SUCCEEDED", True)
    assert on_engine.checks[("no_returns", None)] == ("FAILED", True)
    assert {on_engine.checks[("deliveries_of_the_day", day)] for day in PASSING_DAYS} == {("SUCCEEDED", True)}


@pytest.mark.filterwarnings("ignore:Function `asset_materialize_command` is superseded")
def test_a_failed_blocking_check_keeps_its_partitions_downstream_from_running_as_in_dagster(
    home, home_template, tmp_path, monkeypatch
):
    code, output = on_the_engine(MODULE, "*", BLOCKED_DAY, BLOCKED_DAY)
    on_engine = holdings(home, MODULE)
    dagster_home = tmp_path / "dagster_materialize_home"
    dagster_runs = by_dagster(dagster_home, home_template, MODULE, "*", [BLOCKED_DAY], monkeypatch)
    by_dagster_holdings = holdings(dagster_home, MODULE)

    assert dagster_runs == [False]
    assert "visit_report" not in by_dagster_holdings.materialized
    assert code == 1, output
    assert "visit_report" not in on_engine.materialized
    assert "visits_are_counted" in output.splitlines()[-1], output
