"""Skipped outputs as Dagster has them (issue 51 point 1): an asset with
`output_required=False` yields nothing on even days. Dagster records nothing for those days,
skips the steps downstream of them and its runs succeed; the engine's staged backfill of the
same project leaves the same materializations and outputs, shows those nodes skipped (its
progress lines, last line and `backfill status`), and publishes. Backfilled alone, the
skipping asset's empty days are not recorded either."""

import json
import re

import pytest

from partition_assets_tests.conformance.compare import by_dagster, engine_command, holdings, on_the_engine
from partition_assets_tests.support.cli_runs import backfill_id

MODULE = "partition_assets_tests.support.locations.user_projects.skipping_days"
DELTA_MODULE = "partition_assets_tests.support.locations.user_projects.skipping_deliveries"
# Where DELTA_MODULE's lake is (read when it is imported: by the engine's run, not here).
DELTA_LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]


@pytest.mark.filterwarnings("ignore:Function `asset_materialize_command` is superseded")
@pytest.mark.parametrize(
    ("select", "skipped"), [("*", 4), ("arrivals", 2)], ids=["with its downstream", "the skipping asset alone"]
)
def test_a_skipped_output_skips_its_downstream_and_is_recorded_as_dagster_records_it(
    select, skipped, home, home_template, tmp_path, monkeypatch
):
    code, output = on_the_engine(MODULE, select, DAYS[0], DAYS[-1])
    on_engine = holdings(home, MODULE)
    status_code, status = engine_command("backfill", "status", backfill_id(output))
    dagster_home = tmp_path / "dagster_materialize_home"
    dagster_runs = by_dagster(dagster_home, home_template, MODULE, select, DAYS, monkeypatch)

    assert dagster_runs == [True] * len(DAYS)
    assert code == 0, output
    assert on_engine == holdings(dagster_home, MODULE)
    assert on_engine.materialized["arrivals"] == {"2024-01-01", "2024-01-03"}
    assert f"{skipped} skipped" in output.splitlines()[-1], output
    assert re.search(r"\] arrivals \d/4 2024-01-02 \S+ skipped: no output", output), output
    assert status_code == 0, status
    assert "skipped: arrivals 2024-01-02, 2024-01-04" in status.splitlines(), status
    if select == "*":
        assert "skipped: arrivals_doubled 2024-01-02, 2024-01-04" in status.splitlines(), status


@pytest.mark.filterwarnings("ignore:Function `asset_materialize_command` is superseded")
def test_the_ledger_says_skipped_for_a_staged_tables_partitions_that_yielded_nothing(
    spark_resource, lake, home, home_template, tmp_path, monkeypatch
):
    monkeypatch.setenv(DELTA_LAKE_ENV, str(lake))
    code, output = on_the_engine(DELTA_MODULE, "*", DAYS[0], DAYS[-1])
    on_engine = holdings(home, DELTA_MODULE)
    ledger_code, ledger = engine_command("backfill", "ledger", backfill_id(output), "--json")
    dagster_home = tmp_path / "dagster_materialize_home"
    dagster_runs = by_dagster(dagster_home, home_template, DELTA_MODULE, "*", DAYS, monkeypatch)

    assert dagster_runs == [True] * len(DAYS)
    assert code == 0, output
    assert on_engine == holdings(dagster_home, DELTA_MODULE)
    assert on_engine.materialized == {
        "deliveries": {"2024-01-01", "2024-01-03"},
        "delivery_summary": {"2024-01-01", "2024-01-03"},
    }
    assert ledger_code == 0, ledger
    statuses = {(row["asset"], row["partition"]): (row["status"], row["rows"]) for row in json.loads(ledger)}
    assert statuses == {
        (asset, day): ("published", 1) if day in ("2024-01-01", "2024-01-03") else ("skipped", None)
        for asset in ("deliveries", "delivery_summary")
        for day in DAYS
    }
