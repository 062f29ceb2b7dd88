"""Readers of a lake's releases outside Dagster (issue 42): the docs' recipes (delta-rs/pandas,
DuckDB), the release log read by DuckDB, `partition-assets release show|list`, and the bad
inputs (an unknown release, a table not in the lake, a release older than the retention),
each refused writing nothing. Real Delta tables written by delta-rs; no Spark."""

import json
import runpy
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from partition_assets.cli.main import main
from partition_assets.errors import ReleaseExpiredError, TableNotFoundError, UnknownReleaseError
from partition_assets.storage.release_log import append_release, begin_release, release_log_uri
from partition_assets.storage.release_reads import pinned_versions, read_tables
from partition_assets_tests.support import REPO
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
