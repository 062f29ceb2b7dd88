"""Plain IO managers never leave the instance wrong (issue 51 point 3): Dagster's default IO
manager writes each output as its node runs, which a staged backfill cannot hold back. Its
node runs then record their materializations (and check results) as Dagster's runs do, so
that the instance says what the storage holds whatever the backfill's outcome: one day
failing, the backfill canceled mid-way, or rolled back after it published (which restores
Delta tables, not a plain IO manager's files)."""

import subprocess

import dagster as dg
import pytest

from partition_assets_tests.conformance.compare import by_dagster, engine_command, holdings, on_the_engine, side_by_side
from partition_assets_tests.support.cli_runs import backfill_cli, backfill_id, runs_by_node, start_cli
from partition_assets_tests.support.locations.user_projects.failing_day import FAILING_DAY
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.records import recorded_ids

MODULE = "partition_assets_tests.support.locations.user_projects.failing_day"
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]
GOOD_DAYS = [day for day in DAYS if day != FAILING_DAY]


@pytest.mark.filterwarnings("ignore:Function `asset_materialize_command` is superseded")
def test_a_failed_sibling_leaves_what_the_others_wrote_recorded_as_dagster_does(
    home, home_template, tmp_path, monkeypatch
):
    both = side_by_side(MODULE, "*", DAYS, home, home_template, tmp_path, monkeypatch)
    on_engine = both.on_engine

    assert both.dagster_runs == [day != FAILING_DAY for day in DAYS]
    assert both.code == 1, both.output
    assert on_engine == both.by_dagster
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


@pytest.mark.slow
def test_a_canceled_backfill_leaves_the_instance_saying_what_the_storage_holds(home):
    # 2 x 179 nodes after the failing day, one run at a time: still running when the cancel lands.
    days = ["--start", "2024-01-04", "--end", "2024-06-30", "--max-parallel", "1"]
    coordinator = start_cli("backfill", "run", "-m", MODULE, "--select", "*", *days, stdout=subprocess.PIPE)
    wait_for(lambda: any(dg.DagsterRunStatus.SUCCESS in s for s in runs_by_node(home).values()), 300, step=0.2)
    (canceled_id,) = recorded_ids(home)
    canceled = backfill_cli(home, "cancel", canceled_id)
    assert canceled.returncode == 0, canceled.stderr
    output, _ = coordinator.communicate(timeout=120)
    assert coordinator.returncode == 1 and output.splitlines()[-1].endswith("(canceled)"), output
    on_engine = holdings(home, MODULE)

    stored = {
        asset: {path.split("/")[1] for path in on_engine.outputs if path.startswith(f"{asset}/")}
        for asset in ("readings", "reading_total")
    }
    assert 0 < len(stored["readings"]) < 179, output  # canceled mid-way
    assert {asset: on_engine.materialized.get(asset, set()) for asset in stored} == stored
    assert "(canceled)" in backfill_cli(home, "status", canceled_id).stdout
