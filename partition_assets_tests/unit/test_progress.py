"""Progress lines at scale: a fast backfill's thousands of lines are logged in a few events, in
order, a line after a quiet interval at once, and always from the thread that adds them (the
coordinator's own cost at scale: partition_assets_tests/integration/test_scheduling_scale.py)."""

import threading

from partition_assets.backfill.running.progress import GROUP_SECONDS, GroupedLines


def test_progress_lines_of_a_fast_backfill_are_logged_in_a_few_events_in_order():
    emitted: list[str] = []
    lines = [f"[{n}/5000] events ok" for n in range(1, 5001)]
    with GroupedLines(emitted.append) as grouped:
        for line in lines:
            grouped.add(line)
    # 5,000 lines added in well under GROUP_SECONDS: the exit emits them, in one event or two.
    assert 1 <= len(emitted) <= 2
    assert "\n".join(emitted).split("\n") == lines


def test_a_line_after_a_quiet_interval_goes_out_at_once_and_a_burst_with_the_next_line():
    emitted: list[str] = []
    now = [100.0]
    with GroupedLines(emitted.append, clock=lambda: now[0]) as grouped:
        grouped.add("[1/4] events ok")
        assert emitted == ["[1/4] events ok"]  # emitted while the backfill still runs
        now[0] += GROUP_SECONDS / 2
        grouped.add("[2/4] events ok")
        assert emitted == ["[1/4] events ok"]  # held: within the interval
        now[0] += GROUP_SECONDS
        grouped.add("[3/4] daily_orders ok")
        assert emitted == ["[1/4] events ok", "[2/4] events ok\n[3/4] daily_orders ok"]
        grouped.add("[4/4] daily_orders ok")
    assert emitted[-1] == "[4/4] daily_orders ok"  # the exit emits what is left


def test_lines_are_emitted_only_by_the_thread_that_adds_them():
    """A Dagster log must not be written from a thread of the group's own while the
    coordinator starts a Dagster run: both would wait for the other's logging lock."""
    emitters: list[str] = []
    threads_before = set(threading.enumerate())
    with GroupedLines(lambda text: emitters.append(threading.current_thread().name)) as grouped:
        assert set(threading.enumerate()) == threads_before  # no thread of its own
        grouped.add("[1/2] events ok")
        grouped.add("[2/2] daily_orders ok")
        grouped.add("gate: 3 of 3 checks passed")
    assert emitters and set(emitters) == {threading.current_thread().name}
