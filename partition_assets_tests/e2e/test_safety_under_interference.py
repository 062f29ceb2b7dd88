"""A staged backfill disturbed as an audit disturbed it, on real Spark, Delta tables and a
Dagster instance: a commit outside the backfill while it runs or publishes, commands that
race its live coordinator, a coordinator killed or paused past its lease, a Launchpad
coordinator run re-executed. Each test reproduces one hole the audit found (issue 21)."""

import json
import os
import signal

import dagster as dg
import pytest

from partition_assets.backfill.publishing.freeze import frozen_assets
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets.storage.failpoints import ENV as FAILPOINT_ENV
from partition_assets.storage.leases import TTL_ENV, leases
from partition_assets_tests.support.cli_runs import backfill_id, ok
from partition_assets_tests.support.lakehouse import (
    TABLES,
    Lakehouse,
    days,
    expected_orders,
    foreign_update,
    run_coordinator_job,
)
from partition_assets_tests.support.locations import safe_defs
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.readers import delta_row_set
from partition_assets_tests.support.records import recorded_backfill

pytestmark = pytest.mark.slow

SLOW = {safe_defs.FACTOR_ENV: "1.25", safe_defs.SLOW_ENV: "2"}


def status_of(lakehouse: Lakehouse, bid: str) -> str:
    return recorded_backfill(lakehouse.home, bid).status


def test_a_foreign_commit_to_the_last_table_while_it_runs_publishes_no_table(published_2_days):
    """Hole 1 as reproduced: a delta-rs update of the third table while the backfill ran left the
    first two published and the third not, its message saying "nothing was published"."""
    lakehouse = published_2_days
    versions = lakehouse.versions()
    process = lakehouse.start_backfill("2024-01-01", "2024-01-02", **SLOW)
    lakehouse.wait_until_a_node_runs()
    foreign_update(lakehouse, "revenue_report", "2024-01-02")
    stdout, stderr = process.communicate(timeout=300)

    assert process.returncode == 1, stdout + stderr
    assert "nothing was published" in stdout and "revenue_report" in stdout, stdout
    assert lakehouse.versions() == {**versions, "revenue_report": versions["revenue_report"] + 1}
    assert lakehouse.content("orders") == expected_orders(days(1, 2), 1)  # old, like every table
    bid = backfill_id(stdout)
    assert status_of(lakehouse, bid) == "publish_refused"
    # The leases stay (parked) until a way on is chosen: discard is one, and is accepted.
    assert {lease.holder for lease in leases(lakehouse.uri("orders"))} == {bid}
    ok(lakehouse.cli("discard", bid))
    assert leases(lakehouse.uri("orders")) == []
    assert lakehouse.versions() == {**versions, "revenue_report": versions["revenue_report"] + 1}


def test_a_publish_stopped_part_way_by_a_foreign_commit_says_so_and_rolls_back(published_2_days):
    """Hole 1, its way out: a foreign commit that lands after the first table is published
    (here while the coordinator is dead between two table commits) stops the publish with a
    message naming what was and was not published; `rollback` restores the published table."""
    lakehouse = published_2_days
    before, versions = lakehouse.contents(), lakehouse.versions()
    failpoint = {FAILPOINT_ENV: "between_table_commits", safe_defs.FACTOR_ENV: "1.25"}
    killed = lakehouse.backfill("2024-01-01", "2024-01-02", **failpoint)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    bid = lakehouse.newest_backfill()
    foreign_update(lakehouse, "revenue_report", "2024-01-01")
    with_foreign = lakehouse.content("revenue_report")

    stopped = lakehouse.cli("resume", bid)
    assert stopped.returncode == 1, stopped.stdout + stopped.stderr
    assert f"published orders v{versions['orders'] + 1}" in stopped.stdout, stopped.stdout
    assert "not published: revenue, revenue_report" in stopped.stdout, stopped.stdout
    assert f"backfill rollback {bid}" in stopped.stdout and "nothing was published." not in stopped.stdout
    assert status_of(lakehouse, bid) == "publishing"

    refused = lakehouse.cli("discard", bid)  # the published table is part of the tables now
    assert refused.returncode == 2 and f"backfill rollback {bid}" in refused.stderr, refused.stderr
    ok(lakehouse.cli("rollback", bid))
    assert lakehouse.contents() == {**before, "revenue_report": with_foreign}
    assert status_of(lakehouse, bid) == "rolled_back"
    assert leases(lakehouse.uri("revenue")) == []
    assert not (lakehouse.lake / "revenue" / "_backfills" / bid).exists()  # the rest of its staging is gone


def test_commands_that_would_race_a_live_coordinator_are_refused_and_it_publishes(published_2_days):
    """Hole 2 (discard accepted while the backfill ran; its downstream then published without
    its input) and hole 3's resume re-entering the live coordinator's lease."""
    lakehouse = published_2_days
    slower = {safe_defs.FACTOR_ENV: "1.25", safe_defs.SLOW_ENV: "3"}
    process = lakehouse.start_backfill("2024-01-01", "2024-01-02", "--max-parallel", "1", **slower)
    lakehouse.wait_until_a_node_runs()
    bid = lakehouse.newest_backfill()
    commands = {action: lakehouse.start(action, bid) for action in ("discard", "resume", "publish", "rollback")}
    for action, command in commands.items():
        stdout, stderr = command.communicate(timeout=300)
        assert command.returncode == 2, f"{action}: {stdout + stderr}"
        assert "live coordinator" in stderr and f"backfill cancel {bid}" in stderr, stderr
    assert process.poll() is None, "the backfill ended before the commands were refused: make its nodes slower"
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stdout + stderr
    assert status_of(lakehouse, bid) == "published"
    assert lakehouse.content("orders") == expected_orders(days(1, 2), 1.25)
    assert lakehouse.versions() == {table: 2 for table in TABLES}


def test_a_killed_coordinators_freeze_is_ignored_and_cancel_lifts_it(published_2_days):
    """Hole 3: `cancel` (and a dead coordinator) never lifted the freeze, so sensors skipped its
    assets for good; `resume` is accepted once the coordinator is dead."""
    lakehouse = published_2_days
    process = lakehouse.start_backfill("2024-01-01", "2024-01-02", **SLOW)
    with lakehouse.instance() as instance:
        wait_for(lambda: frozen_assets(instance), 120)
        bid = lakehouse.newest_backfill()
        os.kill(process.pid, signal.SIGKILL)  # the coordinator alone: no finally, no unfreeze
        process.wait(timeout=60)
        assert frozen_assets(instance) == {}  # its process is gone: nothing freezes
        ok(lakehouse.cli("cancel", bid))
        frozen_index = instance.run_storage.get_cursor_values({f"partition_assets/frozen/{bid}"})
        assert json.loads(frozen_index[f"partition_assets/frozen/{bid}"]) == []  # lifted, not only ignored
    ok(lakehouse.cli("resume", bid, **{safe_defs.FACTOR_ENV: "1.25"}))
    assert lakehouse.content("orders") == expected_orders(days(1, 2), 1.25)


def test_a_coordinator_paused_past_its_lease_fails_before_the_gate(published_2_days, monkeypatch):
    """Hole 7: a lapsed lease was only logged (Heartbeat.lost was never read) and the
    backfill went on to publish."""
    monkeypatch.setenv(TTL_ENV, "4")
    lakehouse = published_2_days
    versions = lakehouse.versions()
    process = lakehouse.start_backfill("2024-01-01", "2024-01-02", **SLOW, **{TTL_ENV: "4"})
    lakehouse.wait_until_a_node_runs()
    bid = lakehouse.newest_backfill()
    os.kill(process.pid, signal.SIGSTOP)
    try:
        wait_for(lambda: bid not in {lease.holder for lease in leases(lakehouse.uri("orders"))}, 60)
    finally:
        os.kill(process.pid, signal.SIGCONT)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 1, stdout + stderr
    assert "lapsed" in stdout and "nothing was published" in stdout, stdout
    assert lakehouse.versions() == versions
    assert status_of(lakehouse, bid) == "failed"


def test_a_coordinator_run_that_crashes_leaves_its_backfill_failed_with_its_partitions_leased(published_2_days):
    """A Launchpad coordinator run hit by an unexpected error (a bug, a lost connection) ended
    its backfill `canceled` (the op took every error but its own for a termination from the
    UI): the backfill failed, and says so, its partitions parked for `retry` or `discard`."""
    lakehouse = published_2_days
    crashed = run_coordinator_job(lakehouse, **{safe_defs.FACTOR_ENV: "1.25", FAILPOINT_ENV: "gating:raise"})
    run_id = crashed.stdout.strip().splitlines()[-1]
    with lakehouse.instance() as instance:
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE
    assert status_of(lakehouse, "launchpad0run") == "failed"
    held = [lease for table in TABLES for lease in leases(lakehouse.uri(table))]
    assert held and all(lease.parked for lease in held)


def test_re_executing_a_coordinator_run_resumes_its_backfill_and_keeps_its_fingerprints(published_2_days):
    """Hole 8: a re-executed coordinator run built a fresh record, dropping the fingerprints,
    so a commit made outside the backfill in between was overwritten silently."""
    lakehouse = published_2_days
    first = run_coordinator_job(lakehouse, **{safe_defs.FACTOR_ENV: "not-a-number"})  # its nodes fail
    run_id = first.stdout.strip().splitlines()[-1]
    with lakehouse.instance() as instance:
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE
    record = recorded_backfill(lakehouse.home, "launchpad0run")
    assert record.status == "failed" and record.fingerprints["orders"]

    foreign_update(lakehouse, "orders", "2024-01-02")
    foreign = delta_row_set(lakehouse.uri("orders"))
    again = run_coordinator_job(lakehouse, run_id, **{safe_defs.FACTOR_ENV: "1.25"})
    rerun_id = again.stdout.strip().splitlines()[-1]
    with lakehouse.instance() as instance:
        rerun = instance.get_run_by_id(rerun_id)
        assert rerun.tags[BACKFILL_ID_TAG] == "launchpad0run"
        assert rerun.status == dg.DagsterRunStatus.FAILURE
        failure = next(
            record.dagster_event.step_failure_data.error.message
            for record in instance.all_logs(rerun_id, of_type=dg.DagsterEventType.STEP_FAILURE)
        )
    assert "changed since backfill launchpad0run started" in failure, failure
    assert delta_row_set(lakehouse.uri("orders")) == foreign  # the foreign commit stands
