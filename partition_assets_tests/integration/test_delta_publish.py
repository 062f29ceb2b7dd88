"""Safe backfills' storage: staged writes no reader sees, overlay reads, one idempotent
publish commit per table, foreign-commit detection, discard, rollback, vacuum and crashes."""

import os
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from partition_assets.errors import CommitError, ForeignCommitError, RollbackError, TableSchemaError
from partition_assets.partitions import daily
from partition_assets.storage import DeltaFormat, PartitionScope, WriteOptions
from partition_assets.storage.backfill_staging import BACKFILLS_DIR, list_staging
from partition_assets.storage.delta.log import publish_app_id
from partition_assets.storage.failpoints import ENV, PUBLISH_POINTS
from partition_assets_tests.support import REPO
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.retention import backdate, files_of_every_version

DAYS = daily("2024-01-01")
D1, D2, D3, D4, D5 = "2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"
BACKFILL = "bf1"
OPTIONS = WriteOptions()
PUBLISHER = """
import sys
from partition_assets.storage import DeltaFormat
DeltaFormat().publish_staged(sys.argv[1], sys.argv[2], None, {})
"""


def scope(*days: str) -> PartitionScope:
    return PartitionScope.for_keys(DAYS, days, ("ds",))


def frame(spark, days: list[str], tag: str, rows_per_day: int = 3):
    """`rows_per_day` rows tagged `tag` in each day, one file per day."""
    day = F.element_at(F.array(*[F.lit(d) for d in days]), (F.col("id") % len(days) + 1).cast("int"))
    return spark.range(rows_per_day * len(days)).select("id", F.lit(tag).alias("tag"), day.alias("ds")).repartition(1)


def write(spark, uri: str, days: list[str], tag: str) -> None:
    DeltaFormat().write(frame(spark, days, tag), uri, scope(*days))


def stage(spark, uri: str, days: list[str], tag: str, backfill_id: str = BACKFILL, rows_per_day: int = 3):
    return DeltaFormat().stage(frame(spark, days, tag, rows_per_day), uri, scope(*days), OPTIONS, backfill_id)


def tags(uri: str) -> dict[str, set[str]]:
    """Each published partition's tags, as a reader outside Spark sees them."""
    return {ds: set(group.tag) for ds, group in DeltaTable(uri).to_pandas().groupby("ds")}


def frame_tags(df) -> dict[str, set[str]]:
    return {ds: set(group.tag) for ds, group in df.toPandas().groupby("ds")}


def rows(uri: str) -> list[tuple]:
    return sorted(DeltaTable(uri).to_pandas()[["id", "tag", "ds"]].itertuples(index=False, name=None))


def names(paths) -> set[str]:
    return {str(path).rsplit("/", 1)[-1] for path in paths}


@pytest.fixture(scope="module")
def three_old_days(spark, tmp_path_factory) -> Path:
    """A published table of three days tagged "old", one file per day, written once for the module."""
    path = tmp_path_factory.mktemp("three_old_days") / "t"
    write(spark, str(path), [D1, D2, D3], "old")
    return path


@pytest.fixture
def table(three_old_days, lake) -> str:
    """A copy of three_old_days in this test's lake, for the test to change."""
    uri = lake / "t"
    shutil.copytree(three_old_days, uri)
    return str(uri)


def test_staged_data_is_invisible_to_readers_of_the_published_table(spark, table):
    version = DeltaTable(table).version()
    result = stage(spark, table, [D1, D2], "new")  # a range: two partitions in one staging

    assert result.version is None and result.rows_by_partition == {(D1,): 3, (D2,): 3}
    assert DeltaTable(table).version() == version
    assert tags(table) == {D1: {"old"}, D2: {"old"}, D3: {"old"}}
    assert frame_tags(DeltaFormat().read(spark, table, None)) == {D1: {"old"}, D2: {"old"}, D3: {"old"}}
    staged = DeltaFormat().staged(table, BACKFILL)
    assert staged is not None and staged.rows_by_partition == {(D1,): 3, (D2,): 3}
    assert all(len(files) == 1 for files in staged.files_by_partition.values())


def test_the_overlay_reads_staged_partitions_and_published_others_opening_only_their_files(spark, table):
    stage(spark, table, [D1, D2], "new")
    staged = DeltaFormat().staged(table, BACKFILL)

    overlay = DeltaFormat().read_overlay(spark, table, scope(D2, D3), BACKFILL)
    assert frame_tags(overlay) == {D2: {"new"}, D3: {"old"}}
    published_d3 = DeltaTable(table).file_uris(file_pruning_predicate=[("ds", "=", D3)])
    expected = names(f.path for f in staged.files_by_partition[(D2,)]) | names(published_d3)
    assert names(overlay.inputFiles()) == expected and len(expected) == 2

    everything = DeltaFormat().read_overlay(spark, table, None, BACKFILL)
    assert frame_tags(everything) == {D1: {"new"}, D2: {"new"}, D3: {"old"}}
    assert len(everything.inputFiles()) == 3
    # Another backfill staged nothing: its overlay is the published table.
    assert frame_tags(DeltaFormat().read_overlay(spark, table, scope(D1), "other")) == {D1: {"old"}}


def test_the_overlay_works_before_the_table_exists(spark, lake):
    uri = str(lake / "new_table")
    assert DeltaFormat().read_overlay(spark, uri, scope(D1), BACKFILL) is None
    stage(spark, uri, [D1, D2], "new")
    overlay = DeltaFormat().read_overlay(spark, uri, scope(D1, D3), BACKFILL)
    assert frame_tags(overlay) == {D1: {"new"}}
    assert overlay.columns == ["id", "tag", "ds"]
    assert not DeltaTable.is_deltatable(uri)


def test_restaging_a_partition_supersedes_its_earlier_staging(spark, table):
    stage(spark, table, [D1, D2], "first")
    stage(spark, table, [D1], "retry", rows_per_day=5)  # a retried node of one partition

    overlay = DeltaFormat().read_overlay(spark, table, None, BACKFILL)
    assert frame_tags(overlay) == {D1: {"retry"}, D2: {"first"}, D3: {"old"}}
    assert DeltaFormat().staged(table, BACKFILL).rows_by_partition == {(D1,): 5, (D2,): 3}
    DeltaFormat().publish_staged(table, BACKFILL, None, {})
    assert tags(table) == {D1: {"retry"}, D2: {"first"}, D3: {"old"}}


def test_staging_validates_like_a_write_and_merges_into_the_overlay(spark, table):
    with pytest.raises(TableSchemaError, match="allow_new_columns"):
        DeltaFormat().stage(frame(spark, [D1], "x").withColumn("extra", F.lit(1)), table, scope(D1), OPTIONS, BACKFILL)
    assert DeltaFormat().staged(table, BACKFILL) is None

    merge = WriteOptions(merge_keys=("id",), allow_new_columns=True)
    upsert = spark.createDataFrame([(0, "merged", 7)], "id long, tag string, extra int")
    DeltaFormat().stage(upsert, table, scope(D1), merge, BACKFILL)
    overlay = DeltaFormat().read_overlay(spark, table, scope(D1, D2), BACKFILL).toPandas()
    d1 = overlay[overlay.ds == D1].set_index("id")
    assert d1.tag.to_dict() == {0: "merged", 3: "old", 6: "old"}
    assert d1.extra.to_dict()[0] == 7 and overlay[overlay.ds == D2].extra.isna().all()

    version = DeltaTable(table).version()
    result = DeltaFormat().publish_staged(table, BACKFILL, None, {})
    # The new column is added by the publish commit itself (its metaData action): one commit.
    assert result.version == version + 1 == DeltaTable(table).version()
    assert "extra" in DeltaTable(table).schema().to_arrow().names


def test_nodes_staging_partitions_of_one_table_at_once_all_land(spark, table):
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda day: stage(spark, table, [day], f"new-{day}"), [D1, D2, D4]))
    assert DeltaFormat().staged(table, BACKFILL).rows_by_partition == {(D1,): 3, (D2,): 3, (D4,): 3}
    DeltaFormat().publish_staged(table, BACKFILL, None, {})
    assert tags(table) == {D1: {f"new-{D1}"}, D2: {f"new-{D2}"}, D3: {"old"}, D4: {f"new-{D4}"}}


def test_publish_is_one_commit_of_every_staged_partition_and_is_idempotent(spark, table):
    fingerprint = DeltaFormat().partition_files(table, scope(D1, D2, D4))
    assert fingerprint[(D4,)] == frozenset() and len(fingerprint[(D1,)]) == 1
    version = DeltaTable(table).version()
    stage(spark, table, [D1], "new")
    stage(spark, table, [D2, D4], "new")  # D4 is a partition the backfill creates

    result = DeltaFormat().publish_staged(table, BACKFILL, fingerprint, {"note": "n"})
    published = DeltaTable(table)
    assert result.version == published.version() == version + 1
    assert (result.files_added, result.files_removed, result.rows) == (3, 2, 9)
    assert tags(table) == {D1: {"new"}, D2: {"new"}, D3: {"old"}, D4: {"new"}}
    assert published.transaction_version(publish_app_id(BACKFILL)) == 1
    assert published.history(1)[0]["note"] == "n"
    assert DeltaFormat().staged(table, BACKFILL) is None  # its manifests went with the publish
    wait_for(lambda: not (Path(table) / BACKFILLS_DIR / BACKFILL).exists(), timeout=30)

    assert DeltaFormat().published_version(table, BACKFILL) == result.version
    assert DeltaFormat().published_version(table, "other") is None
    again = DeltaFormat().publish_staged(table, BACKFILL, fingerprint, {})
    assert again == result
    assert DeltaTable(table).version() == version + 1


def test_publish_creates_a_table_the_backfill_created(spark, lake):
    uri = str(lake / "new_table")
    stage(spark, uri, [D1, D2], "new")
    result = DeltaFormat().publish_staged(uri, BACKFILL, DeltaFormat().partition_files(uri, scope(D1, D2)), {})
    assert result.version == 0 and result.rows == 6
    assert DeltaTable(uri).transaction_version(publish_app_id(BACKFILL)) == 1
    assert tags(uri) == {D1: {"new"}, D2: {"new"}}
    assert DeltaFormat().publish_staged(uri, BACKFILL, None, {}).version == 0
    assert DeltaTable(uri).version() == 0

    DeltaFormat().rollback(uri, BACKFILL, 0)  # every partition was created by the backfill
    assert DeltaTable(uri).to_pandas().empty


def test_a_partition_folder_the_table_lacks_moves_whole_unless_it_holds_a_superseded_file(spark, table):
    """One rename per new partition, not a folder made and a rename per file; a folder that also
    holds a retried node's superseded file, or that the table has, takes its files one by one."""
    stage(spark, table, [D1, D4, D5], "first")
    stage(spark, table, [D5], "retry")  # D5's staged folder holds the superseded file too
    data = Path(table) / BACKFILLS_DIR / BACKFILL / "data"
    staged_folders = {day: (data / f"ds={day}").stat().st_ino for day in (D4, D5)}
    d1_folder = (Path(table) / f"ds={D1}").stat().st_ino

    DeltaFormat().publish_staged(table, BACKFILL, None, {})

    assert tags(table) == {D1: {"first"}, D2: {"old"}, D3: {"old"}, D4: {"first"}, D5: {"retry"}}
    assert (Path(table) / f"ds={D4}").stat().st_ino == staged_folders[D4]  # moved whole
    assert (Path(table) / f"ds={D5}").stat().st_ino != staged_folders[D5]
    assert (Path(table) / f"ds={D1}").stat().st_ino == d1_folder
    logged = names(DeltaTable(table).file_uris())
    for day in (D4, D5):  # the table's folder holds what its log adds, not the superseded file
        assert names((Path(table) / f"ds={day}").iterdir()) <= logged


def test_a_staged_file_deleted_after_the_listing_from_a_folder_moved_whole_refuses_the_commit(spark, table):
    stage(spark, table, [D4, D5], "new")
    listed = list_staging(DeltaFormat().staged(table, BACKFILL))
    [deleted] = (Path(table) / BACKFILLS_DIR / BACKFILL / "data" / f"ds={D4}").glob("*.parquet")
    deleted.unlink()  # by hand, after the publish listed the staging
    version = DeltaTable(table).version()

    with pytest.raises(CommitError, match=f"staged file ds={D4}/{deleted.name} of backfill {BACKFILL} is missing"):
        DeltaFormat().publish_staged(table, BACKFILL, None, {}, listed)
    assert DeltaTable(table).version() == version and tags(table) == {D1: {"old"}, D2: {"old"}, D3: {"old"}}


def test_an_empty_staging_clears_its_partition_when_allowed(spark, table):
    empty = frame(spark, [D2], "none").limit(0)
    DeltaFormat().stage(empty, table, scope(D2), WriteOptions(allow_empty=True), BACKFILL)
    assert DeltaFormat().staged(table, BACKFILL).rows_by_partition == {(D2,): 0}
    assert frame_tags(DeltaFormat().read_overlay(spark, table, None, BACKFILL)) == {D1: {"old"}, D3: {"old"}}
    DeltaFormat().publish_staged(table, BACKFILL, None, {})
    assert tags(table) == {D1: {"old"}, D3: {"old"}}


def test_an_unpartitioned_table_stages_publishes_and_rolls_back_whole(spark, lake):
    uri = str(lake / "flat")
    DeltaFormat().write(spark.range(4).select("id", F.lit("old").alias("tag")), uri, None)
    before = sorted(DeltaTable(uri).to_pandas().itertuples(index=False, name=None))
    fingerprint = DeltaFormat().partition_files(uri, None)
    DeltaFormat().stage(spark.range(2).select("id", F.lit("new").alias("tag")), uri, None, OPTIONS, BACKFILL)
    assert set(DeltaFormat().read_overlay(spark, uri, None, BACKFILL).toPandas().tag) == {"new"}

    published = DeltaFormat().publish_staged(uri, BACKFILL, fingerprint, {}).version
    assert set(DeltaTable(uri).to_pandas().tag) == {"new"}
    DeltaFormat().rollback(uri, BACKFILL, published)
    assert sorted(DeltaTable(uri).to_pandas().itertuples(index=False, name=None)) == before


def test_a_foreign_commit_to_a_staged_partition_refuses_the_publish_and_loses_nothing(spark, table):
    fingerprint = DeltaFormat().partition_files(table, scope(D1, D2))
    stage(spark, table, [D1, D2], "new")
    write(spark, table, [D2], "foreign")  # a writer outside the backfill
    version = DeltaTable(table).version()

    with pytest.raises(ForeignCommitError) as refused:
        DeltaFormat().publish_staged(table, BACKFILL, fingerprint, {})
    message = str(refused.value)
    assert "ds=2024-01-02" in message and "ds=2024-01-01" not in message and table in message
    assert "nothing was published" in message and "--force" in message
    assert DeltaTable(table).version() == version
    assert tags(table) == {D1: {"old"}, D2: {"foreign"}, D3: {"old"}}
    assert DeltaFormat().staged(table, BACKFILL).rows_by_partition == {(D1,): 3, (D2,): 3}
    assert frame_tags(DeltaFormat().read_overlay(spark, table, None, BACKFILL)) == {
        D1: {"new"},
        D2: {"new"},
        D3: {"old"},
    }


def test_discard_deletes_the_staging_and_leaves_the_table(spark, table):
    version = DeltaTable(table).version()
    stage(spark, table, [D1, D2], "new")
    stage(spark, table, [D1], "retry")
    assert DeltaFormat().discard_staged(table, BACKFILL) == 3  # the superseded file too
    assert DeltaFormat().staged(table, BACKFILL) is None
    assert not (Path(table) / BACKFILLS_DIR / BACKFILL).exists()
    assert DeltaFormat().discard_staged(table, BACKFILL) == 0
    assert DeltaTable(table).version() == version and tags(table) == {D1: {"old"}, D2: {"old"}, D3: {"old"}}


def publish_backfill(spark, uri: str) -> int:
    """Stages D1 (replaced) and D4 (created) as BACKFILL and publishes them."""
    stage(spark, uri, [D1, D4], "new")
    return DeltaFormat().publish_staged(uri, BACKFILL, None, {}).version


def test_rollback_restores_the_previous_content_and_removes_created_partitions(spark, table):
    before = rows(table)
    published = publish_backfill(spark, table)

    result = DeltaFormat().rollback(table, BACKFILL, published)
    assert result.version == published + 1 == DeltaTable(table).version()
    assert rows(table) == before
    assert (result.files_added, result.files_removed, result.rows_by_partition) == (1, 2, {(D1,): 3})
    assert DeltaFormat().rollback(table, BACKFILL, published) == result  # idempotent
    assert DeltaTable(table).version() == published + 1


def test_rollback_refuses_a_version_that_is_not_the_backfills_publish(spark, table):
    published = publish_backfill(spark, table)
    with pytest.raises(RollbackError, match="not backfill bf1's publish commit"):
        DeltaFormat().rollback(table, BACKFILL, published - 1)
    assert DeltaTable(table).version() == published


def test_rollback_refuses_after_a_later_commit_to_its_partitions_unless_forced(spark, table):
    before = rows(table)
    published = publish_backfill(spark, table)
    write(spark, table, [D1], "later")

    with pytest.raises(RollbackError, match=r"ds=2024-01-01\] .* changed after backfill bf1"):
        DeltaFormat().rollback(table, BACKFILL, published)
    assert DeltaTable(table).version() == published + 1
    assert tags(table)[D1] == {"later"}

    DeltaFormat().rollback(table, BACKFILL, published, force=True)
    assert rows(table) == before


def test_rollback_refuses_when_vacuum_deleted_the_files_to_restore(spark, table):
    published = publish_backfill(spark, table)
    # What a vacuum without partition_assets' one-hour minimum (delta-rs's own at 0 h) would
    # delete: the files the publish just replaced. Deleted by hand, so the log gains no commit.
    for path in DeltaTable(table).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True):
        (Path(table) / path).unlink()
    with pytest.raises(RollbackError) as refused:
        DeltaFormat().rollback(table, BACKFILL, published)
    assert "1 of the 1 files" in str(refused.value) and "retention" in str(refused.value)
    assert DeltaTable(table).version() == published


def test_vacuum_keeps_the_staged_files_of_a_live_backfill(spark, table):
    stage(spark, table, [D1], "first")
    stage(spark, table, [D1], "retry")
    backdate(Path(table), 2)  # past the retention: only the manifests keep the staged files
    vacuumed = DeltaFormat().vacuum(table, retention_hours=1, dry_run=False)
    assert not any(BACKFILLS_DIR in path for path in vacuumed.data_files + vacuumed.staging_folders)
    assert frame_tags(DeltaFormat().read_overlay(spark, table, scope(D1), BACKFILL)) == {D1: {"retry"}}
    DeltaFormat().publish_staged(table, BACKFILL, None, {})
    assert tags(table)[D1] == {"retry"}


def parquet_on_disk(uri: str) -> set[str]:
    return {str(p) for p in Path(uri).rglob("*.parquet") if BACKFILLS_DIR not in p.parts}


@pytest.mark.parametrize("point", PUBLISH_POINTS)
def test_a_publish_killed_at_a_failpoint_converges_on_the_next_call(spark, table, point):
    fingerprint = DeltaFormat().partition_files(table, scope(D1, D2))
    stage(spark, table, [D1, D2], "new")
    version = DeltaTable(table).version()

    env = {**{k: v for k, v in os.environ.items() if k != ENV}, ENV: point}
    publisher = subprocess.run(
        [sys.executable, "-c", PUBLISHER, table, BACKFILL],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert publisher.returncode == -signal.SIGKILL, publisher.stderr[-2000:]
    committed = point == "publish_committed"
    assert DeltaTable(table).version() == version + committed
    assert tags(table)[D1] == ({"new"} if committed else {"old"})
    # Files the killed publish moved into the layout survive a vacuum while the manifest lives;
    # the folder of a backfill whose publish committed goes.
    backdate(Path(table), 2)
    DeltaFormat().vacuum(table, retention_hours=1, dry_run=False)
    assert (Path(table) / BACKFILLS_DIR / BACKFILL).exists() == (not committed)

    result = DeltaFormat().publish_staged(table, BACKFILL, None if committed else fingerprint, {})
    assert result.version == version + 1 == DeltaTable(table).version()
    assert tags(table) == {D1: {"new"}, D2: {"new"}, D3: {"old"}}
    assert not (Path(table) / BACKFILLS_DIR).exists() or not any((Path(table) / BACKFILLS_DIR).iterdir())
    backdate(Path(table), 2)
    DeltaFormat().vacuum(table, retention_hours=1, dry_run=False)
    # Every file no version references went; the ones the publish replaced stay for the
    # retention, which starts at their removal.
    assert parquet_on_disk(table) == files_of_every_version(table)
