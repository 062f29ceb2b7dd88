"""A writer killed with SIGKILL at any point leaves the previous version whole and readable;
a re-run converges; `vacuum` (what `partition-assets vacuum` calls) removes what the killed write left."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from partition_assets import vacuum
from partition_assets.partitions import daily
from partition_assets.storage import DeltaFormat, PartitionScope
from partition_assets.storage.failpoints import ENV, WRITE_POINTS
from partition_assets_tests.support import REPO
from partition_assets_tests.support.retention import backdate, files_of_every_version

KEYS = ["2024-01-01", "2024-01-02"]
WRITER = """
import sys
from partition_assets.spark import SparkResource
from partition_assets_tests.integration.test_delta_write import write
write(SparkResource.from_env().spark_session, sys.argv[1], sys.argv[2], int(sys.argv[3]))
"""


def write(spark, uri: str, tag: str, rows: int = 40) -> None:
    """Replaces two daily partitions with `rows` rows tagged `tag`, in 4 files per partition."""
    scope = PartitionScope.for_keys(daily("2024-01-01"), KEYS, ("ds",))
    frame = (
        spark.range(rows)
        .select(
            "id",
            F.lit(tag).alias("tag"),
            F.when(F.col("id") % 2 == 0, KEYS[0]).otherwise(KEYS[1]).alias("ds"),
        )
        .repartition(4)
    )
    DeltaFormat().write(frame, uri, scope)


def spawn_writer(uri: str, tag: str, failpoint: str | None = None, rows: int = 40) -> subprocess.Popen:
    import os

    env = {k: v for k, v in os.environ.items() if k != ENV}
    if failpoint:
        env[ENV] = failpoint
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, uri, tag, str(rows)],
        env=env,
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )


def tags_by_partition(uri: str) -> dict[str, set[str]]:
    frame = DeltaTable(uri).to_pandas()
    assert len(frame) == 40
    return {ds: set(group.tag) for ds, group in frame.groupby("ds")}


def parquet_on_disk(uri: str) -> set[str]:
    return {str(p) for p in Path(uri).rglob("*.parquet")}


def assert_converges_and_vacuums(spark, uri: str) -> None:
    write(spark, uri, "rerun")
    assert tags_by_partition(uri) == {k: {"rerun"} for k in KEYS}
    backdate(Path(uri), 2)  # what the killed write left, past the retention
    vacuum(uri, retention_hours=1)
    # Every file no version references went; the replaced ones stay for the retention,
    # which starts at their removal.
    assert parquet_on_disk(uri) == files_of_every_version(uri)
    assert not list((Path(uri) / "_staging").glob("*"))
    assert tags_by_partition(uri) == {k: {"rerun"} for k in KEYS}


@pytest.mark.slow
@pytest.mark.parametrize("point", WRITE_POINTS)
def test_a_writer_killed_at_a_failpoint_leaves_one_whole_version(spark, lake, point):
    uri = str(lake / "t")
    write(spark, uri, "old")
    version = DeltaTable(uri).version()

    writer = spawn_writer(uri, "new", failpoint=point)
    assert writer.wait(timeout=300) == -signal.SIGKILL, writer.stderr.read()[-2000:]

    if point == "committed":  # the commit landed before the kill: the new version, whole
        assert DeltaTable(uri).version() == version + 1
        assert tags_by_partition(uri) == {k: {"new"} for k in KEYS}
    else:
        assert DeltaTable(uri).version() == version
        assert tags_by_partition(uri) == {k: {"old"} for k in KEYS}
    if point in ("publishing", "published", "committing"):
        assert parquet_on_disk(uri) > set(DeltaTable(uri).file_uris())  # orphans, unseen
    assert_converges_and_vacuums(spark, uri)


@pytest.mark.slow
def test_a_writer_killed_while_spark_writes_leaves_the_previous_version(spark, lake):
    uri = str(lake / "t")
    write(spark, uri, "old")
    version = DeltaTable(uri).version()

    # Enough rows that Spark is still writing when the staging folder shows up.
    writer = spawn_writer(uri, "new", rows=3_000_000)
    staging = Path(uri) / "_staging"
    deadline = time.monotonic() + 120
    while not any(staging.glob("*/_temporary")) and time.monotonic() < deadline:
        time.sleep(0.01)
    writer.send_signal(signal.SIGKILL)
    assert writer.wait(timeout=60) == -signal.SIGKILL

    assert DeltaTable(uri).version() == version
    assert tags_by_partition(uri) == {k: {"old"} for k in KEYS}
    # The dead client's Spark job runs on in the server until it finishes or aborts.
    deadline = time.monotonic() + 120
    while any(staging.glob("*/_temporary")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert_converges_and_vacuums(spark, uri)
