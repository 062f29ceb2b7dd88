"""Which table versions a reader of the release log holds back (storage/release_log.LogView):
pure logic over log rows, no table."""

from datetime import UTC, datetime, timedelta

from partition_assets.storage.release_log import BEGIN, NO_TABLE, RELEASE, LogView

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def row(kind: str, backfill: str, table: str, version: int, minute: int, operation: str = "publish") -> dict:
    return {
        "release_id": f"{kind[0]}-{backfill}-{minute}",
        "kind": kind,
        "operation": operation,
        "backfill_id": backfill,
        "table": table,
        "version": version,
        "recorded_at": T0 + timedelta(minutes=minute),
    }


def view(rows: list[dict], pinned: list[dict] | None = None) -> LogView:
    return LogView(rows, rows if pinned is None else pinned, None if pinned is None else len(pinned) - 1)


def test_an_open_publish_holds_its_tables_at_their_versions_before_it_until_its_release():
    begun = [row(BEGIN, "bf1", "daily", 3, 0), row(BEGIN, "bf1", "quarterly", 7, 0)]
    assert view(begun).held_versions() == {"daily": 3, "quarterly": 7}
    released = [*begun, row(RELEASE, "bf1", "daily", 4, 1), row(RELEASE, "bf1", "quarterly", 8, 1)]
    assert view(released).held_versions() == {}
    [release] = view(released).releases()
    assert (release.backfill_id, dict(release.versions)) == ("bf1", {"daily": 4, "quarterly": 8})
    # A reader pinned before the release (a run started then) still holds them back.
    assert view(released, pinned=begun).held_versions() == {"daily": 3, "quarterly": 7}


def test_a_rollback_of_a_stopped_publish_closes_both_and_the_earliest_begin_wins_meanwhile():
    stopped = [row(BEGIN, "bf1", "daily", 3, 0), row(BEGIN, "bf1", "quarterly", 7, 0)]
    rolling_back = [*stopped, row(BEGIN, "bf1", "daily", 4, 5, "rollback")]
    assert view(rolling_back).held_versions() == {"daily": 3, "quarterly": 7}
    rolled_back = [*rolling_back, row(RELEASE, "bf1", "daily", 5, 6, "rollback")]
    assert view(rolled_back).held_versions() == {}


def test_a_release_closes_only_the_begins_of_its_backfill_recorded_before_it():
    rows = [
        row(BEGIN, "bf1", "daily", 3, 0),
        row(RELEASE, "bf1", "daily", 4, 1),
        row(BEGIN, "bf1", "daily", 4, 2),  # a second operation of bf1, not released
        row(BEGIN, "bf2", "created", NO_TABLE, 3),  # a publish creating its table
    ]
    assert view(rows).held_versions() == {"daily": 4, "created": NO_TABLE}
    assert view(rows).tables() == {"daily", "created"}
