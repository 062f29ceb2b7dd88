"""The non-Spark half of storage on an object store: a table at `s3://bucket/...` on a
local S3-compatible server (moto's, on 127.0.0.1).

What Spark executors would write (Parquet files in `col=value/` folders of a staging
folder) is written here with pyarrow through the same S3 filesystem; everything after
that is the product's own code: collecting and checking the staged files, moving them
into the table's layout or a backfill's folder, delta-rs commits (with the S3
conditional writes that serialize concurrent commits), the staged publish, vacuum and
leases. The S3 settings are the environment variables a user sets (README "Scaling
out"); pyarrow and delta-rs read them, nothing passes them by hand.

Not covered: Spark writing or reading s3:// (its S3 connector jars are not installed
here), and real S3's behaviour where moto's differs.
"""

import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from partition_assets.errors import PartitionLeasedError, PartitionScopeError
from partition_assets.storage import DeltaFormat, leases, replace_partitions
from partition_assets.storage.backfill_staging import incoming_folder, record_staging
from partition_assets.storage.maintenance import vacuum
from partition_assets.storage.partition_scope import PartitionScope
from partition_assets.storage.table_format import VacuumResult
from partition_assets.storage.write_staging import STAGING_DIR, collect_staged, move_into_layout, new_staging_dir
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.webserver import free_port, listening, stop

pytestmark = pytest.mark.slow  # starts a server process

SCHEMA = pa.schema([pa.field("event_id", pa.string()), pa.field("amount", pa.int64()), pa.field("ds", pa.string())])
HOURS = ("2024-01-01-00:00", "2024-01-01-01:00")


# moto's S3 server with its clock LAG_HOURS behind: every object it stores is dated that
# far back, past vacuum's retention (at least an hour). moto's modules import `utcnow` by
# name when a service first loads, so it is replaced before.
LAG_HOURS = 2
LAGGING_MOTO = """
import datetime, sys
import moto.core.utils
now = moto.core.utils.utcnow
moto.core.utils.utcnow = lambda: now() - datetime.timedelta(hours=float(sys.argv[1]))
from moto.server import main
main(sys.argv[2:])
"""


def serve_s3(*command: str) -> Iterator[str]:
    """moto's S3 server (`python *command`) on a free port of 127.0.0.1, in its own process group."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, *command, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(lambda: listening(port), 60, step=0.2, alive=[process])
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    yield from serve_s3("-m", "moto.server")


@pytest.fixture(scope="module")
def lagging_s3_endpoint() -> Iterator[str]:
    yield from serve_s3("-c", LAGGING_MOTO, str(LAG_HOURS))


def new_bucket(endpoint: str, monkeypatch) -> str:
    """A new bucket, with the environment a user sets for an S3-compatible store."""
    for name, value in {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",  # delta-rs refuses plain http otherwise
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    name = f"lake-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name


@pytest.fixture
def bucket(s3_endpoint, monkeypatch) -> str:
    return new_bucket(s3_endpoint, monkeypatch)


@pytest.fixture
def lagging_bucket(lagging_s3_endpoint, monkeypatch) -> str:
    """A bucket whose objects are all LAG_HOURS old."""
    return new_bucket(lagging_s3_endpoint, monkeypatch)


def keys(bucket: str, prefix: str = "") -> set[str]:
    """The keys of the files under `prefix`, listed with boto3 (not through the product's
    filesystem). The empty `folder/` markers pyarrow keeps for folders are no files."""
    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return {item["Key"] for page in pages for item in page.get("Contents", []) if not item["Key"].endswith("/")}


def executor_output(table_uri: str, rows_by_hour: dict[str, list[tuple[str, int]]], folder: str = STAGING_DIR):
    """What Spark's `df.write.partitionBy("ds").parquet(staging)` leaves in a new staging
    folder: one file per partition, in a folder named with the escaped key."""
    fs, staging = new_staging_dir(table_uri, folder)
    for hour, rows in rows_by_hour.items():
        data = pa.table({"event_id": [r[0] for r in rows], "amount": [r[1] for r in rows]})
        escaped = hour.replace(":", "%3A")
        pq.write_table(data, f"{staging}/ds={escaped}/part-00000-{uuid.uuid4()}.c000.snappy.parquet", filesystem=fs)
    return staging


def stage(table_uri: str, rows_by_hour: dict[str, list[tuple[str, int]]], folder: str = STAGING_DIR):
    staging = executor_output(table_uri, rows_by_hour, folder)
    return collect_staged(table_uri, staging, SCHEMA, scope(*rows_by_hour))


def scope(*hours: str) -> PartitionScope:
    return PartitionScope(("ds",), frozenset((hour,) for hour in hours))


def stored(table_uri: str) -> list[tuple[str, int, str]]:
    frame = DeltaTable(table_uri).to_pandas()
    return sorted(zip(frame.event_id, frame.amount, frame.ds))


def test_writes_commit_replace_and_vacuum_through_s3(lagging_bucket):
    bucket = lagging_bucket
    uri = f"s3://{bucket}/lake/events"
    first = stage(uri, {HOURS[0]: [("a", 1), ("b", 2)], HOURS[1]: [("c", 3)]})
    assert {file.partition_values["ds"] for file in first.files} == set(HOURS)
    assert first.num_records == 3

    published = replace_partitions(first, scope(*HOURS))
    assert (published.version, published.files_added, published.files_removed) == (0, 2, 0)
    assert stored(uri) == [("a", 1, HOURS[0]), ("b", 2, HOURS[0]), ("c", 3, HOURS[1])]
    # The files moved from the staging folder into the table's layout; the staging folder is gone.
    assert not keys(bucket, f"lake/events/{STAGING_DIR}/")
    first_files = {k for k in keys(bucket, "lake/events/ds=") if k.endswith(".parquet")}
    assert len(first_files) == 2

    # Replacing one hour removes exactly its old file from the table, not from the bucket.
    second = stage(uri, {HOURS[0]: [("a", 10)]})
    published = replace_partitions(second, scope(HOURS[0]))
    assert (published.version, published.files_added, published.files_removed) == (1, 1, 1)
    assert stored(uri) == [("a", 10, HOURS[0]), ("c", 3, HOURS[1])]
    replaced = {k for k in first_files if f"ds={HOURS[0].replace(':', '%3A')}/" in k}
    assert len(replaced) == 1 and replaced <= keys(bucket)

    # A write killed after its executors wrote: files in a staging folder, never collected;
    # and one killed after moving its files into the layout: unreferenced by the log.
    killed = executor_output(uri, {HOURS[1]: [("z", 99)]})
    assert keys(bucket, killed.split("/", 1)[1])
    moved = stage(uri, {HOURS[1]: [("y", 98)]})
    move_into_layout(moved)
    orphans = {f"lake/events/{file.path}" for file in moved.files}
    assert orphans <= keys(bucket)

    # Every object is LAG_HOURS old; the replaced file's removal is not, so it stays.
    preview = vacuum(uri, retention_hours=1, dry_run=True)
    assert {f"lake/events/{path}" for path in preview.data_files} == orphans
    assert preview.staging_folders == [killed]
    assert orphans <= keys(bucket)  # a dry run deletes nothing

    done = vacuum(uri, retention_hours=1)
    assert (done.data_files, done.staging_folders) == (preview.data_files, preview.staging_folders)
    assert not orphans & keys(bucket)
    assert not keys(bucket, killed.split("/", 1)[1])
    assert replaced <= keys(bucket)
    assert stored(uri) == [("a", 10, HOURS[0]), ("c", 3, HOURS[1])]
    assert vacuum(uri, retention_hours=1) == VacuumResult(data_files=[], staging_folders=[])


def test_rows_outside_the_scope_are_refused_before_anything_moves(bucket):
    uri = f"s3://{bucket}/lake/events"
    staging = executor_output(uri, {HOURS[0]: [("a", 1)], HOURS[1]: [("b", 2)]})
    with pytest.raises(PartitionScopeError):
        collect_staged(uri, staging, SCHEMA, scope(HOURS[0]))
    assert not DeltaTable.is_deltatable(uri)
    assert not keys(bucket, "lake/events/ds=")


def test_concurrent_writers_of_disjoint_partitions_both_land(bucket):
    uri = f"s3://{bucket}/lake/events"
    replace_partitions(stage(uri, {HOURS[0]: [("a", 1)]}), scope(HOURS[0]))
    writes = {hour: stage(uri, {hour: [(f"new-{hour}", 5)]}) for hour in HOURS}
    start = threading.Barrier(len(writes))
    results = {}

    def publish(hour):
        start.wait()
        results[hour] = replace_partitions(writes[hour], scope(hour))

    threads = [threading.Thread(target=publish, args=(hour,)) for hour in HOURS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # S3's conditional put let one commit take version 1; the other retried on top of it.
    assert sorted(result.version for result in results.values()) == [1, 2]
    assert stored(uri) == [(f"new-{HOURS[0]}", 5, HOURS[0]), (f"new-{HOURS[1]}", 5, HOURS[1])]


def test_a_staged_backfill_publishes_in_one_commit_through_s3(bucket):
    uri = f"s3://{bucket}/lake/events"
    replace_partitions(stage(uri, {HOURS[0]: [("old", 1)]}), scope(HOURS[0]))
    delta = DeltaFormat()
    for hour, amount in zip(HOURS, (7, 8)):
        write = stage(uri, {hour: [(f"backfilled-{hour}", amount)]}, incoming_folder("bf1"))
        record_staging(write, "bf1", [(hour,)], {"run_id": f"run-{hour}"}, write.schema)  # the table's schema
    staged = delta.staged(uri, "bf1")
    assert set(staged.files_by_partition) == {(hour,) for hour in HOURS}
    assert stored(uri) == [("old", 1, HOURS[0])]  # readers see the published table only

    expected = delta.partition_files(uri, scope(*HOURS))
    result = delta.publish_staged(uri, "bf1", expected, {})
    assert (result.version, result.files_added, result.files_removed) == (1, 2, 1)
    assert stored(uri) == [(f"backfilled-{HOURS[0]}", 7, HOURS[0]), (f"backfilled-{HOURS[1]}", 8, HOURS[1])]
    assert not keys(bucket, "lake/events/_backfills/bf1/")
    # Publishing again commits nothing.
    assert delta.publish_staged(uri, "bf1", expected, {}).version == 1
    assert DeltaTable(uri).version() == 1


def test_leases_on_s3_refuse_an_overlapping_holder(bucket):
    uri = f"s3://{bucket}/lake/events"
    held = leases.acquire(uri, "backfill-a", "backfill", scope(*HOURS))
    with pytest.raises(PartitionLeasedError):
        leases.acquire(uri, "run-b", "run", scope(HOURS[1]))
    assert [lease.holder for lease in leases.leases(uri)] == ["backfill-a"]
    leases.release(held)
    assert leases.acquire(uri, "run-b", "run", scope(HOURS[1])).holder == "run-b"
    assert keys(bucket, "lake/events/_leases/") == {"lake/events/_leases/run-b.json"}
