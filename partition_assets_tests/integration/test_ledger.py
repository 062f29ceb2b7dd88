"""The backfill ledger: a real append-only Delta table, read back by the Ledger, delta-rs,
Spark and DuckDB; concurrent appends all land; one backfill's reads skip the others' files."""

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from threading import Barrier

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

from partition_assets.backfill.state.ledger import SCHEMA, Ledger, LedgerEntry, LedgerStatus, ledger_uri
from partition_assets.errors import CommitError
from partition_assets.state_formats import LEDGER_FORMAT, TABLE_FORMAT_PROPERTY
from partition_assets.storage.delta.read import read_partitions
from partition_assets_tests.support.readers import duckdb_connection

T0 = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)


def entry(backfill_id, partition, status, minutes, **kwargs):
    return LedgerEntry(
        backfill_id=backfill_id,
        asset="daily_revenue",
        partition=partition,
        status=status,
        recorded_at=T0 + timedelta(minutes=minutes),
        **kwargs,
    )


def staged(backfill_id, partition, minutes=0):
    return entry(
        backfill_id,
        partition,
        LedgerStatus.STAGED,
        minutes,
        run_id=f"run-{partition}",
        git_sha="abc123",
        rows=10,
        checksum="1234",
        input_versions={"orders": 7, "daily_orders": "staged"},
        inputs_as_of="original",
        runtime={"python": "3.11.7", "pyspark": "4.1.1"},
        gate=[{"rule": "rows", "passed": True}],
    )


@pytest.fixture
def ledger(lake) -> Ledger:
    return Ledger(ledger_uri(str(lake)))


def test_entries_oldest_first_and_latest_per_partition(ledger, lake):
    assert ledger.uri == f"{lake}/_partition_assets/ledger"
    assert ledger.entries("b1") == [] and ledger.latest("b1") == []
    ledger.append([staged("b1", "2024-01-02", 1), staged("b1", "2024-01-01", 0), staged("b2", "2024-01-01", 0)])
    published = [
        entry("b1", day, "published", 5, rows=10, published_version=3, input_versions={"orders": 7})
        for day in ("2024-01-01", "2024-01-02")
    ]
    ledger.append(published)
    ledger.append([entry("b1", "2024-01-01", LedgerStatus.ROLLED_BACK, 9, published_version=3)])
    ledger.append([])  # nothing: no commit

    assert DeltaTable(ledger.uri).version() == 3  # one commit per non-empty append, one for the format of the table
    history = ledger.entries("b1")
    assert [(e.partition, e.status) for e in history] == [
        ("2024-01-01", LedgerStatus.STAGED),
        ("2024-01-02", LedgerStatus.STAGED),
        ("2024-01-01", LedgerStatus.PUBLISHED),
        ("2024-01-02", LedgerStatus.PUBLISHED),
        ("2024-01-01", LedgerStatus.ROLLED_BACK),
    ]
    assert history[0] == staged("b1", "2024-01-01", 0)  # every field round-trips
    assert [(e.partition, e.status.value) for e in ledger.latest("b1")] == [
        ("2024-01-01", "rolled_back"),
        ("2024-01-02", "published"),
    ]
    assert [e.status for e in ledger.latest("b2")] == [LedgerStatus.STAGED]

    assert history[0].to_json() == {
        "asset": "daily_revenue",
        "partition": "2024-01-01",
        "run_id": "run-2024-01-01",
        "git_sha": "abc123",
        "rows": 10,
        "checksum": "1234",
        "input_versions": {"daily_orders": "staged", "orders": 7},
        "inputs_as_of": "original",
        "runtime": {"python": "3.11.7", "pyspark": "4.1.1"},
        "published_version": None,
        "status": "staged",
        "gate": [{"rule": "rows", "passed": True}],
        "recorded_at": "2026-01-05T09:30:00+00:00",
        "approved_by": None,
    }
    assert json.loads(json.dumps(history[2].to_json()))["published_version"] == 3


def test_a_ledger_written_before_inputs_as_of_and_runtime_existed_takes_the_columns_on(ledger):
    older = SCHEMA.remove(SCHEMA.get_field_index("runtime")).remove(SCHEMA.get_field_index("inputs_as_of"))
    row = {"backfill_id": "b0", "asset": "a", "partition": "2024-01-01", "input_versions": "{}", "status": "staged"}
    write_deltalake(
        ledger.uri, pa.Table.from_pylist([{**row, "recorded_at": T0}], schema=older), partition_by=["backfill_id"]
    )
    ledger.append([staged("b1", "2024-01-01")])
    assert [(e.inputs_as_of, e.runtime) for e in ledger.entries("b0")] == [(None, {})]
    assert [e.inputs_as_of for e in ledger.entries("b1")] == ["original"]


def test_the_ledger_is_append_only_and_partitioned_by_backfill(ledger):
    ledger.append([staged("b1", "2024-01-01"), staged("b2", "2024-01-01")])
    table = DeltaTable(ledger.uri)
    assert table.metadata().partition_columns == ["backfill_id"]
    assert table.metadata().configuration == {"delta.appendOnly": "true", TABLE_FORMAT_PROPERTY: str(LEDGER_FORMAT)}
    with pytest.raises(CommitFailedError, match="append-only"):
        table.delete("backfill_id = 'b1'")
    assert len(ledger.entries("b1")) == 1


def test_an_append_the_storage_refuses_is_a_commit_error_naming_the_table_and_records_nothing(ledger):
    """Issue 50 (read in the code): a full disk at `approve` surfaced as a raw `DeltaError`
    traceback. A write the storage refuses (here a file where the backfill's folder goes) is a
    CommitError naming the ledger and saying nothing was recorded."""
    ledger.append([staged("b1", "2024-01-01")])
    Path(ledger.uri, "backfill_id=b2").write_text("a file where the folder goes")
    with pytest.raises(
        CommitError, match=r"the append to the ledger .* failed .* nothing of these entries was recorded"
    ):
        ledger.append([staged("b2", "2024-01-01")])
    assert ledger.entries("b2") == [] and len(ledger.entries("b1")) == 1


def test_reading_one_backfill_opens_only_its_files(ledger):
    for backfill_id in ("b1", "b2", "b3"):
        ledger.append([staged(backfill_id, "2024-01-01")])
    # Destroy the other backfills' data files: a read that scanned them would fail.
    for uri in DeltaTable(ledger.uri).file_uris():
        if "backfill_id=b2" not in uri:
            Path(uri.removeprefix("file://")).write_bytes(b"not parquet")
    assert [e.backfill_id for e in ledger.latest("b2")] == ["b2"]
    with pytest.raises(pa.ArrowInvalid):  # the check sees a damaged file when it is read
        ledger.entries("b1")


def test_concurrent_appends_from_threads_all_land_even_when_creating_the_table(ledger):
    writers, appends_each = 4, 5
    barrier = Barrier(writers)

    def write(writer):
        barrier.wait()  # all first appends race to create the table
        for n in range(appends_each):
            ledger.append([staged(f"b{writer}", f"p{n}", minutes=n)])

    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(write, range(writers)))
    for writer in range(writers):
        assert [e.partition for e in ledger.entries(f"b{writer}")] == [f"p{n}" for n in range(appends_each)]
    assert DeltaTable(ledger.uri).to_pyarrow_table().num_rows == writers * appends_each


APPENDER = """
import sys
from partition_assets.backfill.state.ledger import Ledger, LedgerEntry
uri, backfill_id = sys.argv[1:]
for n in range(5):
    Ledger(uri).append([LedgerEntry(backfill_id=backfill_id, asset="a", partition=f"p{n}", status="staged")])
"""


def test_concurrent_appends_from_two_processes_all_land(ledger):
    ledger.append([staged("b0", "p0")])
    processes = [subprocess.Popen([sys.executable, "-c", APPENDER, ledger.uri, f"b{i}"]) for i in (1, 2)]
    assert [p.wait(timeout=120) for p in processes] == [0, 0]
    assert [[e.partition for e in ledger.entries(f"b{i}")] for i in (1, 2)] == [[f"p{n}" for n in range(5)]] * 2
    assert DeltaTable(ledger.uri).version() == 11  # one commit per append, one for the format of the table


def test_delta_rs_spark_and_duckdb_read_the_same_ledger(ledger, spark):
    ledger.append([staged("b1", "2024-01-01"), staged("b2", "2024-01-01", 1)])
    ledger.append([entry("b1", "2024-01-01", "published", 2, published_version=4, rows=10)])

    expected = sorted(
        (e.backfill_id, e.partition, e.status.value, e.published_version)
        for b in ("b1", "b2")
        for e in ledger.entries(b)
    )
    assert len(expected) == 3

    with_delta_rs = DeltaTable(ledger.uri).to_pyarrow_table().to_pylist()
    assert (
        sorted((r["backfill_id"], r["partition"], r["status"], r["published_version"]) for r in with_delta_rs)
        == expected
    )

    frame = read_partitions(spark, DeltaTable(ledger.uri), None)
    rows = frame.select("backfill_id", "partition", "status", "published_version", "recorded_at", "input_versions")
    collected = rows.collect()
    assert sorted((r[0], r[1], r[2], r[3]) for r in collected) == expected
    assert sorted(json.loads(r["input_versions"]).get("orders", 0) for r in collected) == [0, 7, 7]
    assert min(r["recorded_at"] for r in collected).astimezone(UTC) == T0

    duck = duckdb_connection().execute(
        "SELECT backfill_id, partition, status, published_version, epoch_us(recorded_at) "
        f"FROM delta_scan('{ledger.uri}')"
    )
    duck_rows = duck.fetchall()
    assert sorted(r[:4] for r in duck_rows) == expected
    assert min(r[4] for r in duck_rows) == int(T0.timestamp() * 1_000_000)


def test_status_and_naive_times_are_normalized():
    naive = LedgerEntry(backfill_id="b", asset="a", partition="p", status="discarded", recorded_at=datetime(2026, 1, 1))
    assert naive.status is LedgerStatus.DISCARDED
    assert naive.recorded_at == datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError):
        LedgerEntry(backfill_id="b", asset="a", partition="p", status="done")
    assert os.path.basename(ledger_uri("s3://bucket/lake")) == "ledger"
