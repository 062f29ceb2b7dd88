"""Staged backfills end to end, through `partition-assets backfill` on real Spark, Delta
tables and a Dagster instance: readers see the old content then the new, one commit
per table, the gate, diff/publish/discard, the ledger, rollback, leases in both directions,
the freeze and the notification hook. SIGKILL + resume, an unexpected error and a Spark
server that dies: test_backfill_resume.py (a file of its own, so that pytest-xdist
can run the two halves side by side)."""

import json
import re
import threading

import dagster as dg
import pytest

from partition_assets.backfill.publishing.dagster_events import PUBLISH_RUN_TAG
from partition_assets.backfill.publishing.freeze import frozen_assets
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets.storage import DeltaFormat, PartitionScope
from partition_assets.storage.leases import run_lease
from partition_assets_tests.support.cli_runs import backfill_id, ok
from partition_assets_tests.support.lakehouse import TABLES, days, expected_orders
from partition_assets_tests.support.locations import safe_defs
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.records import recorded_ids
from partition_assets_tests.support.results import failure_message

pytestmark = pytest.mark.slow


def test_a_reader_sees_the_old_content_then_the_new_and_each_table_gets_one_version(lakehouse):
    ok(lakehouse.backfill("2024-01-01", "2024-01-07", "--publish", "per-node"))
    old, versions_before = lakehouse.contents(), lakehouse.versions()
    seen: dict[str, list[frozenset]] = {table: [] for table in TABLES}
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            for table in TABLES:
                content = lakehouse.content(table)
                if not seen[table] or seen[table][-1] != content:
                    seen[table].append(content)

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        output = ok(lakehouse.backfill("2024-01-01", "2024-01-07", **{safe_defs.FACTOR_ENV: "1.2"}))
    finally:
        stop.set()
        reader.join()
    new = lakehouse.contents()
    assert new["orders"] == expected_orders(days(1, 7), 1.2)
    for table in TABLES:
        assert old[table] != new[table]
        assert seen[table] == [old[table], new[table]], f"{table}: {len(seen[table])} contents seen"
    assert lakehouse.versions() == {table: version + 1 for table, version in versions_before.items()}
    assert "published" in output
    assert lakehouse.events()[-2:] == ["started", "published"]
    with lakehouse.instance() as instance:
        assert frozen_assets(instance) == {}
        # Dagster records the materializations once, when the data is published.
        # Dagster records the backfill's materializations once readers can see them: all 7 in
        # its one publish run, none in its node runs (which ran before the publish).
        bid = backfill_id(output)
        runs = {run.run_id: run for run in instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: bid}))}
        publish_runs = [run_id for run_id, run in runs.items() if run.tags.get(PUBLISH_RUN_TAG)]
        records = instance.fetch_materializations(dg.AssetKey("revenue"), limit=100).records
        ours = [record for record in records if record.run_id in runs]
        assert len(publish_runs) == 1 and len(runs) > 1
        assert len(ours) == 7 and {record.run_id for record in ours} == set(publish_runs)


def test_a_failed_gate_publishes_nothing_then_diff_and_publish_force(published_3_days):
    before, versions = published_3_days.contents(), published_3_days.versions()
    result = published_3_days.backfill("2024-01-01", "2024-01-03", **{safe_defs.FACTOR_ENV: "3"})
    assert result.returncode == 1, result.stdout + result.stderr
    assert "validation gate failed" in result.stdout
    bid = backfill_id(result.stdout)
    assert published_3_days.contents() == before and published_3_days.versions() == versions
    assert published_3_days.events()[-2:] == ["started", "gate_failed"]

    diff = ok(published_3_days.cli("diff", bid))
    # revenue per day: 1+2+...+6 = 21 before, 63 after (factor 3)
    assert re.search(r"revenue.*2024-01-02.*21(\.0)?\b.*63(\.0)?\b", diff), diff

    refused = published_3_days.cli("publish", bid)
    assert refused.returncode == 2 and "--force" in refused.stderr + refused.stdout
    ok(published_3_days.cli("publish", bid, "--force"))
    assert published_3_days.content("orders") == expected_orders(days(1, 3), 3)
    assert published_3_days.versions() == {table: version + 1 for table, version in versions.items()}

    ledger = json.loads(ok(published_3_days.cli("ledger", bid, "--json")))
    assert {(row["asset"], row["partition"]) for row in ledger} == {(t, d) for t in TABLES for d in days(1, 3)}
    for row in ledger:
        assert row["status"] == "published"
        assert row["published_version"] == versions[row["asset"]] + 1
        assert row["rows"] == (safe_defs.ORDERS_PER_DAY if row["asset"] == "orders" else 1)
        assert row["run_id"] and row["checksum"]
    revenue_inputs = next(row["input_versions"] for row in ledger if row["asset"] == "revenue")
    assert revenue_inputs == {"orders": f"staged:{bid}"}


def test_a_blocking_asset_check_runs_on_the_staged_data_and_stops_the_publish(published_2_days):
    before, versions = published_2_days.contents(), published_2_days.versions()
    # Published revenue is 21 a day, staged 26.25: only a check reading the staged data fails.
    ceiling = {safe_defs.REVENUE_CEILING_ENV: "22"}
    result = published_2_days.backfill("2024-01-01", "2024-01-02", **{safe_defs.FACTOR_ENV: "1.25"}, **ceiling)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "revenue_below_ceiling" in result.stdout
    assert published_2_days.contents() == before and published_2_days.versions() == versions
    assert published_2_days.events()[-2:] == ["started", "failed"]


def test_two_backfills_of_the_same_range_and_code_give_equal_checksums(lakehouse):
    first = backfill_id(ok(lakehouse.backfill("2024-01-01", "2024-01-02")))
    second = backfill_id(ok(lakehouse.backfill("2024-01-01", "2024-01-02", "--no-batch")))
    checksums = [
        {
            (row["asset"], row["partition"]): row["checksum"]
            for row in json.loads(ok(lakehouse.cli("ledger", b, "--json")))
        }
        for b in (first, second)
    ]
    assert checksums[0] == checksums[1] and len(checksums[0]) == 6


def test_rollback_restores_the_content_before_and_removes_created_partitions(published_3_days, spark):
    before = published_3_days.contents()
    bid = backfill_id(ok(published_3_days.backfill("2024-01-02", "2024-01-05", **{safe_defs.FACTOR_ENV: "1.25"})))
    assert published_3_days.content("orders") == expected_orders(days(1, 1), 1) | expected_orders(days(2, 5), 1.25)

    # A later commit to a partition the backfill rewrote: rollback refuses, then --force restores anyway.
    scope = PartitionScope.for_keys(safe_defs.DAYS, ["2024-01-02"], ("ds",))
    DeltaFormat().write(safe_defs.orders_frame(spark, "2024-01-02", 7.0), published_3_days.uri("orders"), scope)
    refused = published_3_days.cli("rollback", bid)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "--force" in refused.stdout + refused.stderr

    versions = published_3_days.versions()
    ok(published_3_days.cli("rollback", bid, "--force"))
    assert published_3_days.contents() == before
    assert published_3_days.versions() == {table: version + 1 for table, version in versions.items()}
    assert published_3_days.events()[-1] == "rolled_back"
    assert {row["status"] for row in json.loads(ok(published_3_days.cli("ledger", bid, "--json")))} == {"rolled_back"}
    with published_3_days.instance() as instance:
        # Restored partitions: a materialization of the old content. Created ones: missing again
        # (wiped), with an observation saying the rollback removed them.
        assert instance.get_materialized_partitions(dg.AssetKey("orders")) == set(days(1, 3))
        for day in days(2, 3):
            latest = instance.fetch_materializations(
                dg.AssetRecordsFilter(dg.AssetKey("orders"), asset_partitions=[day]), limit=1
            ).records[0]
            assert latest.asset_materialization.metadata["rolled_back_backfill_id"] == dg.MetadataValue.text(bid)
        for day in days(4, 5):
            observation = instance.fetch_observations(
                dg.AssetRecordsFilter(dg.AssetKey("orders"), asset_partitions=[day]), limit=1
            ).records[0]
            assert observation.asset_observation.metadata["removed_by_rollback_of"] == dg.MetadataValue.text(bid)


def test_leases_refuse_a_run_while_a_backfill_holds_the_partitions_and_the_other_way_round(published_2_days, spark):
    # Run first: a write in flight holds its partitions; the backfill fails fast naming it.
    uri = published_2_days.uri("orders")
    scope = PartitionScope.for_keys(safe_defs.DAYS, ["2024-01-02"], ("ds",))
    records = recorded_ids(published_2_days.home)
    with run_lease(uri, scope, "run-in-flight"):
        refused = published_2_days.backfill("2024-01-01", "2024-01-02")
    assert refused.returncode == 2 and "run-in-flight" in refused.stdout + refused.stderr
    assert recorded_ids(published_2_days.home) == records  # none recorded

    # Backfill first: while it holds the partitions, a Dagster run of one of them fails fast.
    before = published_2_days.content("orders")
    process = published_2_days.start_backfill(
        "2024-01-01", "2024-01-02", **{safe_defs.FACTOR_ENV: "1.25", safe_defs.SLOW_ENV: "2"}
    )
    published_2_days.wait_until_a_node_runs()
    result = published_2_days.production_write("2024-01-02")
    assert not result.success
    assert "PartitionLeasedError" in failure_message(result) and published_2_days.newest_backfill() in failure_message(
        result
    )
    assert published_2_days.content("orders") == before  # the refused run wrote nothing
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stdout + stderr
    assert published_2_days.content("orders") == expected_orders(days(1, 2), 1.25)


def test_the_freeze_is_lifted_and_the_hook_called_on_failure_and_cancel(published_2_days):
    # Failure: a node fails; nothing is published_2_days, the freeze is lifted.
    failed = published_2_days.backfill("2024-01-01", "2024-01-02", **{safe_defs.FACTOR_ENV: "not-a-number"})
    assert failed.returncode == 1
    assert published_2_days.events()[-2:] == ["started", "failed"]
    with published_2_days.instance() as instance:
        assert frozen_assets(instance) == {}
    # The failed backfill keeps its partitions (parked lease) until it is discarded.
    failed_id = backfill_id(failed.stdout)
    refused = published_2_days.backfill("2024-01-01", "2024-01-02")
    assert refused.returncode == 2 and f"backfill discard {failed_id}" in refused.stdout + refused.stderr
    ok(published_2_days.cli("discard", failed_id))

    # Cancel: frozen while it runs, lifted when canceled.
    process = published_2_days.start_backfill(
        "2024-01-01", "2024-01-04", "--max-parallel", "1", **{safe_defs.SLOW_ENV: "2"}
    )
    with published_2_days.instance() as instance:
        frozen = wait_for(lambda: frozen_assets(instance), 120)
        assert set(frozen) == {dg.AssetKey(t) for t in TABLES}
        bid = next(iter(frozen.values()))
        ok(published_2_days.cli("cancel", bid))
        process.communicate(timeout=300)
        assert frozen_assets(instance) == {}
    assert published_2_days.events()[-2:] == ["started", "canceled"]
