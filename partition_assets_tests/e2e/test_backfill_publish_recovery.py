"""A staged backfill's publish and rollback when their storage was changed under them, end to
end through `partition-assets backfill` on real Spark, Delta tables and a Dagster instance: a
table whose staging vanished fails the publish naming it before any commit; rollback finds
what was published in the tables' logs whatever the record says; a publish killed after moving
its files, then vacuumed as Delta users do, leaves `publishing` by discard."""

import shutil
import signal
from pathlib import Path

import pytest
from deltalake import DeltaTable

from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.storage.backfill_staging import BACKFILLS_DIR
from partition_assets.storage.failpoints import ENV as FAILPOINT_ENV
from partition_assets_tests.support.cli_runs import backfill_id, ok
from partition_assets_tests.support.locations import safe_defs
from partition_assets_tests.support.records import recorded_backfill
from partition_assets_tests.support.retention import backdate

pytestmark = pytest.mark.slow

NEW_CONTENT = {safe_defs.FACTOR_ENV: "1.2"}
WEEK = 168  # hours: Delta's default vacuum retention


def unreferenced_files(table: Path) -> set[Path]:
    """The table's data files outside backfills' folders that its log does not reference."""
    referenced = {Path(uri) for uri in DeltaTable(str(table)).file_uris()}
    return {p for p in table.rglob("*.parquet") if BACKFILLS_DIR not in p.parts and p not in referenced}


def test_a_table_whose_staging_vanished_fails_the_publish_naming_it_and_rollback_reads_the_logs(
    published_2_days, tmp_path
):
    house = published_2_days
    before, versions = house.contents(), house.versions()
    bid = backfill_id(ok(house.backfill("2024-01-01", "2024-01-02", "--approval", "required", **NEW_CONTENT)))
    staging = Path(house.uri("revenue")) / BACKFILLS_DIR / bid
    kept = shutil.move(staging, tmp_path / "kept")

    refused = house.cli("approve", bid, "--by", "ana")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"the staged data of revenue ({house.uri('revenue')})" in refused.stderr
    assert "nothing was committed to any table" in refused.stderr
    assert house.contents() == before and house.versions() == versions  # orders, upstream, was not published
    assert recorded_backfill(house.home, bid).status == BackfillStatus.AWAITING_APPROVAL

    # Published, then its record loses the versions (as two approvals at once did): rollback reads the logs.
    shutil.move(kept, staging)
    ok(house.cli("approve", bid, "--by", "ana"))
    assert house.contents() != before
    with house.instance() as instance:
        record = BackfillStore(instance).load(bid)
        record.published_versions = {}
        record.save()
    rolled_back = ok(house.cli("rollback", bid))
    assert "no tables" not in rolled_back and all(table in rolled_back for table in ("orders", "revenue"))
    assert house.contents() == before


def test_a_publish_killed_after_moving_its_files_then_vacuumed_leaves_publishing_by_discard(published_2_days):
    house = published_2_days
    before, versions = house.contents(), house.versions()
    killed = house.start_backfill("2024-01-01", "2024-01-02", **NEW_CONTENT, **{FAILPOINT_ENV: "publish_committing"})
    killed.wait(timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.read() if killed.stderr else ""
    bid = house.newest_backfill()
    assert recorded_backfill(house.home, bid).status == BackfillStatus.PUBLISHING
    orders = Path(house.uri("orders"))
    moved = unreferenced_files(orders)
    assert moved  # in the table's layout, not committed

    # A week later (the files dated past the retention: renames keep the staging's times), the
    # standard vacuum a Delta user runs, its retention enforced; full, as Spark's VACUUM deletes
    # every unreferenced file (delta-rs's lite mode only those the log removed).
    backdate(orders, WEEK + 1)
    DeltaTable(str(orders)).vacuum(retention_hours=WEEK, enforce_retention_duration=True, dry_run=False, full=True)
    assert not any(path.exists() for path in moved)
    versions = house.versions()  # the vacuum's own commits (delta-rs logs VACUUM START/END)

    resumed = house.cli("resume", bid)
    output = resumed.stdout + resumed.stderr
    # Refused before any commit, naming discard: its staging is not the one the gate saw (the
    # vacuum removed moved files), or (a backfill gated before fingerprints) files are missing.
    refusal = ("is not what its validation gate evaluated", "missing from")
    assert resumed.returncode != 0 and any(r in output for r in refusal) and f"backfill discard {bid}" in output, output
    ok(house.cli("discard", bid))
    assert recorded_backfill(house.home, bid).status == BackfillStatus.DISCARDED
    assert house.contents() == before and house.versions() == versions
    assert not any((Path(house.uri(table)) / BACKFILLS_DIR / bid).exists() for table in house.versions())
