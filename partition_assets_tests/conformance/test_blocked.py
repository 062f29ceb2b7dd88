"""A partition blocked behind a failure, as Dagster leaves it (issue 51): its parent failed
(`failing_day`: the day's feed raises), or a blocking asset check on its parent failed
(`blocked_arrivals`), so the engine never runs it. `dagster asset materialize` of that day
plans every step of the run, then the run fails: Dagster's partition status (the UI's,
`get_status_by_partition`) reads the steps it never ran as failed, not missing. After the
engine's backfill (staged or `--publish per-node`) each asset's partitions read as after
Dagster's runs, nothing more is recorded materialized, and `backfill status` shows those
nodes blocked, as its last line counts them. A retry that succeeds reads them materialized.
A staged backfill of Delta tables that published nothing records nothing materialized; its
failed day (whose staged run planned nothing) and the day blocked behind it read failed."""

import pytest

from partition_assets_tests.conformance.compare import (
    by_dagster,
    engine_command,
    holdings,
    on_the_engine,
    partition_statuses,
)
from partition_assets_tests.support.cli_runs import backfill_id
from partition_assets_tests.support.locations.user_projects.blocked_arrivals import BLOCKED_DAY, COUNTER_FIXED_ENV
from partition_assets_tests.support.locations.user_projects.failing_day import FAILING_DAY

DAYS = ["2024-01-02", "2024-01-03", "2024-01-04"]
BLOCKED_ARRIVALS = "partition_assets_tests.support.locations.user_projects.blocked_arrivals"
FAILING_READINGS = "partition_assets_tests.support.locations.user_projects.failing_day"
FAILING_DELIVERIES = "partition_assets_tests.support.locations.user_projects.failing_deliveries"
# FAILING_DELIVERIES's lake, the day its feed fails and the switch that fixes it, named here:
# importing it reads its lake, which the engine's runs do, not this module.
DELTA_LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"
FAILING_DELIVERY_DAY = "2024-01-03"
FEED_FIXED_ENV = "DELIVERIES_FEED_FIXED"


def _all_materialized_but(bad_day: str, status: str) -> dict[str, str]:
    """DAYS read materialized, but `bad_day`, which reads `status`."""
    return {day: status if day == bad_day else "materialized" for day in DAYS}


@pytest.mark.filterwarnings("ignore:Function `asset_materialize_command` is superseded")
@pytest.mark.parametrize(
    ("module", "bad_day", "publish", "failed", "blocked"),
    [
        (BLOCKED_ARRIVALS, BLOCKED_DAY, "staged", set(), {"arrivals_doubled", "arrivals_report"}),
        (FAILING_READINGS, FAILING_DAY, "per-node", {"readings"}, {"reading_total"}),
    ],
    ids=["a blocking check failed, staged", "its parent failed, per node"],
)
def test_a_partition_blocked_behind_a_failure_reads_failed_as_after_dagsters_run(
    module, bad_day, publish, failed, blocked, home, home_template, tmp_path, monkeypatch
):
    code, output = on_the_engine(module, "*", DAYS[0], DAYS[-1], "--publish", publish)
    on_engine = partition_statuses(home, module, DAYS)
    materialized_on_engine = holdings(home, module).materialized
    status_code, status = engine_command("backfill", "status", backfill_id(output))
    dagster_home = tmp_path / "dagster_materialize_home"
    dagster_runs = by_dagster(dagster_home, home_template, module, "*", DAYS, monkeypatch)

    assert dagster_runs == [day != bad_day for day in DAYS]
    assert code == 1, output
    assert on_engine == partition_statuses(dagster_home, module, DAYS)
    assert materialized_on_engine == holdings(dagster_home, module).materialized
    assert {
        asset for asset, days in on_engine.items() if days == _all_materialized_but(bad_day, "failed")
    } == failed | blocked
    assert f"{len(blocked)} blocked" in output.splitlines()[-1], output
    assert status_code == 0, status
    for asset in blocked:
        assert f"blocked: {asset} {bad_day}" in status.splitlines(), status
        assert any(line.startswith(asset) and line.endswith("1 blocked, 2 succeeded") for line in status.splitlines())


def test_a_retry_that_succeeds_leaves_the_blocked_partitions_materialized(home, monkeypatch):
    code, output = on_the_engine(BLOCKED_ARRIVALS, "*", DAYS[0], DAYS[-1])
    # Read (and cached, as the UI caches it) before the retry: the retry's materializations update it.
    before = partition_statuses(home, BLOCKED_ARRIVALS, DAYS)
    monkeypatch.setenv(COUNTER_FIXED_ENV, "1")  # the day's counter is fixed: its check passes
    retry_code, retried = engine_command("backfill", "retry", backfill_id(output))
    after = partition_statuses(home, BLOCKED_ARRIVALS, DAYS)
    status_code, status = engine_command("backfill", "status", backfill_id(output))

    assert code == 1, output
    assert before["arrivals_doubled"] == before["arrivals_report"] == _all_materialized_but(BLOCKED_DAY, "failed")
    assert retry_code == 0, retried
    assert after == {asset: _all_materialized_but(BLOCKED_DAY, "materialized") for asset in before}
    assert status_code == 0, status
    assert not [line for line in status.splitlines() if line.startswith(("blocked:", "failed:"))], status


def test_a_staged_delta_backfill_reads_its_failed_and_blocked_days_failed_and_nothing_materialized_until_published(
    spark_resource, lake, home, monkeypatch
):
    monkeypatch.setenv(DELTA_LAKE_ENV, str(lake))
    code, output = on_the_engine(FAILING_DELIVERIES, "*", DAYS[0], DAYS[-1])
    before = partition_statuses(home, FAILING_DELIVERIES, DAYS)
    monkeypatch.setenv(FEED_FIXED_ENV, "1")  # the day's feed is fixed: the retry succeeds and publishes
    retry_code, retried = engine_command("backfill", "retry", backfill_id(output))
    after = partition_statuses(home, FAILING_DELIVERIES, DAYS)

    assert code == 1, output
    # Nothing published: the days that ran read missing (their runs staged them), the failed
    # day and the day blocked behind it failed, as Dagster's failed run leaves them.
    failed_day_only = {day: "failed" if day == FAILING_DELIVERY_DAY else "missing" for day in DAYS}
    assert before == {"deliveries": failed_day_only, "delivery_summary": failed_day_only}
    assert retry_code == 0, retried
    assert after == {asset: _all_materialized_but(FAILING_DELIVERY_DAY, "materialized") for asset in before}
