"""Plain IO managers never leave the instance wrong (issue 51 point 3): Dagster's default IO
manager writes each output as its node runs, which a staged backfill cannot hold back. Its
node runs then record their materializations (and check results) as Dagster's runs do, so
that the instance says what the storage holds whatever the backfill's outcome: one day
failing, or the backfill rolled back after it published (which restores Delta tables, not a
plain IO manager's files)."""

import dagster as dg
import pytest

from partition_assets_tests.conformance.compare import by_dagster, engine_command, holdings, on_the_engine
from partition_assets_tests.support.cli_runs import backfill_id
from partition_assets_tests.support.user_projects.failing_day import FAILING_DAY

MODULE = "partition_assets_tests.support.user_projects.failing_day"
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]
GOOD_DAYS = [day for day in DAYS if day != FAILING_DAY]


@pytest.mark.filterwarnings("ignore:Function `asset_materialize_command` is superseded")
def test_a_failed_sibling_leaves_what_the_others_wrote_recorded_as_dagster_does(
    home, home_template, tmp_path, monkeypatch
):
    code, output = on_the_engine(MODULE, "*", DAYS[0], DAYS[-1])
    on_engine = holdings(home, MODULE)
    dagster_home = tmp_path / "dagster_materialize_home"
    dagster_runs = by_dagster(dagster_home, home_template, MODULE, "*", DAYS, monkeypatch)

    assert dagster_runs == [day != FAILING_DAY for day in DAYS]
    assert code == 1, output
    assert on_engine == holdings(dagster_home, MODULE)
    assert on_engine.materialized == {"readings": set(GOOD_DAYS), "reading_total": set(GOOD_DAYS)}
    assert len(on_engine.outputs) == 2 * len(GOOD_DAYS)


@pytest.mark.filterwarnings("ignore:Function `asset_materialize_command` is superseded")
def test_a_rolled_back_backfill_leaves_the_instance_saying_what_the_storage_holds(
    home, home_template, tmp_path, monkeypatch
):
    code, output = on_the_engine(MODULE, "*", GOOD_DAYS[0], GOOD_DAYS[1])
    assert code == 0, output
    rollback_code, rollback = engine_command("backfill", "rollback", backfill_id(output))
    on_engine = holdings(home, MODULE)
    dagster_home = tmp_path / "dagster_materialize_home"
    assert by_dagster(dagster_home, home_template, MODULE, "*", GOOD_DAYS[:2], monkeypatch) == [True, True]

    assert rollback_code == 0, rollback
    assert on_engine == holdings(dagster_home, MODULE)
    assert on_engine.materialized == {"readings": set(GOOD_DAYS[:2]), "reading_total": set(GOOD_DAYS[:2])}
    # The storage holds what the backfill wrote (no rollback restores a plain IO manager's
    # files): no materialization may claim that old content came back.
    with dg.DagsterInstance.from_config(str(home)) as instance:
        latest = [
            instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[day]), limit=1
            ).records[0]
            for asset in on_engine.materialized
            for day in GOOD_DAYS[:2]
        ]
    assert not [record for record in latest if "rolled_back_backfill_id" in record.asset_materialization.metadata]
