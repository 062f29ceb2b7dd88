"""Skipped outputs as Dagster has them (issue 51 point 1): an asset with
`output_required=False` that yields nothing for a day. Dagster records nothing for that day,
skips the steps downstream of it and the run succeeds; the engine's backfill of the same
project leaves the same materializations and outputs, shows those nodes skipped, and
publishes."""

import pytest

from partition_assets_tests.conformance.compare import by_dagster, holdings, on_the_engine

MODULE = "partition_assets_tests.support.user_projects.skipping_days"
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]


@pytest.mark.filterwarnings("ignore:Function `asset_materialize_command` is superseded")
def test_a_skipped_output_skips_its_downstream_and_is_recorded_as_dagster_records_it(
    home, home_template, tmp_path, monkeypatch
):
    code, output = on_the_engine(home, MODULE, DAYS[0], DAYS[-1])
    on_engine = holdings(home, MODULE)
    dagster_runs = by_dagster(tmp_path / "dagster_materialize_home", home_template, MODULE, DAYS, monkeypatch)
    by_dagster_holdings = holdings(tmp_path / "dagster_materialize_home", MODULE)

    assert dagster_runs == [True] * len(DAYS)
    assert code == 0, output
    assert on_engine == by_dagster_holdings
    assert on_engine.materialized["arrivals"] == {"2024-01-01", "2024-01-03"}
    assert "4 nodes skipped" in output.splitlines()[-1], output
