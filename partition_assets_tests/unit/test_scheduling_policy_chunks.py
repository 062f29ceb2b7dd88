"""The scheduling core's policy chunks (scheduling.py rule 6) without Dagster runs: graphs planned
from small asset definitions, launches faked. The chunks are Dagster's whatever the order of
results, a failed chunk fails every member (no halves), and a resumed backfill chunks only what
is left, never a range across a partition already done; an upstream failure closes the chunks up
around the partitions it blocks, as Dagster's backfill chunks only what it can request."""

from datetime import UTC, datetime

import dagster as dg

from partition_assets.backfill.model import Node, NodeResult, NodeStatus
from partition_assets.backfill.planning.graph import build_graph
from partition_assets.backfill.planning.spec import TimeRange
from partition_assets.backfill.running.scheduling import Schedule, Throttle
from partition_assets.partitions import daily

DAYS = daily("2024-01-01")
TEN_DAYS = TimeRange(datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 11, tzinfo=UTC))
DAY_KEYS = [f"2024-01-{day:02d}" for day in range(1, 11)]


@dg.asset(partitions_def=DAYS)
def per_day() -> None: ...


@dg.asset(partitions_def=DAYS, backfill_policy=dg.BackfillPolicy.multi_run(3), deps=[per_day])
def threes() -> None: ...


def graph():
    return build_graph(
        dg.Definitions(assets=[per_day, threes]).resolve_asset_graph(), [per_day.key, threes.key], TEN_DAYS
    )


def run_all(
    schedule: Schedule, fail: frozenset[str] = frozenset(), reverse_results: bool = False
) -> list[tuple[str, ...]]:
    """Every unit the schedule hands out, finished at once (failed when it holds a partition of
    `fail`), each batch's results in reverse launch order when told; the units of `threes`."""
    units = []
    while not schedule.is_done:
        launched = schedule.next_units()
        for unit in reversed(launched) if reverse_results else launched:
            failed = bool(fail & set(unit.partitions))
            schedule.finish(unit, [NodeResult(node, not failed, "run", 0.0, 1.0) for node in unit.nodes])
            if unit.asset == threes.key:
                units.append(unit.partitions)
    return units


def test_a_policy_asset_runs_in_dagsters_chunks_whatever_the_order_results_come_in():
    chunks = [tuple(DAY_KEYS[0:3]), tuple(DAY_KEYS[3:6]), tuple(DAY_KEYS[6:9]), (DAY_KEYS[9],)]
    for reverse_results in (False, True):
        for slots in (1, 2, 16):
            schedule = Schedule(graph(), Throttle(slots), policy_chunks=True)
            assert sorted(run_all(schedule, reverse_results=reverse_results)) == chunks


def test_a_failed_chunk_fails_every_member_and_runs_no_halves():
    schedule = Schedule(graph(), Throttle(4), done=[Node(per_day.key, d) for d in DAY_KEYS], policy_chunks=True)
    units = run_all(schedule, fail=frozenset({DAY_KEYS[4]}))
    assert sorted(units) == [tuple(DAY_KEYS[0:3]), tuple(DAY_KEYS[3:6]), tuple(DAY_KEYS[6:9]), (DAY_KEYS[9],)]
    assert {schedule.status(Node(threes.key, day)) for day in DAY_KEYS[3:6]} == {NodeStatus.FAILED}


def test_the_chunks_close_up_around_partitions_an_upstream_failure_blocks():
    """Dagster's backfill chunks what it can request: threes' partitions but the blocked 01-05."""
    for slots in (1, 4):
        schedule = Schedule(graph(), Throttle(slots), policy_chunks=True)
        units = run_all(schedule, fail=frozenset({DAY_KEYS[4]}))
        assert sorted(units) == [tuple(DAY_KEYS[0:3]), (DAY_KEYS[3],), tuple(DAY_KEYS[5:8]), tuple(DAY_KEYS[8:10])]
        assert schedule.status(Node(threes.key, DAY_KEYS[4])) == NodeStatus.BLOCKED
        assert schedule.is_done


def test_a_resumed_backfill_chunks_what_is_left_never_across_a_done_partition():
    done = [Node(per_day.key, day) for day in DAY_KEYS] + [Node(threes.key, DAY_KEYS[1])]
    schedule = Schedule(graph(), Throttle(4), done=done, policy_chunks=True)
    assert sorted(run_all(schedule)) == [
        (DAY_KEYS[0],),
        tuple(DAY_KEYS[2:5]),
        tuple(DAY_KEYS[5:8]),
        tuple(DAY_KEYS[8:10]),
    ]
