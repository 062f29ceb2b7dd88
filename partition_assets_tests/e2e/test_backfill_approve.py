"""The gate as Dagster asset checks and approval before publish, end to end through
`partition-assets backfill` on real Spark, Delta tables and a Dagster instance: each gate's
`backfill_gate` evaluation read back from the instance, passed and failed; a backfill that
requires approval waits for it (leases parked, assets frozen; a coordinator run then refused
changes none of that), publishes once approved (the ledger names who approved, and when), or
is refused by a commit made outside it; it publishes exactly what its gate saw whatever runs
tagged with it try meanwhile (issue 39 hole 3); it needs --force after a failed gate, and
leaves by discard or expiry with the tables untouched (a forced approval after a failed gate
expires too); of two approvals at once exactly one publishes and the record keeps what it
published; and a deployment's approval policy: no option skips it, the launcher is recorded
and may not approve, nor may a name off its list. A publish refused by a foreign commit keeps
the partitions leased (parked), and a node run deleted and re-created under its id and tags
writes nothing (issue 50 holes 6 and 5)."""

import os
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event

import dagster as dg
import pytest
import yaml

from partition_assets.backfill.commands import approve_record
from partition_assets.backfill.dagster_ui.gate_asset_checks import GATE_CHECK
from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.publishing.freeze import frozen_assets
from partition_assets.backfill.state.ledger import Ledger, LedgerStatus, ledger_uri
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.errors import PartitionAssetsError
from partition_assets.run_tags import BACKFILL_ID_TAG, LEASE_PROOF_TAG, STAGED_TAG
from partition_assets.storage import SparkDeltaIOManager
from partition_assets.storage.leases import TTL_ENV, held_by
from partition_assets_tests.support.cli_runs import backfill_id, ok
from partition_assets_tests.support.instances import add_to_config
from partition_assets_tests.support.lakehouse import (
    TABLES,
    Lakehouse,
    days,
    expected_orders,
    foreign_update,
    run_coordinator_job,
)
from partition_assets_tests.support.locations import safe_defs
from partition_assets_tests.support.racing import racing_context, racing_process
from partition_assets_tests.support.records import recorded_backfill, recorded_ids
from partition_assets_tests.support.results import failure_message

pytestmark = pytest.mark.slow

REQUIRED = ("--approval", "required")
FACTOR = safe_defs.FACTOR_ENV


def latest_gate_evaluation(instance: dg.DagsterInstance, asset: str):
    """The newest `backfill_gate` evaluation of `asset`: its record and its evaluation."""
    key = dg.AssetCheckKey(dg.AssetKey(asset), GATE_CHECK)
    (record,) = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)
    return record, record.event.dagster_event.event_specific_data


def expire_approval(house: Lakehouse, backfill_id: str, after: timedelta) -> None:
    """Sets the approval of `backfill_id` to expire `after` from now (a test's shortcut through time)."""
    with house.instance() as instance:
        record = BackfillStore(instance).load(backfill_id)
        record.approval = replace(record.approval, expires_at=datetime.now(UTC) + after)
        record.save()


def refused(result, *texts: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    for text in texts:
        assert text in result.stderr, result.stderr


def test_a_failed_gate_is_a_failed_check_and_publishes_only_on_an_approval_with_force(published_2_days):
    house = published_2_days
    before = house.contents()
    gated_at = datetime.now(UTC)
    result = house.backfill("2024-01-01", "2024-01-02", *REQUIRED, "--approval-expires", "1h", **{FACTOR: "3"})
    assert result.returncode == 1 and "validation gate failed" in result.stdout, result.stdout + result.stderr
    bid = backfill_id(result.stdout)
    expires_at = recorded_backfill(house.home, bid).approval.expires_at
    assert gated_at + timedelta(hours=1) <= expires_at <= datetime.now(UTC) + timedelta(hours=1)  # from the gate

    with house.instance() as instance:
        record, evaluation = latest_gate_evaluation(instance, "revenue")
        assert not evaluation.passed and record.status.value == "FAILED"
        assert instance.get_run_by_id(record.run_id).tags[BACKFILL_ID_TAG] == bid  # among the backfill's runs
        metadata = {name: value.value for name, value in evaluation.metadata.items()}
        assert metadata["backfill_id"] == bid and metadata["checks_failed"] == 2
        assert metadata["budgets"]["measures"] == {"revenue": {"absolute": None, "relative": 0.5}}
        assert {rule["rule"] for rule in metadata["failed_rules"]} == {"sum(revenue)"}
        day = metadata["partitions"]["2024-01-02"]
        assert (day["old_rows"], day["new_rows"], day["old_sums"], day["new_sums"]) == (
            1,
            1,
            {"revenue": 21.0},
            {"revenue": 63.0},
        )
        assert day["old_checksum"] != day["new_checksum"]
        assert "| revenue | 2024-01-02 | 1 -> 1 | changed | revenue: 21 -> 63 |" in metadata["diff"]
        _, orders = latest_gate_evaluation(instance, "orders")
        assert orders.passed  # rows and keys unchanged: each table's gate is its own check

    refused(house.cli("publish", bid, "--force"), "requires approval", f"backfill approve {bid} --by NAME --force")
    refused(house.cli("approve", bid, "--by", "ana"), "failed its gate", "--force", "Nothing was written")
    expire_approval(house, bid, timedelta(seconds=-1))  # an hour later, as the record sees it
    refused(house.cli("approve", bid, "--by", "ana", "--force"), "approval expired", "Nothing was written")
    record = recorded_backfill(house.home, bid)
    assert record.status == BackfillStatus.GATE_FAILED and record.approval.approved_by is None
    assert house.contents() == before
    expire_approval(house, bid, timedelta(hours=1))
    ok(house.cli("approve", bid, "--by", "ana", "--force"))
    assert house.content("orders") == expected_orders(days(1, 2), 3)
    assert recorded_backfill(house.home, bid).approval.approved_by == "ana"


def production_run(house, spark_resource, tags: dict[str, str]) -> dg.ExecuteInProcessResult:
    """A run of `orders` for 2024-01-02 in the lakehouse's instance, tagged `tags`, as the audit
    made them from the Launchpad (or as Dagster re-executes a run: its tags copied)."""
    io_manager = SparkDeltaIOManager(root_uri=str(house.lake), spark=spark_resource)
    with house.instance() as instance:
        return dg.materialize(
            [safe_defs.orders],
            instance=instance,
            partition_key="2024-01-02",
            tags=tags,
            resources={"spark": spark_resource, "io_manager": io_manager},
            raise_on_error=False,
        )


def step_failure_of(result: dg.ExecuteInProcessResult) -> str:
    """The message of the error that failed the run's step (Dagster wraps it as the cause)."""
    error = next(event.step_failure_data.error for event in result.all_events if event.is_step_failure)
    return error.cause.message if error.cause else error.message


def test_a_backfill_awaiting_approval_publishes_what_its_gate_saw_once_approved_by_one_of_two_approvers(
    published_2_days, spark_resource, monkeypatch
):
    """A backfill that requires approval waits for it, its leases parked and assets frozen, and
    publishes once approved. Meanwhile (issue 39 hole 3, as the audit reproduced it) a run with a
    node run's tags copied (the backfill's id, staged=true), made after the gate, wrote into the
    staging and `approve` published values the gate never saw; a run with only the id tag wrote
    straight into the partitions it leases. Both are now refused, naming why, the old data kept;
    a staging changed after the gate (by hand) fails the approval, naming the table, with nothing
    written; and the approval publishes what the gate saw. Of two approvals at once (issue 39
    hole 4: the second saved a stale record over the first's publish), exactly one publishes,
    the other is refused, and the record keeps the published versions."""
    house = published_2_days
    before, versions = house.contents(), house.versions()
    output = ok(house.backfill("2024-01-01", "2024-01-02", *REQUIRED, **{safe_defs.FACTOR_ENV: "1.2"}))
    bid = backfill_id(output)
    assert "awaiting approval" in output and house.contents() == before
    with house.instance() as instance:
        assert BackfillStore(instance).status(bid) == BackfillStatus.AWAITING_APPROVAL
        assert set(frozen_assets(instance)) == {dg.AssetKey(table) for table in TABLES}
        _, evaluation = latest_gate_evaluation(instance, "revenue")
        assert evaluation.passed and evaluation.metadata["backfill_id"].value == bid
        (node_run,) = [
            run
            for run in instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: bid, "dagster/partition": "2024-01-02"}))
            if run.asset_selection == {dg.AssetKey("orders")}
        ]
    assert all(lease.parked for table in TABLES for lease in held_by(house.uri(table), bid))  # for the approval

    monkeypatch.setenv(safe_defs.FACTOR_ENV, "5")  # values the gate never saw
    copied = {key: value for key, value in node_run.tags.items() if key != "dagster/partition"}
    assert copied[STAGED_TAG] == "true" and LEASE_PROOF_TAG in copied  # its proof copied too, as re-execution does
    for tags in (copied, {BACKFILL_ID_TAG: bid}):
        result = production_run(house, spark_resource, tags)
        assert not result.success
        failure = step_failure_of(result)
        assert f"is tagged {BACKFILL_ID_TAG}={bid}" in failure and "no valid lease proof" in failure, failure
        assert f"backfill {bid} holds a lease" in failure and "Nothing was written" in failure, failure
        assert house.contents() == before  # readers see the old data

    # The staging altered after the gate (a staged file touched): the approval is refused.
    staged_file = min((house.lake / "orders" / "_backfills" / bid / "data" / "ds=2024-01-02").glob("*.parquet"))
    gated_time = staged_file.stat().st_mtime_ns
    os.utime(staged_file, ns=(gated_time, gated_time + 10**9))
    refused(
        house.cli("approve", bid, "--by", "ana"), "staged data of orders", house.uri("orders"), "nothing was published"
    )
    assert house.contents() == before and house.versions() == versions
    assert recorded_backfill(house.home, bid).status == BackfillStatus.AWAITING_APPROVAL
    assert all(lease.parked for table in TABLES for lease in held_by(house.uri(table), bid))
    os.utime(staged_file, ns=(gated_time, gated_time))  # back to what the gate saw

    # A second approval, started with the first: it has read the record when the first runs.
    for name, value in house.env().items():
        monkeypatch.setenv(name, value)
    context = racing_context(__name__)
    read, go, outcomes = context.Event(), context.Event(), context.Queue()
    second = racing_process(context, approve_as_read_before, str(house.home), bid, "bruno", read, go, outcomes)
    second.start()
    try:
        assert read.wait(120)
        approved_at = datetime.now(UTC)
        ok(house.cli("approve", bid, "--by", "ana"))
        published = recorded_backfill(house.home, bid).published_versions
        assert set(published) == set(TABLES) and all(version is not None for version in published.values())
    finally:
        go.set()
        second.join(120)
    record = recorded_backfill(house.home, bid)
    assert record.status == BackfillStatus.PUBLISHED
    assert record.published_versions == published and record.approval.approved_by == "ana"
    refusal = outcomes.get(timeout=5)
    assert refusal.startswith("IllegalTransitionError") and "is published: cannot approve it" in refusal, refusal

    assert house.content("orders") == expected_orders(days(1, 2), 1.2)
    with house.instance() as instance:  # the refused runs are none of its nodes: the node's materialization is recorded
        day_2 = dg.AssetRecordsFilter(asset_key=dg.AssetKey("orders"), asset_partitions=["2024-01-02"])
        (latest,) = instance.fetch_materializations(day_2, limit=1).records
        assert latest.asset_materialization.metadata["backfill_id"].value == bid
    entries = Ledger(ledger_uri(str(house.lake))).entries(bid)
    approvals = [entry for entry in entries if entry.status == LedgerStatus.APPROVED]
    assert {(entry.asset, entry.partition) for entry in approvals} == {(t, d) for t in TABLES for d in days(1, 2)}
    assert {entry.approved_by for entry in approvals} == {"ana"}
    assert all(approved_at - timedelta(seconds=5) <= entry.recorded_at <= datetime.now(UTC) for entry in approvals)
    published_rows = [entry for entry in entries if entry.status == LedgerStatus.PUBLISHED]
    assert published_rows and {entry.approved_by for entry in published_rows} == {"ana"}
    with house.instance() as instance:
        assert frozen_assets(instance) == {}


def test_a_backfill_awaiting_approval_leaves_by_discard_or_expiry_with_the_tables_untouched(published_2_days):
    house = published_2_days
    before, versions = house.contents(), house.versions()
    discarded = backfill_id(ok(house.backfill("2024-01-01", "2024-01-02", *REQUIRED, **{FACTOR: "1.2"})))
    ok(house.cli("discard", discarded))
    with house.instance() as instance:
        assert BackfillStore(instance).status(discarded) == BackfillStatus.DISCARDED
        assert frozen_assets(instance) == {}

    expiring = backfill_id(
        ok(house.backfill("2024-01-01", "2024-01-02", *REQUIRED, "--approval-expires", "1m", **{FACTOR: "1.2"}))
    )
    expire_approval(house, expiring, timedelta(seconds=-1))  # a minute later, as the record sees it
    refused(house.cli("approve", expiring, "--by", "ana"), "approval expired", "discarded now", "nothing was published")
    with house.instance() as instance:
        assert BackfillStore(instance).status(expiring) == BackfillStatus.DISCARDED
        assert frozen_assets(instance) == {}
    assert house.contents() == before and house.versions() == versions
    assert not any(held_by(house.uri(table), bid) for table in TABLES for bid in (discarded, expiring))


def test_under_a_deployments_policy_only_a_listed_approver_other_than_the_launcher_publishes(published_2_days):
    house = published_2_days
    settings = yaml.safe_load((house.home / "dagster.yaml").read_text())["partition_assets"]
    add_to_config(house.home, partition_assets={**settings, "approval": {"approvers": ["ana", "bruno"]}})
    before, ids = house.contents(), recorded_ids(house.home)
    skipping = house.backfill("2024-01-01", "2024-01-02", "--approval", "none", "--by", "ana")
    refused(skipping, "--approval none", "skips the approval this backfill requires", "Nothing was recorded or run")
    assert recorded_ids(house.home) == ids

    bid = backfill_id(ok(house.backfill("2024-01-01", "2024-01-02", "--by", "ana", **{FACTOR: "1.2"})))
    assert recorded_backfill(house.home, bid).launched_by == "ana"  # the deployment requires approval
    refused(house.cli("approve", bid, "--by", "ana"), "the approver 'ana' launched backfill", "Nothing was written")
    refused(house.cli("approve", bid, "--by", "carol"), "allows only ana, bruno", "Nothing was written")
    record = recorded_backfill(house.home, bid)
    assert record.status == BackfillStatus.AWAITING_APPROVAL and record.approval.approved_by is None
    assert house.contents() == before
    ok(house.cli("approve", bid, "--by", "bruno"))
    assert house.content("orders") == expected_orders(days(1, 2), 1.2)
    assert recorded_backfill(house.home, bid).approval.approved_by == "bruno"


def approve_as_read_before(home: str, backfill_id: str, approver: str, read: Event, go: Event, outcomes: Queue) -> None:
    """In a process of its own, `backfill approve <backfill_id> --by <approver>` as a command
    started at the same time as another approval: it reads the record, sets `read`, and goes on
    once `go` is set (the other approval's turn); puts "approved" or its refusal on `outcomes`."""
    with dg.DagsterInstance.from_config(home) as instance:
        record = BackfillStore(instance).load(backfill_id)
        read.set()
        go.wait(120)
        try:
            approve_record(instance, record, approver)
            outcomes.put("approved")
        except PartitionAssetsError as refused:
            outcomes.put(f"{type(refused).__name__}: {refused}")


def test_a_refused_coordinator_run_leaves_a_backfill_awaiting_approval_as_it_was(published_2_days, spark):
    """Issue 39, hole 9: re-executing the coordinator run of a backfill awaiting approval was
    refused, but only after it had taken the backfill's parked leases back (live, then dead
    with its heartbeat): a production write then succeeded, and the backfill could no longer
    reach `publish_refused`, which the status table did not allow from `awaiting_approval`."""
    house = published_2_days
    before = house.contents()
    first = run_coordinator_job(house, config={"approval": "required"}, **{safe_defs.FACTOR_ENV: "1.2"})
    run_id = first.stdout.strip().splitlines()[-1]
    bid = "launchpad0run"
    assert recorded_backfill(house.home, bid).status == BackfillStatus.AWAITING_APPROVAL, first.stderr

    again = run_coordinator_job(house, run_id, **{safe_defs.FACTOR_ENV: "1.2"})
    with house.instance() as instance:
        rerun = instance.get_run_by_id(again.stdout.strip().splitlines()[-1])
        assert rerun.status == dg.DagsterRunStatus.FAILURE
        assert "is awaiting_approval: cannot run it" in failure_of(instance, rerun.run_id)
        assert BackfillStore(instance).status(bid) == BackfillStatus.AWAITING_APPROVAL
    assert all(lease.parked for table in TABLES for lease in held_by(house.uri(table), bid))
    assert all(held_by(house.uri(table), bid) for table in TABLES)
    refused = house.production_write("2024-01-02")
    assert not refused.success and bid in failure_message(refused), failure_message(refused)
    assert house.contents() == before

    foreign_update(house, "orders", "2024-01-02")  # a commit past the leases: the publish must refuse it
    refused_publish = house.cli("approve", bid, "--by", "ana")
    assert refused_publish.returncode == 2 and "changed partitions it rewrites" in refused_publish.stderr
    assert recorded_backfill(house.home, bid).status == BackfillStatus.PUBLISH_REFUSED
    assert house.content("revenue") == before["revenue"]


def failure_of(instance: dg.DagsterInstance, run_id: str) -> str:
    """The message of the run's step failure."""
    return next(
        record.dagster_event.step_failure_data.error.message
        for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
    )


def test_a_publish_refused_by_a_foreign_commit_keeps_the_backfill_s_partitions_leased(published_2_days, monkeypatch):
    """Issue 50 hole 6: `approve` (and then `publish`) refused by a foreign commit took the
    backfill's parked leases back live and left them to lapse with their heartbeat: one TTL
    later a production run wrote the partitions of a `publish_refused` backfill that still
    holds staged data. The refusal parks them again."""
    house = published_2_days
    bid = backfill_id(ok(house.backfill("2024-01-01", "2024-01-02", *REQUIRED, **{FACTOR: "1.2"})))
    foreign_update(house, "orders", "2024-01-02")  # a commit past the leases: the publish must refuse it
    for step in (("approve", bid, "--by", "ana"), ("publish", bid)):
        refused_step = house.cli(*step)
        assert refused_step.returncode == 2 and "changed partitions it rewrites" in refused_step.stderr, refused_step
        assert recorded_backfill(house.home, bid).status == BackfillStatus.PUBLISH_REFUSED
        held = [lease for table in TABLES for lease in held_by(house.uri(table), bid)]
        assert len(held) == len(TABLES) and all(lease.parked for lease in held), held

    monkeypatch.setenv(TTL_ENV, "1")  # a lease a second past its last heartbeat is dead, unless parked
    time.sleep(max(0.0, max(lease.heartbeat_at for lease in held) + 1.5 - time.time()))
    production = house.production_write("2024-01-02")
    assert not production.success and bid in failure_message(production), failure_message(production)


def test_a_node_run_deleted_and_created_again_under_its_id_and_tags_cannot_write(published_2_days, spark_resource):
    """Issue 50 hole 5: Dagster's GraphQL deletes a run (`deleteRun`) and launches one under a
    chosen id. A node run of a backfill awaiting approval, deleted and re-created under its id
    with its tags (its lease proof among them), proved itself the backfill's and wrote into its
    staging through its parked leases. The proof holds for the run record it was first checked
    on only: the re-created run is refused, and nothing changes."""
    house = published_2_days
    before = house.contents()
    bid = backfill_id(ok(house.backfill("2024-01-01", "2024-01-02", *REQUIRED, **{FACTOR: "1.2"})))
    with house.instance() as instance:
        (node_run,) = [
            run
            for run in instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: bid, "dagster/partition": "2024-01-02"}))
            if run.asset_selection == {dg.AssetKey("orders")}
        ]
        instance.delete_run(node_run.run_id)
        tags = {key: value for key, value in node_run.tags.items() if key != "dagster/partition"}
        io_manager = SparkDeltaIOManager(root_uri=str(house.lake), spark=spark_resource)
        job = dg.Definitions(
            assets=[safe_defs.orders],
            resources={"spark": spark_resource, "io_manager": io_manager},
            jobs=[dg.define_asset_job("orders")],
        ).resolve_job_def("orders")
        again = job.execute_in_process(
            instance=instance, partition_key="2024-01-02", tags=tags, run_id=node_run.run_id, raise_on_error=False
        )
    assert not again.success
    failure = step_failure_of(again)
    assert f"is tagged {BACKFILL_ID_TAG}={bid}" in failure and "no valid lease proof" in failure, failure
    assert ok(house.cli("approve", bid, "--by", "ana"))  # its staging is what its gate saw
    assert house.contents() != before and house.content("orders") == expected_orders(days(1, 2), 1.2)
