"""Schema-changing backfills end to end, through `partition-assets backfill` on real Spark, Delta
tables and a Dagster instance (code location: partition_assets_tests/support/locations/schema_defs.py): the plan's
per-column report and its refusal of a partial range, a whole-table retype published in one
commit with the previous version kept and rolled back exactly, and a declared split gated
through its mapping (a wrong split fails the gate, the diff naming the changed column) whose
rollback is refused, writing nothing, once production wrote a newer day in the new schema; an
approval whose publish a day written meanwhile refuses is not recorded."""

import re

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import functions as F

from partition_assets.backfill.model import BackfillStatus
from partition_assets.partitions import daily
from partition_assets.storage import DeltaFormat, PartitionScope
from partition_assets.storage.delta.previous import previous_copy
from partition_assets.storage.leases import held_by
from partition_assets_tests.support.cli_runs import backfill_id, ok
from partition_assets_tests.support.lakehouse import Lakehouse
from partition_assets_tests.support.locations import schema_defs
from partition_assets_tests.support.readers import delta_row_set, duckdb_connection
from partition_assets_tests.support.records import recorded_backfill

pytestmark = pytest.mark.slow

TARGET = ["-m", "partition_assets_tests.support.locations.schema_defs", "--select", "*"]
JANUARY_1_TO_3 = ["--start", "2024-01-01", "--end", "2024-01-03"]


@pytest.fixture
def payments_v1(tmp_path, home_template) -> Lakehouse:
    """A lakehouse whose payments (amount double) and totals are published for all three days."""
    lakehouse = Lakehouse(tmp_path, home_template)
    ok(lakehouse.cli("run", *TARGET, *JANUARY_1_TO_3, "--publish", "per-node"))
    return lakehouse


def schema(lakehouse: Lakehouse, table: str, version: int | None = None) -> dict[str, str]:
    return {f.name: str(f.type.type) for f in DeltaTable(lakehouse.uri(table), version=version).schema().fields}


def records(lakehouse: Lakehouse) -> set[str]:
    """The ids of the backfills recorded in the lakehouse's home."""
    return {path.stem for path in (lakehouse.home / "partition_assets" / "backfills").glob("*.json")}


def column_types(lakehouse: Lakehouse) -> dict[str, str]:
    """The column schema the latest materialization of payments records (what the UI shows)."""
    with lakehouse.instance() as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("payments"))
    assert event is not None and event.asset_materialization is not None
    metadata = event.asset_materialization.metadata
    assert metadata["schema_change"].value  # the change, column by column
    return {column.name: column.type for column in metadata["dagster/column_schema"].schema.columns}


def duckdb_amounts(lakehouse: Lakehouse) -> tuple[str, list]:
    """DuckDB's type of payments.amount, and the amounts by payment id."""
    result = duckdb_connection().execute(
        f"SELECT amount FROM delta_scan('{lakehouse.uri('payments')}') ORDER BY payment_id"
    )
    return str(result.description[0][1]), [row[0] for row in result.fetchall()]


def test_a_retype_is_planned_refused_over_a_partial_range_then_published_kept_and_rolled_back(payments_v1):
    decimal = {schema_defs.SCHEMA_ENV: "decimal"}
    versions = {table: DeltaTable(payments_v1.uri(table)).version() for table in ("payments", "payments_total")}
    old_rows = delta_row_set(payments_v1.uri("payments"))
    records_before = records(payments_v1)

    partial = payments_v1.cli("plan", *TARGET, "--start", "2024-01-01", "--end", "2024-01-02", **decimal)
    assert partial.returncode != 0
    assert "retyped  amount: double -> decimal(18,6)" in partial.stderr
    assert "--all-partitions" in partial.stderr and "Nothing was recorded or written" in partial.stderr
    refused_run = payments_v1.cli("run", *TARGET, "--start", "2024-01-01", "--end", "2024-01-02", **decimal)
    assert refused_run.returncode != 0 and "--all-partitions" in refused_run.stderr
    assert records(payments_v1) == records_before  # refused before anything was recorded
    assert {t: DeltaTable(payments_v1.uri(t)).version() for t in versions} == versions

    plan = ok(payments_v1.cli("plan", *TARGET, "--all-partitions", **decimal))
    assert "schema change of payments" in plan and "retyped  amount: double -> decimal(18,6)" in plan

    output = ok(payments_v1.cli("run", *TARGET, "--all-partitions", "--keep-previous", "30d", **decimal))
    bid = backfill_id(output)
    published = DeltaTable(payments_v1.uri("payments")).version()
    assert published == versions["payments"] + 1  # one commit: the schema, the removes, the adds
    assert schema(payments_v1, "payments")["amount"] == "decimal(18,6)"
    duck_type, amounts = duckdb_amounts(payments_v1)
    assert duck_type.upper() == "DECIMAL(18,6)" and sorted(map(float, amounts)) == sorted(
        a for day in ("2024-01-01", "2024-01-02", "2024-01-03") for a in schema_defs.payment_amounts(day)
    )
    assert column_types(payments_v1) == {"payment_id": "string", "amount": "decimal(18,6)", "ds": "string"}
    copy = previous_copy(payments_v1.uri("payments"))
    assert copy is not None and copy.backfill_id == bid and copy.version == versions["payments"]
    assert re.search(
        rf"previous version of payments \(v{copy.version}\) kept as \S+__previous until",
        ok(payments_v1.cli("status", bid)),
    )
    assert "kept as" in ok(payments_v1.cli("ledger", bid))

    ok(payments_v1.cli("rollback", bid))
    assert DeltaTable(payments_v1.uri("payments")).version() == published + 1
    assert schema(payments_v1, "payments")["amount"] == "double"
    assert delta_row_set(payments_v1.uri("payments")) == old_rows
    assert "DOUBLE" in duckdb_amounts(payments_v1)[0].upper()
    assert column_types(payments_v1)["amount"] == "double"  # the UI's columns follow the rollback


def test_a_declared_split_is_gated_through_its_mapping_and_not_rolled_back_over_a_newer_day(payments_v1, spark):
    totals = delta_row_set(payments_v1.uri("payments_total"))
    version = DeltaTable(payments_v1.uri("payments")).version()

    wrong = payments_v1.cli("run", *TARGET, "--all-partitions", **{schema_defs.SCHEMA_ENV: "bad_split"})
    assert wrong.returncode == 1 and "validation gate failed" in wrong.stdout, wrong.stdout + wrong.stderr
    assert "sum(amount)" in wrong.stdout
    diff = ok(payments_v1.cli("diff", backfill_id(wrong.stdout), **{schema_defs.SCHEMA_ENV: "bad_split"}))
    assert re.search(r"payments\s+2024-01-02\s.*changed: amount", diff), diff
    ok(payments_v1.cli("discard", backfill_id(wrong.stdout)))
    assert DeltaTable(payments_v1.uri("payments")).version() == version

    output = ok(payments_v1.cli("run", *TARGET, "--all-partitions", **{schema_defs.SCHEMA_ENV: "split"}))
    assert "published" in output
    assert DeltaTable(payments_v1.uri("payments")).version() == version + 1
    assert {"net", "tax"} <= schema(payments_v1, "payments").keys()
    assert "amount" not in schema(payments_v1, "payments")
    # The total read net + tax from the staged overlay: the same totals, published with it.
    assert delta_row_set(payments_v1.uri("payments_total")) == totals

    # A production write of a newer day in the new schema: the split can no longer be rolled back.
    uri, newer = payments_v1.uri("payments"), PartitionScope.for_keys(daily("2024-01-01"), ["2024-01-04"], ("ds",))
    day_3 = DeltaFormat().read(spark, uri, PartitionScope.for_keys(daily("2024-01-01"), ["2024-01-03"], ("ds",)))
    DeltaFormat().write(day_3.withColumn("ds", F.lit("2024-01-04")), uri, newer)
    version, rows, bid = DeltaTable(uri).version(), delta_row_set(uri), backfill_id(output)
    refused = payments_v1.cli("rollback", bid, "--force")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "partitions [ds=2024-01-04] outside it were written since" in refused.stderr
    assert "Nothing was committed" in refused.stderr and "new backfill over every partition" in refused.stderr
    assert (DeltaTable(uri).version(), delta_row_set(uri)) == (version, rows)
    assert recorded_backfill(payments_v1.home, bid).status == BackfillStatus.PUBLISHED
    assert not held_by(uri, bid)  # refused before taking a lease


def test_an_approval_whose_publish_a_new_day_refuses_is_not_recorded(payments_v1):
    """Issue 50 hole 10: a publish refused at `approve` by the schema check left the backfill
    `awaiting_approval` with its approval recorded. A retype of every partition awaits approval;
    production then writes a day the backfill never saw, in the old schema: `approve` is refused
    naming that day before anything is recorded, and the backfill still awaits an approval."""
    decimal = {schema_defs.SCHEMA_ENV: "decimal"}
    output = ok(payments_v1.cli("run", *TARGET, "--all-partitions", "--approval", "required", **decimal))
    bid = backfill_id(output)
    assert recorded_backfill(payments_v1.home, bid).status == BackfillStatus.AWAITING_APPROVAL
    uri = payments_v1.uri("payments")
    day_3 = DeltaTable(uri).to_pyarrow_table(filters=[("ds", "=", "2024-01-03")])
    day_4 = day_3.set_column(day_3.schema.get_field_index("ds"), "ds", pa.array(["2024-01-04"] * day_3.num_rows))
    write_deltalake(uri, day_4, mode="append")  # production's new day, outside the backfill's leases

    refused = payments_v1.cli("approve", bid, "--by", "ana")
    assert refused.returncode != 0 and "ds=2024-01-04" in refused.stderr, refused.stderr
    record = recorded_backfill(payments_v1.home, bid)
    assert record.status == BackfillStatus.AWAITING_APPROVAL and record.approval.approved_by is None
