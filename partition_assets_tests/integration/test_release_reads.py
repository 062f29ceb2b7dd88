"""Readers of a lake's releases outside Dagster (issue 42): the docs' recipes (delta-rs/pandas,
DuckDB), the release log read by DuckDB, `partition-assets release show|list`, and the bad
inputs (an unknown release, a table not in the lake, a release older than the retention),
each refused writing nothing. Then the release log's holes of issue 50: publishes that
overlap, two hosts' clocks apart, a publish landing inside a reader's pin, and concurrent
compactions. Real Delta tables written by delta-rs, real processes; no Spark."""

import json
import runpy
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from partition_assets.cli.main import main
from partition_assets.errors import ReleaseExpiredError, TableNotFoundError, UnknownReleaseError
from partition_assets.storage import release_log, release_reads
from partition_assets.storage.release_log import append_release, begin_release, release_log_uri
from partition_assets.storage.release_reads import pinned_versions, read_tables
from partition_assets_tests.support import REPO
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.racing import racing_pool
from partition_assets_tests.support.readers import duckdb_connection

RECIPES = REPO / "docs" / "recipes"
TABLES = ("payouts_daily", "payouts_quarterly")
DAY = "2024-01-01"


def write(lake: Path, table: str, tag: str) -> int:
    write_deltalake(str(lake / table), pa.table({"ds": [DAY], "tag": [tag]}), mode="overwrite")
    return DeltaTable(str(lake / table)).version()


@pytest.fixture
def half_published(lake) -> Path:
    """Two tables released as v1 (one release), then a publish begun that committed the first only."""
    begin_release(str(lake), "publish", "bf1", [str(lake / table) for table in TABLES])
    versions = {str(lake / table): write(lake, table, "v1") for table in TABLES}
    append_release(str(lake), "publish", "bf1", versions)
    begin_release(str(lake), "publish", "bf2", [str(lake / table) for table in TABLES])
    write(lake, "payouts_daily", "v2")
    return lake


def recipe_output(capsys, recipe: str, *args: str) -> list[dict]:
    argv = sys.argv
    sys.argv = [recipe, *args]
    try:
        runpy.run_path(str(RECIPES / recipe), run_name="__main__")
    finally:
        sys.argv = argv
    return json.loads(capsys.readouterr().out)


def test_the_recipes_join_one_release_where_the_raw_latest_versions_mix(half_published, capsys, tmp_path):
    lake = half_published
    raw = [DeltaTable(str(lake / table)).to_pandas().tag.tolist() for table in TABLES]
    assert raw == [["v2"], ["v1"]]  # what a reader of the latest versions joins

    joined = recipe_output(capsys, "read_release_pandas.py", str(lake))
    assert [(row["tag_daily"], row["tag_quarterly"]) for row in joined] == [("v1", "v1")]

    assert main(["release", "show", "--json", "--lake", str(lake)]) == 0
    pin_file = tmp_path / "release.json"
    pin_file.write_text(capsys.readouterr().out)
    joined = recipe_output(capsys, "read_release_duckdb.py", str(pin_file))
    assert [(row["tag_daily"], row["tag_quarterly"]) for row in joined] == [("v1", "v1")]

    # The log itself, read by DuckDB: the releases, one row per table.
    releases = (
        duckdb_connection()
        .execute(
            f"SELECT release_id, \"table\", version FROM delta_scan('{release_log_uri(str(lake))}') "
            "WHERE kind = 'release' ORDER BY \"table\""
        )
        .fetchall()
    )
    [release_id] = {row[0] for row in releases}
    assert [row[1:] for row in releases] == [("payouts_daily", 0), ("payouts_quarterly", 0)]
    assert main(["release", "list", "--lake", str(lake)]) == 0
    listed = capsys.readouterr().out
    assert release_id in listed and "publish bf1: payouts_daily v0, payouts_quarterly v0" in listed

    # The second publish released: every reader sees the new versions.
    write(lake, "payouts_quarterly", "v2")
    pinned_before = DeltaTable(release_log_uri(str(lake))).version()
    append_release(str(lake), "publish", "bf2", {str(lake / table): 1 for table in TABLES})
    assert [tag_of(frame) for frame in read_tables(str(lake), TABLES).values()] == ["v2", "v2"]
    # A reader pinned before that release (a run started then) keeps the release it started with.
    pinned = read_tables(str(lake), TABLES, log_version=pinned_before)
    assert [tag_of(frame) for frame in pinned.values()] == ["v1", "v1"]
    assert pinned_versions(str(lake), TABLES, release=release_id).versions == dict.fromkeys(TABLES, 0)


def tag_of(frame: pa.Table) -> str:
    [tag] = frame.column("tag").to_pylist()
    return tag


def test_bad_inputs_are_refused_naming_the_value_and_writing_nothing(half_published, capsys):
    lake = str(half_published)
    log_version = DeltaTable(release_log_uri(lake)).version()

    with pytest.raises(UnknownReleaseError, match="no release 'r-000000000000'.*release list.*Nothing was"):
        read_tables(lake, TABLES, release="r-000000000000")
    with pytest.raises(TableNotFoundError, match="no table payouts_yearly in the lake.*Nothing was"):
        pinned_versions(lake, ["payouts_yearly", *TABLES])
    assert main(["release", "show", "--lake", lake, "--table", "payouts_yearly"]) == 2
    assert "no table payouts_yearly" in capsys.readouterr().err

    # A release whose versions vacuum removed: older than the tables' retention.
    log = DeltaTable(release_log_uri(lake)).to_pandas()
    [release_id] = set(log[log.kind == "release"].release_id)
    write(half_published, "payouts_quarterly", "v3")
    DeltaTable(str(half_published / "payouts_daily")).vacuum(0, dry_run=False, enforce_retention_duration=False)
    with pytest.raises(ReleaseExpiredError, match="version 0 of table payouts_daily.*retention.*Nothing was"):
        read_tables(lake, TABLES, release=release_id)
    assert DeltaTable(release_log_uri(lake)).version() == log_version  # nothing written to the log


def through_library(lake: Path) -> tuple[str, ...]:
    """The tables' tags as `read_tables` joins them."""
    return tuple(tag_of(frame) for frame in read_tables(str(lake), TABLES).values())


def shown_release(lake: Path, capsys) -> dict:
    """The release `partition-assets release show --json` names as current."""
    capsys.readouterr()
    assert main(["release", "show", "--json", "--lake", str(lake)]) == 0
    return json.loads(capsys.readouterr().out)["release"]


def publish(lake: Path, backfill: str, tag: str, tables: tuple[str, ...] = TABLES) -> str:
    """A whole publish of `tables` by `backfill`: its begin, one commit per table, its release."""
    begin_release(str(lake), "publish", backfill, [str(lake / table) for table in tables])
    return append_release(str(lake), "publish", backfill, {str(lake / t): write(lake, t, tag) for t in tables})


def test_a_release_overlapping_an_open_publish_is_read_whole_or_not_at_all(lake, capsys):
    """Issue 50, hole 2: Y's publish begins on payouts_daily and stays open (killed before its
    commit); X then publishes both tables and is released. The old code held only Y's table:
    it joined X's payouts_quarterly with pre-X payouts_daily, and named X's release current."""
    first = publish(lake, "bf0", "v1")
    begin_release(str(lake), "publish", "bfY", [str(lake / "payouts_daily")])
    publish(lake, "bfX", "X")

    assert through_library(lake) == ("v1", "v1")
    assert shown_release(lake, capsys)["release_id"] == first

    # Y finishes: X and Y are read whole.
    last = append_release(str(lake), "publish", "bfY", {str(lake / "payouts_daily"): write(lake, "payouts_daily", "Y")})
    assert through_library(lake) == ("Y", "X")
    assert shown_release(lake, capsys)["release_id"] == last


class ClockAhead(datetime):
    """The clock of a host 10 minutes ahead of this one."""

    @classmethod
    def now(cls, tz=None):  # type: ignore[override]
        return datetime.now(tz) + timedelta(minutes=10)


def test_a_publish_begun_on_a_host_whose_clock_is_ahead_is_released_by_another(lake, monkeypatch):
    """Issue 50, hole 11: host A (clock 10 minutes ahead) begins a publish and dies after its
    first table; host B resumes and releases it. The old code compared the records' clocks:
    A's begin looked later than B's release, so readers read both tables before it for good."""
    publish(lake, "bf0", "v1")
    uris = [str(lake / table) for table in TABLES]
    with monkeypatch.context() as host_a:
        host_a.setattr(release_log, "datetime", ClockAhead)
        begin_release(str(lake), "publish", "bf1", uris)
    daily = write(lake, "payouts_daily", "v2")
    assert through_library(lake) == ("v1", "v1")

    begin_release(str(lake), "publish", "bf1", uris[1:])  # host B: the table still to publish
    quarterly = write(lake, "payouts_quarterly", "v2")
    append_release(str(lake), "publish", "bf1", dict(zip(uris, (daily, quarterly), strict=True)))

    assert through_library(lake) == ("v2", "v2")


def test_a_publish_landing_between_the_version_lookups_and_the_log_read_is_not_read_half(lake, monkeypatch):
    """Issue 50, the pin window: publish X begins and commits payouts_daily just before the
    reader looks it up, and commits payouts_quarterly and is released just after it looked that
    one up. The old code read the log first (no X in it), so it read X's daily with pre-X
    quarterly; looking up first, X is in the log the reader reads, past its quarterly version."""
    publish(lake, "bfO", "v1")
    uris = [str(lake / table) for table in TABLES]
    look_up = release_reads.table_version

    def interleaved(uri: str) -> int | None:
        """The reader's lookup, with X's commits landing around it."""
        if uri == uris[0]:
            begin_release(str(lake), "publish", "bfX", uris)
            write(lake, "payouts_daily", "X")
            return look_up(uri)
        version = look_up(uri)
        x_versions = {uris[0]: DeltaTable(uris[0]).version(), uris[1]: write(lake, "payouts_quarterly", "X")}
        append_release(str(lake), "publish", "bfX", x_versions)
        return version

    with monkeypatch.context() as racing:
        racing.setattr(release_reads, "table_version", interleaved)
        assert through_library(lake) == ("v1", "v1")
    assert through_library(lake) == ("X", "X")


def append_releases(lake: str, writer: int, count: int, start: str) -> None:
    """`count` releases of one table each, once the file `start` exists (all writers at once)."""
    wait_for(Path(start).exists, timeout=60, step=0.01)
    for number in range(count):
        append_release(lake, "publish", f"bf-{writer}-{number}", {f"{lake}/t{writer}": number})


@pytest.mark.parametrize("writers", [2, 4])
def test_concurrent_compactions_of_the_release_log_leave_one_row_per_record(lake, tmp_path, writers):
    """Issue 50, hole 15: every release compacts the log once it has more than 16 files; with
    several writers, compactions run at once. The old code (delta-rs's optimize) let each commit,
    each adding a copy of every row (168 rows for 100 records with 2 writers)."""
    count = 24
    start = tmp_path / "start"
    with racing_pool(writers, __name__) as pool:
        done = [pool.submit(append_releases, str(lake), writer, count, str(start)) for writer in range(writers)]
        start.touch()
        for future in done:
            future.result()

    log = DeltaTable(release_log_uri(str(lake)))
    ids = log.to_pyarrow_dataset().to_table(use_threads=False).column("release_id").to_pylist()
    assert (len(ids), len(set(ids))) == (writers * count, writers * count)  # rows, records
    assert len(log.file_uris()) < writers * count  # the log was compacted
