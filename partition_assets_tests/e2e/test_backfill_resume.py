"""Staged backfills that stop part way, end to end through `partition-assets backfill` on
real Spark, Delta tables and a Dagster instance: a coordinator or a rollback killed with
SIGKILL anywhere converges on resume with each table committed once; an unexpected error in
the gate and a Spark server that dies fail the backfill with its partitions still leased.
(The other staged-backfill tests: test_backfill_publish.py.)"""

import json
import os
import signal
import subprocess
from collections.abc import Iterator

import pytest

from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.publishing.partition_stats import partition_stats
from partition_assets.spark import LocalConnectServer
from partition_assets.spark.resource import spark_conf_from_env
from partition_assets.spark.unreachable import UNREACHABLE_ENV
from partition_assets.storage import DeltaFormat
from partition_assets.storage.failpoints import ENV as FAILPOINT_ENV
from partition_assets.storage.leases import held_by
from partition_assets_tests.support.cli_runs import backfill_id, ok
from partition_assets_tests.support.lakehouse import TABLES, Lakehouse, days, expected_orders
from partition_assets_tests.support.locations import safe_defs
from partition_assets_tests.support.records import recorded_backfill
from partition_assets_tests.support.results import failure_message

pytestmark = pytest.mark.slow


KILL_POINTS = ["mid-node", "gating", "publish_committing", "between_table_commits"]


@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_coordinator_killed_anywhere_converges_on_resume_with_each_table_committed_once(published_2_days, point):
    versions = published_2_days.versions()
    if point == "mid-node":
        process = published_2_days.start_backfill(
            "2024-01-01", "2024-01-02", **{safe_defs.FACTOR_ENV: "1.25", safe_defs.SLOW_ENV: "3"}
        )
        published_2_days.wait_until_a_node_runs()
        os.killpg(process.pid, signal.SIGKILL)
    else:
        process = published_2_days.start_backfill(
            "2024-01-01", "2024-01-02", **{safe_defs.FACTOR_ENV: "1.25", FAILPOINT_ENV: point}
        )
    process.wait(timeout=300)
    assert process.returncode == -signal.SIGKILL, process.stderr.read() if process.stderr else ""
    bid = published_2_days.newest_backfill()

    ok(published_2_days.cli("resume", bid, **{safe_defs.FACTOR_ENV: "1.25"}))
    assert published_2_days.content("orders") == expected_orders(days(1, 2), 1.25)
    assert published_2_days.versions() == {table: version + 1 for table, version in versions.items()}
    _assert_ledger_matches_tables(published_2_days, bid)


def test_a_rollback_killed_between_table_commits_converges_on_resume(published_2_days):
    before = published_2_days.contents()
    bid = backfill_id(ok(published_2_days.backfill("2024-01-01", "2024-01-02", **{safe_defs.FACTOR_ENV: "1.25"})))
    versions = published_2_days.versions()
    killed = published_2_days.cli("rollback", bid, **{FAILPOINT_ENV: "between_rollback_commits"})
    assert killed.returncode == -signal.SIGKILL
    ok(published_2_days.cli("resume", bid))
    assert published_2_days.contents() == before
    assert published_2_days.versions() == {table: version + 1 for table, version in versions.items()}


def _assert_ledger_matches_tables(lakehouse: Lakehouse, bid: str) -> None:
    """The ledger's checksums are those of the tables' content now, computed again by Spark."""
    from partition_assets.spark import SparkResource

    spark = SparkResource.from_env().spark_session
    ledger = json.loads(ok(lakehouse.cli("ledger", bid, "--json")))
    for table in TABLES:
        frame = DeltaFormat().read(spark, lakehouse.uri(table), None)
        stats = partition_stats(frame, ("ds",))
        for row in ledger:
            if row["asset"] == table:
                assert row["checksum"] == stats[(row["partition"],)].checksum
                assert row["status"] == "published"


def test_an_unexpected_error_in_the_gate_fails_the_backfill_with_its_partitions_still_leased(published_2_days, spark):
    """Issue 39, hole 8: an error the gate did not expect left the backfill `running` with no
    coordinator, its leases neither parked nor released (dead a TTL later), so a production
    write then took its partitions."""
    house = published_2_days
    before = house.contents()
    result = house.backfill("2024-01-01", "2024-01-02", **{safe_defs.FACTOR_ENV: "1.25", FAILPOINT_ENV: "gating:raise"})
    assert result.returncode == 1 and "InjectedFailure: failpoint gating" in result.stderr, (
        result.stdout + result.stderr
    )
    bid = backfill_id(result.stdout)
    assert recorded_backfill(house.home, bid).status == BackfillStatus.FAILED
    assert all(lease.parked for table in TABLES for lease in held_by(house.uri(table), bid))
    assert all(held_by(house.uri(table), bid) for table in TABLES)
    refused = house.production_write("2024-01-02")
    assert not refused.success and f"backfill discard {bid}" in failure_message(refused), failure_message(refused)
    assert house.contents() == before
    assert house.events()[-2:] == ["started", "failed"]


# How long a Spark call of the backfill below retries its dead server: a few seconds, not Spark's ten minutes.
UNREACHABLE_SECONDS = "3"
# Within this, from the server's death, the backfill's command has ended (it hung for more than 300 s).
SPARK_DEATH_BOUND_SECONDS = 120


@pytest.fixture
def own_spark_server(tmp_path) -> Iterator[LocalConnectServer]:
    """A Spark Connect server for this test alone, which it kills (the session's is shared): on
    the port just above the session server's, with the session's JVM options."""
    port = int(os.environ["PARTITION_ASSETS_SPARK_CONNECT_PORT"]) + 1
    server = LocalConnectServer(port=port, driver_memory="1g", conf=spark_conf_from_env(), state_dir=tmp_path / "spark")
    server.ensure_running()
    yield server
    server.stop()


def test_a_backfill_whose_spark_server_dies_fails_in_bounded_time_with_its_partitions_leased(
    published_2_days, own_spark_server
):
    """Issue 39, hole 7: the Spark server killed while node runs were in flight, the
    coordinator's command was still running 300 s later (Spark Connect retries an unreachable
    server for more than ten minutes per call)."""
    house = published_2_days
    before = house.contents()
    server = own_spark_server
    process = house.start_backfill(
        "2024-01-01",
        "2024-01-02",
        **{
            safe_defs.FACTOR_ENV: "1.25",
            safe_defs.SLOW_ENV: "3",  # the node runs are in flight when the server dies
            "PARTITION_ASSETS_SPARK_REMOTE": server.url,
            UNREACHABLE_ENV: UNREACHABLE_SECONDS,
        },
    )
    house.wait_until_a_node_runs()
    os.killpg(server.recorded_server().pid, signal.SIGKILL)
    try:
        stdout, stderr = process.communicate(timeout=SPARK_DEATH_BOUND_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"the backfill was still running {SPARK_DEATH_BOUND_SECONDS} s after its Spark server died")
    assert process.returncode == 1, stdout + stderr
    assert f"the Spark server at {server.url} is gone" in stdout, stdout + stderr
    # Each failed node's line says it too, not Spark's gRPC error or `[NO_ACTIVE_SESSION]`.
    assert f"SparkServerGoneError: the Spark Connect server at {server.url} is gone" in stdout, stdout + stderr
    bid = backfill_id(stdout)
    assert recorded_backfill(house.home, bid).status == BackfillStatus.FAILED
    assert all(lease.parked for table in TABLES for lease in held_by(house.uri(table), bid))
    assert all(held_by(house.uri(table), bid) for table in TABLES)
    assert house.contents() == before
