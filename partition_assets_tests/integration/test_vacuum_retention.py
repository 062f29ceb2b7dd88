"""Vacuum's retention window (audit issue 21, hole 6): one under an hour is refused,
through the Python API, each format's `vacuum` and the CLI, before anything is deleted;
a fractional one is never truncated, so nothing younger than asked is deleted. The versions
readers of the lake's release log hold stay readable past it (issue 50, hole 12).

The tables are real Delta tables on the local filesystem, written without Spark: files
in a staging folder as Spark's executors leave them, then the product's own steps
(collecting, moving into the layout, committing).
"""

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from partition_assets.cli.main import main
from partition_assets.errors import PartitionAssetsError, ReleaseExpiredError
from partition_assets.storage import DeltaFormat, PartitionScope
from partition_assets.storage.delta.tables import table_version
from partition_assets.storage.delta.vacuum import vacuum_table
from partition_assets.storage.delta.write import replace_partitions
from partition_assets.storage.maintenance import vacuum
from partition_assets.storage.release_log import append_release, begin_release, release_log_uri
from partition_assets.storage.release_reads import read_tables
from partition_assets.storage.write_staging import (
    STAGING_DIR,
    StagedWrite,
    collect_staged,
    move_into_layout,
    new_staging_dir,
)
from partition_assets_tests.support.retention import backdate, backdate_removes

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("ds", pa.string())])
D1, D2 = "2024-01-01", "2024-01-02"
REFUSED = ["0.5", "0", "0.999", "-1", "nan", "inf"]


def scope(day: str) -> PartitionScope:
    return PartitionScope(("ds",), frozenset({(day,)}))


def staged(table_uri: str, day: str, ids: list[int]) -> StagedWrite:
    """A write of `ids` into `day`, as Spark's executors leave it in a new staging folder."""
    fs, staging = new_staging_dir(table_uri)
    folder = f"{staging}/ds={day}"
    fs.create_dir(folder)
    pq.write_table(pa.table({"id": ids}), f"{folder}/part-00000-{uuid.uuid4()}.c000.snappy.parquet", filesystem=fs)
    return collect_staged(table_uri, staging, SCHEMA, scope(day))


def in_flight(table_uri: str, day: str) -> list[Path]:
    """The files of a concurrent write that has moved them into the table's layout and
    not committed yet (as `_publish` between `move_into_layout` and its commit)."""
    write = staged(table_uri, day, [3])
    move_into_layout(write)
    return [Path(table_uri) / file.path for file in write.files]


@pytest.fixture
def table(lake) -> str:
    """A Delta table with one committed version."""
    uri = str(lake / "t")
    replace_partitions(staged(uri, D1, [1, 2]), scope(D1))
    return uri


def everything_under(table_uri: str) -> set[Path]:
    return set(Path(table_uri).rglob("*"))


def refusal(call) -> PartitionAssetsError | None:
    """The error `call()` raised, or None when it ran."""
    try:
        call()
    except PartitionAssetsError as error:
        return error
    return None


@pytest.mark.parametrize("vacuum_of", [vacuum, DeltaFormat().vacuum], ids=["maintenance.vacuum", "DeltaFormat.vacuum"])
def test_a_sub_hour_vacuum_is_refused_and_spares_a_concurrent_writers_uncommitted_file(table, vacuum_of):
    moved = in_flight(table, D2)

    refused = refusal(lambda: vacuum_of(table, 0.5, False))

    # The file first: the original code truncated 0.5 h to 0 and deleted it, so the
    # writer's commit would have referenced a missing file.
    assert all(path.exists() for path in moved), f"vacuum(0.5 h) deleted a write in flight: {moved}"
    assert refused is not None and isinstance(refused, ValueError)
    assert all(part in str(refused) for part in ("0.5", "at least 1", "Pass 1 or more", "nothing was deleted"))
    # An hour is accepted; the writer's file is younger, so it stays.
    assert vacuum_of(table, 1, False).data_files == []
    assert all(path.exists() for path in moved)


@pytest.mark.parametrize("hours", REFUSED)
def test_every_retention_under_an_hour_or_not_finite_is_refused_before_deleting(table, hours):
    # Files a killed write left two hours ago: any retention the vacuum ran with deletes them.
    in_flight(table, D2)
    backdate(Path(table), 2)
    before = everything_under(table)

    refused = refusal(lambda: vacuum(table, float(hours)))

    assert everything_under(table) == before
    assert refused is not None and "nothing was deleted" in str(refused)


@pytest.mark.parametrize(
    ("hours", "message"),
    [(hours, f"vacuum retention {float(hours)!r} hours is refused") for hours in REFUSED]
    + [(text, f"{text!r} is not a number of hours") for text in ("abc", "")],
)
def test_the_cli_refuses_a_retention_under_an_hour_exits_2_and_deletes_nothing(table, hours, message, capsys):
    in_flight(table, D2)
    (Path(table) / STAGING_DIR / "killed").mkdir(parents=True)
    backdate(Path(table), 2)
    before = everything_under(table)
    capsys.readouterr()

    try:
        code = main(["vacuum", table, "--retention-hours", hours])
    except SystemExit as exit_:  # argparse refuses a malformed flag itself
        code = exit_.code
    stderr = capsys.readouterr().err

    assert everything_under(table) == before, f"vacuum --retention-hours {hours!r} deleted files"
    assert code == 2, stderr
    assert "Traceback" not in stderr
    assert f"argument --retention-hours: {message}" in stderr, stderr


def test_a_fractional_retention_is_not_truncated(table):
    # Two killed writes' files and staging folders, aged around the 1.5 h asked for.
    younger, older = in_flight(table, D2), in_flight(table, D2)
    for path in younger:
        backdate(path, 1.25)
    for path in older:
        backdate(path, 2.5)
    staging = Path(table) / STAGING_DIR
    recent, stale = staging / "recent", staging / "stale"
    for folder, hours in ((recent, 1.25), (stale, 1.75)):
        (folder / "ds=2024-01-02").mkdir(parents=True)
        (folder / "ds=2024-01-02" / "part-0.parquet").write_bytes(b"")
        backdate(folder, hours)

    done = vacuum(table, 1.5)

    # 1.25 h is younger than 1.5 h: the original code truncated 1.5 h to 1 h and deleted it.
    assert all(path.exists() for path in younger), "a file 1.25 h old was deleted by a 1.5 h retention"
    assert not any(path.exists() for path in older)
    assert sorted(done.data_files) == sorted(str(path.relative_to(table)) for path in older)
    # Staging folders are aged to the second.
    assert recent.exists() and not stale.exists()
    assert [Path(folder).name for folder in done.staging_folders] == ["stale"]


def test_a_folder_under_backfills_that_no_backfill_id_names_is_left_alone(table):
    """A folder made by hand under `_backfills/` is no backfill's staging: vacuum used to stop
    on it with BackfillIdError (its name cannot be an id) and vacuumed nothing."""
    by_hand = Path(table) / "_backfills" / "notes by hand"
    by_hand.mkdir(parents=True)
    backdate(by_hand, hours=3)
    vacuum(table, retention_hours=1)
    assert by_hand.is_dir()


def test_vacuum_keeps_the_version_readers_hold_while_a_publish_is_open_past_the_retention(table, lake):
    """Issue 50, hole 12: a publish committed the table (version 1) and was left open two hours,
    so readers read version 0, whose files the commit replaced. The old vacuum deleted them and
    every read by release failed with ReleaseExpiredError."""
    root = str(lake)
    begin_release(root, "publish", "bf1", [table])
    replace_partitions(staged(table, D1, [7]), scope(D1))  # the publish's commit
    backdate(Path(table), 2)
    backdate_removes(table, 1, 2)

    vacuum(table, 1)
    assert read_tables(root, ["t"])["t"].column("id").to_pylist() == [1, 2]

    # Released now: a run pinned before the release still reads version 0, within the retention.
    pinned = table_version(release_log_uri(root))
    append_release(root, "publish", "bf1", {table: 1})
    vacuum(table, 1)
    assert read_tables(root, ["t"], log_version=pinned)["t"].column("id").to_pylist() == [1, 2]
    assert read_tables(root, ["t"])["t"].column("id").to_pylist() == [7]
    # Once the release is older than the retention, the replaced files go like any other.
    vacuum_table(table, 1, dry_run=False, now=datetime.now(UTC) + timedelta(hours=2))
    with pytest.raises(ReleaseExpiredError, match="version 0 of table t"):
        read_tables(root, ["t"], log_version=pinned)
