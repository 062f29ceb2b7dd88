"""Which table versions a reader of the release log reads (storage/release_log.LogView):
pure logic over log rows, no table."""

from datetime import UTC, datetime, timedelta

from partition_assets.storage.release_log import BEGIN, NO_TABLE, RELEASE, LogView

T0 = datetime(2024, 1, 1, tzinfo=UTC)
LATEST = {"daily": 9, "quarterly": 9}


def row(
    kind: str, backfill: str, table: str, version: int, minute: int, operation: str = "publish", op: str = ""
) -> dict:
    return {
        "release_id": f"{kind[0]}-{backfill}-{minute}",
        "kind": kind,
        "operation": operation,
        "backfill_id": backfill,
        "table": table,
        "version": version,
        "recorded_at": T0 + timedelta(minutes=minute),
        "operation_id": op or backfill,
        "sequence": minute,
    }


def view(rows: list[dict], pinned: list[dict] | None = None) -> LogView:
    return LogView(rows, rows if pinned is None else pinned, None if pinned is None else len(pinned) - 1)


def test_an_open_publish_holds_its_tables_at_their_versions_before_it_until_its_release():
    begun = [row(BEGIN, "bf1", "daily", 3, 0), row(BEGIN, "bf1", "quarterly", 7, 0)]
    assert view(begun).read_versions(LATEST).versions == {"daily": 3, "quarterly": 7}
    released = [*begun, row(RELEASE, "bf1", "daily", 4, 1), row(RELEASE, "bf1", "quarterly", 8, 1)]
    assert view(released).read_versions(LATEST).versions == LATEST
    [release] = view(released).releases()
    assert (release.backfill_id, dict(release.versions)) == ("bf1", {"daily": 4, "quarterly": 8})
    # A reader pinned before the release (a run started then) still holds them back.
    assert view(released, pinned=begun).read_versions(LATEST).versions == {"daily": 3, "quarterly": 7}


def test_a_rollback_of_a_stopped_publish_closes_both_and_the_earliest_begin_wins_meanwhile():
    stopped = [row(BEGIN, "bf1", "daily", 3, 0), row(BEGIN, "bf1", "quarterly", 7, 0)]
    rolling_back = [*stopped, row(BEGIN, "bf1", "daily", 4, 5, "rollback")]
    assert view(rolling_back).read_versions(LATEST).versions == {"daily": 3, "quarterly": 7}
    rolled_back = [*rolling_back, row(RELEASE, "bf1", "daily", 5, 6, "rollback")]
    assert view(rolled_back).read_versions(LATEST).versions == LATEST


def test_a_release_closes_only_its_own_operation():
    rows = [
        row(BEGIN, "bf1", "daily", 3, 0, op="first"),
        row(RELEASE, "bf1", "daily", 4, 1, op="first"),
        row(BEGIN, "bf1", "daily", 4, 2, op="second"),  # a second operation of bf1, not released
        row(BEGIN, "bf2", "created", NO_TABLE, 3),  # a publish creating its table
    ]
    seen = view(rows).read_versions({"daily": 9, "created": 0})
    assert seen.versions == {"daily": 4, "created": NO_TABLE} and seen.unseen_tables == {"created"}
    assert seen.release is not None and seen.release.operation_id == "first"
    assert view(rows).tables() == {"daily", "created"}


def test_a_release_overlapping_an_open_operation_is_read_whole_or_not_at_all():
    """Y began on daily before X committed to it; X is released, Y is not: X's quarterly
    is not read beside daily before X (issue 50, hole 2), nor is X named the current release."""
    first = [
        row(BEGIN, "bf0", "daily", 2, 0),
        row(RELEASE, "bf0", "daily", 3, 1),
        row(RELEASE, "bf0", "quarterly", 7, 1),
    ]
    overlapping = [
        *first,
        row(BEGIN, "bfY", "daily", 3, 2),
        row(BEGIN, "bfX", "daily", 3, 3),
        row(BEGIN, "bfX", "quarterly", 7, 3),
        row(RELEASE, "bfX", "daily", 4, 4),
        row(RELEASE, "bfX", "quarterly", 8, 4),
    ]
    seen = view(overlapping).read_versions({"daily": 4, "quarterly": 8})
    assert seen.versions == {"daily": 3, "quarterly": 7}
    assert seen.release is not None and seen.release.backfill_id == "bf0"
    # Y released: X and Y whole.
    released = [*overlapping, row(RELEASE, "bfY", "daily", 5, 5)]
    seen = view(released).read_versions({"daily": 5, "quarterly": 8})
    assert seen.versions == {"daily": 5, "quarterly": 8} and seen.release.backfill_id == "bfY"
    # A reader that looked up quarterly before X's commit to it (a publish landing between its
    # lookups and its log read) does not read X's daily either.
    assert view(released).read_versions({"daily": 5, "quarterly": 7}).versions == {"daily": 3, "quarterly": 7}


def test_open_and_closed_are_read_from_the_records_not_their_clocks():
    """A begin recorded by a host whose clock is 10 minutes ahead, released by another (issue 50, hole 11)."""
    ahead = [row(BEGIN, "bf1", "daily", 3, 10, op="o1"), row(BEGIN, "bf1", "quarterly", 7, 10, op="o1")]
    released = [*ahead, row(RELEASE, "bf1", "daily", 4, 0, op="o1"), row(RELEASE, "bf1", "quarterly", 8, 0, op="o1")]
    assert view(released).read_versions(LATEST).versions == LATEST
