"""Progress lines at scale: a fast backfill's thousands of lines are logged in a few events, in
order, and none waits longer than a group interval (the coordinator's own cost at scale:
tests/integration/test_scale.py)."""

from partition_assets.backfill.running.progress import GROUP_SECONDS, GroupedLines
from tests.support.polling import wait_for


def test_progress_lines_of_a_fast_backfill_are_logged_in_a_few_events_in_order():
    emitted: list[str] = []
    lines = [f"[{n}/5000] events ok" for n in range(1, 5001)]
    with GroupedLines(emitted.append) as grouped:
        for line in lines:
            grouped.add(line)
    # 5,000 lines added in well under GROUP_SECONDS: the exit emits them, in one event or two.
    assert 1 <= len(emitted) <= 2
    assert "\n".join(emitted).split("\n") == lines


def test_a_progress_line_waits_at_most_a_group_interval():
    emitted: list[str] = []
    with GroupedLines(emitted.append) as grouped:
        grouped.add("[1/2] events ok")
        wait_for(lambda: emitted, timeout=3 * GROUP_SECONDS)
        assert emitted == ["[1/2] events ok"]  # emitted while the backfill still runs
        grouped.add("[2/2] daily_orders ok")
    assert emitted == ["[1/2] events ok", "[2/2] daily_orders ok"]
