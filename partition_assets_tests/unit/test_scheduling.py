"""The scheduling core without Dagster runs: graphs are planned from small asset
definitions, launches are fakes that report results at once (or from threads)."""

import random
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime

import dagster as dg
import pytest

from partition_assets.backfill.model import Node, NodeResult, NodeStatus, RunUnit
from partition_assets.backfill.planning.graph import build_graph
from partition_assets.backfill.planning.node_runs import DoneNodes, NodeRuns
from partition_assets.backfill.planning.spec import TimeRange
from partition_assets.backfill.running.durations import RunTimings
from partition_assets.backfill.running.loop import execute
from partition_assets.backfill.running.scheduling import Schedule, Throttle
from partition_assets.backfill.state.record import with_nodes_settled_without_run
from partition_assets.errors import BackfillPlanError
from partition_assets.partitions import daily, mappings
from partition_assets.run_tags import PARTITION_TAG, partitions_of_run, range_tags

DAYS = daily("2024-01-01")
JANUARY_1_TO_8 = TimeRange(datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 9, tzinfo=UTC))
JANUARY_1_TO_16 = TimeRange(datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 17, tzinfo=UTC))


@dg.asset(partitions_def=DAYS)
def src() -> None: ...


@dg.asset(partitions_def=DAYS, deps=[dg.AssetDep(src, partition_mapping=mappings.identity())])
def clean() -> None: ...


@dg.asset(partitions_def=DAYS, deps=[dg.AssetDep(clean, partition_mapping=mappings.rolling_window(3))])
def rolling() -> None: ...


@dg.asset(
    partitions_def=DAYS,
    backfill_policy=dg.BackfillPolicy.single_run(),
    deps=[
        dg.AssetDep(src, partition_mapping=mappings.identity()),
        dg.AssetDep("ledger", partition_mapping=mappings.previous_period()),
    ],
)
def ledger() -> None: ...


@dg.asset(partitions_def=DAYS, deps=[dg.AssetDep(ledger, partition_mapping=mappings.identity())])
def reader() -> None: ...


@dg.asset(partitions_def=DAYS, backfill_policy=dg.BackfillPolicy.single_run())
def wide() -> None: ...


@dg.asset(partitions_def=DAYS, backfill_policy=dg.BackfillPolicy.multi_run(2))
def pairs() -> None: ...


# A chain of three assets beside a lone one that comes first in the asset order.
@dg.asset(partitions_def=DAYS)
def a_lone() -> None: ...


@dg.asset(partitions_def=DAYS)
def b_head() -> None: ...


@dg.asset(partitions_def=DAYS, deps=[dg.AssetDep(b_head, partition_mapping=mappings.identity())])
def c_middle() -> None: ...


@dg.asset(partitions_def=DAYS, deps=[dg.AssetDep(c_middle, partition_mapping=mappings.identity())])
def d_tail() -> None: ...


ASSET_GRAPH = dg.Definitions(
    assets=[src, clean, rolling, ledger, reader, wide, pairs, a_lone, b_head, c_middle, d_tail]
).resolve_asset_graph()


def every_second(graph) -> dict[dg.AssetKey, float]:
    """1 s per node of every asset of `graph`, as if earlier runs had measured them."""
    return dict.fromkeys(graph.slices, 1.0)


def graph_of(*names: str):
    return build_graph(ASSET_GRAPH, [dg.AssetKey(name) for name in names], JANUARY_1_TO_8)


def node(name: str, day: int) -> Node:
    return Node(dg.AssetKey(name), f"2024-01-{day:02d}")


def unit(name: str, *days: int) -> RunUnit:
    return RunUnit(dg.AssetKey(name), tuple(f"2024-01-{day:02d}" for day in days))


def every(name: str) -> list[Node]:
    return [node(name, day) for day in range(1, 9)]


def results(run_unit: RunUnit, succeeded: bool = True, seconds: float = 0.0, skipped: bool = False) -> list[NodeResult]:
    return [NodeResult(member, succeeded, "fake-run", 0.0, seconds, skipped=skipped) for member in run_unit.nodes]


def drive(
    schedule: Schedule, graph, failing=frozenset(), choose=lambda running: running[0], check=None, skipping=frozenset()
):
    """Runs `schedule` to its end with fake runs, finishing `choose(running)` first; a unit
    holding a node of `failing` fails, one holding a node of `skipping` succeeds without
    output. Returns the units in launch order; checks at every launch that each member's
    upstream nodes outside its unit succeeded."""
    launched, running = [], []
    # Each step finishes a unit; a failed range comes back as its halves: at most 2n - 1 runs of n nodes.
    for _ in range(2 * graph.node_count()):
        if schedule.is_done:
            return launched
        for new in schedule.next_units():
            for member in new.nodes:
                outside = [parent for parent in graph.upstream(member) if parent not in new.nodes]
                assert all(schedule.status(parent) == NodeStatus.SUCCEEDED for parent in outside), (new, member)
            launched.append(new)
            running.append(new)
        if check:
            check(schedule)
        finished = choose(running)
        running.remove(finished)
        schedule.finish(
            finished,
            results(
                finished,
                succeeded=not set(finished.nodes) & set(failing),
                skipped=bool(set(finished.nodes) & set(skipping)),
            ),
        )
    assert schedule.is_done, "more steps than nodes: the schedule never finishes"
    return launched


def test_a_self_dependent_chain_whose_inputs_are_done_is_one_unit():
    graph = graph_of("src", "ledger")
    schedule = Schedule(graph, Throttle(4), done=every("src"))
    assert schedule.next_units() == [unit("ledger", *range(1, 9))]


def test_done_nodes_held_as_runs_are_asked_one_by_one_never_iterated(monkeypatch):
    """A catch-up's current nodes (planning/node_runs.py) stay runs: the schedule asks each of
    its nodes whether it is done, and makes no node per current partition by iterating them."""
    graph = graph_of("src", "ledger")
    current = NodeRuns.of_partitions(graph, {dg.AssetKey("src"): [node("src", day).partition for day in range(1, 8)]})
    done = DoneNodes({node("src", 8)}, current)

    def refused(self):
        raise AssertionError("a done set held as runs was iterated")

    monkeypatch.setattr(NodeRuns, "__iter__", refused)
    schedule = Schedule(graph, Throttle(4), done=done)
    assert schedule.next_units() == [unit("ledger", *range(1, 9))]


def test_a_chain_takes_along_only_members_whose_other_inputs_are_done():
    graph = graph_of("src", "ledger")
    schedule = Schedule(graph, Throttle(1), done=[node("src", day) for day in (1, 2, 3)])
    # ledger 4 also waits on src 4, which has not run.
    assert schedule.next_units() == [unit("ledger", 1, 2, 3)]


def test_a_chain_stops_where_another_node_waits_on_its_member():
    graph = graph_of("src", "ledger", "reader")
    schedule = Schedule(graph, Throttle(4), done=every("src"))
    # reader 1 waits on ledger 1: taking ledger 2.. along would delay it.
    assert schedule.next_units() == [unit("ledger", 1)]


def test_without_batch_chains_every_unit_is_one_node():
    graph = graph_of("src", "ledger")
    schedule = Schedule(graph, Throttle(4), done=every("src"), batch_chains=False)
    assert schedule.next_units() == [unit("ledger", 1)]


def test_ready_nodes_share_units_only_while_they_would_wait_for_a_slot():
    graph = graph_of("wide")
    # 8 independent ready nodes of 1 s (as earlier runs measured them), 2 slots: the
    # backlog spread over the slots, one run each, both ending at the bound (4 s).
    assert Schedule(graph, Throttle(2), durations=every_second(graph)).next_units() == [
        unit("wide", 1, 2, 3, 4),
        unit("wide", 5, 6, 7, 8),
    ]
    # 3 slots: the bound is 8 / 3 s; a unit of three would end past it, so two each while
    # the rest waits.
    schedule = Schedule(graph, Throttle(3), durations=every_second(graph))
    assert schedule.next_units() == [unit("wide", 1, 2), unit("wide", 3, 4), unit("wide", 5, 6)]

    roomy = Schedule(graph, Throttle(8), durations=every_second(graph))  # a slot for every node: nothing would wait
    assert roomy.next_units() == [unit("wide", day) for day in range(1, 9)]


def test_an_asset_never_run_takes_no_ready_partition_along_until_a_run_of_it_ends():
    graph = graph_of("wide")
    schedule = Schedule(graph, Throttle(2))  # nothing recorded: how long a node takes is unknown
    assert schedule.next_units() == [unit("wide", 1), unit("wide", 2)]
    schedule.finish(unit("wide", 1), results(unit("wide", 1), seconds=1.0))
    # Measured: 6 ready nodes of 1 s, and 01-02 running: 01-03 takes its share.
    assert schedule.next_units() == [unit("wide", 3, 4, 5)]


@dg.asset(partitions_def=DAYS, backfill_policy=dg.BackfillPolicy.single_run())
def ranged_src() -> None: ...


@dg.asset(
    partitions_def=DAYS,
    deps=[
        dg.AssetDep(ranged_src, partition_mapping=mappings.identity()),
        dg.AssetDep("total", partition_mapping=mappings.previous_period()),
    ],
)
def total() -> None: ...


def _chain_schedule() -> Schedule:
    # `total` is a self-dependent chain (default policy: a run per partition): the chain
    # from ranged_src 01-01 is the critical path, 17 nodes; later days have slack.
    graph = build_graph(
        dg.Definitions(assets=[ranged_src, total]).resolve_asset_graph(),
        [dg.AssetKey("ranged_src"), dg.AssetKey("total")],
        JANUARY_1_TO_16,
    )
    return Schedule(graph, Throttle(2))


def _run_chain_start(schedule: Schedule, one_partition_seconds: float, two_partitions_seconds: float) -> None:
    """Runs ranged_src 01-01..05 as the schedule hands them out, with those durations per
    run, while total 01-01 (the critical path) keeps running."""
    # 01-01 heads the critical path (17 nodes): alone, and so is 01-02 (slack 1: half of it
    # is less than a partition), then 01-03 once a slot frees.
    assert schedule.next_units() == [unit("ranged_src", 1), unit("ranged_src", 2)]
    schedule.finish(unit("ranged_src", 1), results(unit("ranged_src", 1), seconds=one_partition_seconds))
    assert schedule.next_units() == [unit("total", 1)]  # the critical path first
    schedule.finish(unit("ranged_src", 2), results(unit("ranged_src", 2), seconds=one_partition_seconds))
    assert schedule.next_units() == [unit("ranged_src", 3)]
    schedule.finish(unit("ranged_src", 3), results(unit("ranged_src", 3), seconds=one_partition_seconds))
    # 01-04 (chain 14, slack 2 of the 16 nodes of total 01-01's chain) spends half: one more.
    assert schedule.next_units() == [unit("ranged_src", 4, 5)]
    schedule.finish(unit("ranged_src", 4, 5), results(unit("ranged_src", 4, 5), seconds=two_partitions_seconds))


def test_ready_nodes_join_a_unit_only_within_the_slack_of_its_first_member():
    schedule = _chain_schedule()
    _run_chain_start(schedule, 0.0, 0.0)
    # Runs measured at 0 s say nothing of a node's seconds: 1 s each. 01-06: slack 4 s,
    # half spent: 2 more, though its share of the 11 ready days (over the free slot and
    # total 01-01's, a one-node run) is 6.
    assert schedule.ready_allowance(node("ranged_src", 6)) == 2


def test_measured_run_overhead_lets_more_partitions_share_a_run():
    timings = RunTimings()
    assert (timings.work(), timings.overhead(), timings.seconds_per_partition()) == (0.0, 0.0, None)
    timings.add(1, 3.0)
    assert (timings.work(), timings.overhead()) == (0.0, 0.0)  # one size: overhead and work cannot be told apart
    assert timings.seconds_per_partition() == 3.0
    timings.add(3, 5.0)  # 2 s of overhead + 1 s per partition
    assert (timings.work(), timings.overhead()) == (pytest.approx(1.0), pytest.approx(2.0))
    assert timings.seconds_per_partition() == 2.0

    # The same schedule, its ranged_src runs measured at 3 s for one partition and 4 s for
    # two: 2 s of overhead, 1 s of work each. The nodes were ordered at 3 s each (the first
    # measure; 2.6 s on average now is too close to reorder them): 01-06's slack is 4
    # nodes, 12 s, half of it spent: 6 s, which 6 members of 1 s of work fit, not 2 of
    # 3 s; its share of the backlog (6 nodes, itself included) caps them at 5.
    schedule = _chain_schedule()
    _run_chain_start(schedule, 3.0, 4.0)
    assert schedule.ready_allowance(node("ranged_src", 6)) == 5


def test_a_ready_backlog_is_shared_with_the_slots_of_shorter_runs():
    # Runs measured at 20 s of overhead for 1 s of work: slack allows 01-06 any number of
    # members. One slot is free for the 11 ready days, the other runs total 01-01, one
    # node: it ends before a run of the ready days would, and takes its part of them then.
    # So 01-06 takes 6 (12 / 2 slots, itself included), not every ready day.
    schedule = _chain_schedule()
    _run_chain_start(schedule, 21.0, 22.0)
    assert schedule.ready_allowance(node("ranged_src", 6)) == 5
    assert schedule.next_units() == [unit("ranged_src", 6, 7, 8, 9, 10, 11)]


def test_a_unit_covers_at_most_the_assets_max_batch():
    graph = graph_of("pairs")
    schedule = Schedule(graph, Throttle(2), durations=every_second(graph))  # BackfillPolicy.multi_run(2)
    assert schedule.next_units() == [unit("pairs", 1, 2), unit("pairs", 3, 4)]
    schedule.finish(unit("pairs", 1, 2), results(unit("pairs", 1, 2)))
    assert schedule.next_units() == [unit("pairs", 5, 6)]


def test_a_unit_never_spans_a_gap_between_explicit_keys():
    keys = ["2024-01-01", "2024-01-02", "2024-01-05", "2024-01-06", "2024-01-07"]
    graph = build_graph(ASSET_GRAPH, [dg.AssetKey("wide")], explicit_keys=keys)
    assert graph.slices[dg.AssetKey("wide")].breaks == {2}  # 01-02 -> 01-05 skips two days
    schedule = Schedule(graph, Throttle(1), durations=every_second(graph))
    assert schedule.next_units() == [unit("wide", 1, 2)]  # a range run of 01-01..01-02 only
    schedule.finish(unit("wide", 1, 2), results(unit("wide", 1, 2)))
    assert schedule.next_units() == [unit("wide", 5, 6, 7)]


def test_nodes_heading_longer_chains_go_first_then_oldest_partitions_then_upstream_assets():
    graph = graph_of("a_lone", "b_head", "c_middle", "d_tail")
    assert list(graph.slices)[0] == dg.AssetKey("a_lone")  # first by asset order, last by chain
    launched = drive(Schedule(graph, Throttle(1)), graph)
    assert launched[:16] == [unit("b_head", day) for day in range(1, 9)] + [
        unit("c_middle", day) for day in range(1, 9)
    ]
    assert launched[16:] == [unit(name, day) for day in range(1, 9) for name in ("a_lone", "d_tail")]


def test_newest_first_runs_the_newest_partitions_first_whatever_the_chains():
    graph = graph_of("src", "clean")
    newest = drive(Schedule(graph, Throttle(1), newest_first=True), graph)
    assert newest == [unit(name, day) for day in range(8, 0, -1) for name in ("src", "clean")]
    oldest = drive(Schedule(graph, Throttle(1)), graph)  # src heads the longer chains
    assert oldest == [unit(name, day) for name in ("src", "clean") for day in range(1, 9)]


def test_a_failure_blocks_exactly_its_descendants():
    graph = graph_of("src", "clean", "rolling")
    schedule = Schedule(graph, Throttle(2))
    launched = drive(schedule, graph, failing={node("clean", 4)})
    blocked = {node("rolling", day) for day in (4, 5, 6)}  # a 3-day window reads clean 4
    statuses = schedule.statuses()
    assert {n for n, s in statuses.items() if s == NodeStatus.FAILED} == {node("clean", 4)}
    assert {n for n, s in statuses.items() if s == NodeStatus.BLOCKED} == blocked
    assert {n for n, s in statuses.items() if s == NodeStatus.SUCCEEDED} == set(graph.nodes()) - blocked - {
        node("clean", 4)
    }
    assert not blocked & {member for launched_unit in launched for member in launched_unit.nodes}


def test_a_skip_skips_exactly_its_descendants_without_running_them():
    graph = graph_of("src", "clean", "rolling")
    schedule = Schedule(graph, Throttle(2), batch_chains=False)
    launched = drive(schedule, graph, skipping={node("src", 4)})
    skipped = {node("clean", 4)} | {node("rolling", day) for day in (4, 5, 6)}  # a 3-day window reads clean 4
    statuses = schedule.statuses()
    assert {n for n, s in statuses.items() if s == NodeStatus.SKIPPED} == skipped | {node("src", 4)}
    assert {n for n, s in statuses.items() if s == NodeStatus.SUCCEEDED} == set(graph.nodes()) - skipped - {
        node("src", 4)
    }
    assert not skipped & {member for launched_unit in launched for member in launched_unit.nodes}
    assert schedule.is_done


@pytest.mark.parametrize("seed", range(5))
def test_the_status_read_back_from_the_nodes_that_ran_is_the_schedulers(seed):
    """state/record.py `with_nodes_settled_without_run` (what `backfill status` shows) gives the
    nodes that never ran the status the scheduler gave them: blocked behind a failure (which
    wins over a skip), skipped behind a skip."""
    graph = graph_of("src", "clean", "rolling")
    schedule = Schedule(graph, Throttle(2), batch_chains=False)
    rng = random.Random(seed)
    failing_day, skipping_day = rng.sample(range(1, 9), 2)
    launched = drive(
        schedule, graph, failing={node("clean", failing_day)}, skipping={node("src", skipping_day)}, choose=rng.choice
    )
    ran = {member for launched_unit in launched for member in launched_unit.nodes}
    statuses = schedule.statuses()
    assert NodeStatus.BLOCKED in statuses.values()
    assert with_nodes_settled_without_run(graph, {n: s for n, s in statuses.items() if n in ran}) == statuses


def test_a_failure_blocks_the_descendants_a_skip_skipped_before_it():
    graph = graph_of("src", "clean", "rolling")
    schedule = Schedule(graph, Throttle(1), batch_chains=False)
    drive(schedule, graph, failing={node("clean", 5)}, skipping={node("src", 4)})
    statuses = schedule.statuses()
    # rolling 5 and 6 read both clean 4 (skipped) and clean 5 (failed): a failure upstream blocks them.
    assert {n for n, s in statuses.items() if s == NodeStatus.BLOCKED} == {node("rolling", d) for d in (5, 6, 7)}
    assert {n for n, s in statuses.items() if s == NodeStatus.SKIPPED} == {
        node("src", 4),
        node("clean", 4),
        node("rolling", 4),
    }


def test_a_failed_chain_runs_again_in_halves_and_fails_only_from_its_failing_partition_on():
    graph = graph_of("src", "ledger")
    schedule = Schedule(graph, Throttle(4), done=every("src") + [node("ledger", 1)])
    (chain,) = schedule.next_units()
    assert chain == unit("ledger", *range(2, 9))
    assert schedule.finish(chain, results(chain, succeeded=False)) == []  # nothing final yet
    # Each day of the chain needs the day before: the second half waits for the first.
    first_half = unit("ledger", 2, 3, 4, 5)
    assert schedule.next_units() == [first_half]
    assert len(schedule.finish(first_half, results(first_half))) == 4
    assert drive(schedule, graph, failing={node("ledger", 6)}) == [
        unit("ledger", 6, 7, 8),
        unit("ledger", 6, 7),
        unit("ledger", 6),
    ]
    statuses = schedule.statuses()
    assert {n for n, s in statuses.items() if s == NodeStatus.FAILED} == {node("ledger", 6)}
    # Days 7 and 8 read day 6: blocked, never run again.
    assert {n for n, s in statuses.items() if s == NodeStatus.BLOCKED} == {node("ledger", 7), node("ledger", 8)}
    assert {n for n, s in statuses.items() if s == NodeStatus.SUCCEEDED and n.asset == dg.AssetKey("ledger")} == {
        node("ledger", 1),  # done before
        *first_half.nodes,
    }


def test_a_failed_range_runs_again_in_halves_down_to_its_failing_partition_once():
    graph = graph_of("wide")
    schedule = Schedule(graph, Throttle(1), durations=every_second(graph))
    failing = node("wide", 6)
    launched = drive(schedule, graph, failing={failing})
    # The range, then each half that held day 6 split again; the halves that succeed are kept.
    assert launched == [
        unit("wide", *range(1, 9)),
        unit("wide", 1, 2, 3, 4),
        unit("wide", 5, 6, 7, 8),
        unit("wide", 5, 6),
        unit("wide", 5),
        unit("wide", 6),
        unit("wide", 7, 8),
    ]
    statuses = schedule.statuses()
    assert {n for n, s in statuses.items() if s != NodeStatus.SUCCEEDED} == {failing}
    assert statuses[failing] == NodeStatus.FAILED


def test_a_range_whose_every_partition_fails_ends_with_each_failed_in_at_most_2n_minus_1_runs():
    graph = graph_of("wide")
    schedule = Schedule(graph, Throttle(2), durations=every_second(graph))
    launched = drive(schedule, graph, failing=set(graph.nodes()))
    assert len(launched) <= 2 * graph.node_count() - 1
    assert set(schedule.statuses().values()) == {NodeStatus.FAILED}
    # No range runs twice: each failed range comes back as two smaller ones.
    assert len(set(launched)) == len(launched)


@pytest.mark.parametrize("seed", range(6))
def test_whatever_fails_and_in_whatever_order_runs_end_only_failing_nodes_without_failed_ancestors_fail(seed):
    graph = graph_of("src", "wide", "ledger", "reader")
    order = random.Random(seed)
    failing = set(order.sample(sorted(graph.nodes()), 3))
    schedule = Schedule(graph, Throttle(order.choice([1, 2, 3])), durations=every_second(graph))
    launched = drive(schedule, graph, failing=failing, choose=order.choice)

    def ancestors(start: Node) -> set[Node]:
        seen, stack = set(), [p for p in graph.upstream(start) if p != start]
        while stack:
            parent = stack.pop()
            if parent not in seen:
                seen.add(parent)
                stack.extend(p for p in graph.upstream(parent) if p != parent)
        return seen

    failed = {n for n in failing if not ancestors(n) & failing}
    blocked = {n for n in graph.nodes() if ancestors(n) & failed} - failed
    statuses = schedule.statuses()
    assert {n for n, s in statuses.items() if s == NodeStatus.FAILED} == failed
    assert {n for n, s in statuses.items() if s == NodeStatus.BLOCKED} == blocked
    assert {n for n, s in statuses.items() if s == NodeStatus.SUCCEEDED} == set(graph.nodes()) - failed - blocked
    assert len(set(launched)) == len(launched)  # no range runs twice


def test_only_final_results_are_returned_and_a_failed_partition_blocks_only_its_downstream():
    graph = graph_of("ledger", "reader")
    failing = node("ledger", 3)
    schedule = Schedule(graph, Throttle(1), durations=every_second(graph))
    reported = []
    for _ in range(2 * graph.node_count()):
        if schedule.is_done:
            break
        for new in schedule.next_units():
            reported += schedule.finish(new, results(new, succeeded=failing not in new.nodes))
    assert schedule.is_done
    # Every node reported once: the failed range runs report nothing of their own.
    assert Counter(result.node for result in reported) == Counter(
        n for n, s in schedule.statuses().items() if s in (NodeStatus.SUCCEEDED, NodeStatus.FAILED)
    )
    blocked = {n for n, s in schedule.statuses().items() if s == NodeStatus.BLOCKED}
    assert blocked == {node("ledger", day) for day in range(4, 9)} | {node("reader", day) for day in range(3, 9)}


@pytest.mark.parametrize("seed", range(5))
def test_limits_are_never_exceeded_whatever_the_finishing_order(seed):
    graph = graph_of("src", "clean", "rolling", "ledger", "wide")
    limits = {dg.AssetKey("src"): 1, dg.AssetKey("clean"): 2, dg.AssetKey("wide"): 1}
    schedule = Schedule(graph, Throttle(4, limits))
    order = random.Random(seed)

    def within_limits(state: Schedule) -> None:
        running = state.running_units
        assert len(running) <= 4
        per_asset = Counter(u.asset for u in running)
        for asset, count in per_asset.items():
            assert count <= limits.get(asset, 4), (asset, running)

    drive(schedule, graph, choose=order.choice, check=within_limits)
    assert set(schedule.statuses().values()) == {NodeStatus.SUCCEEDED}


def test_an_asset_limit_is_reached_not_just_respected():
    graph = graph_of("src", "clean")
    schedule = Schedule(graph, Throttle(4, {dg.AssetKey("clean"): 2}), done=every("src"))
    assert schedule.next_units() == [unit("clean", 1), unit("clean", 2)]


def test_a_node_already_done_is_neither_run_nor_waited_for():
    graph = graph_of("src", "clean")
    schedule = Schedule(graph, Throttle(2), done=every("clean"))  # e.g. catch-up: downstream current
    launched = drive(schedule, graph)
    assert {u.asset for u in launched} == {dg.AssetKey("src")}
    assert set(schedule.statuses().values()) == {NodeStatus.SUCCEEDED}


def test_finish_takes_one_result_per_node_of_a_running_unit():
    schedule = Schedule(graph_of("wide"), Throttle(8))
    first = schedule.next_units()[0]
    with pytest.raises(ValueError, match="results"):
        schedule.finish(first, results(unit("wide", 2)))
    with pytest.raises(ValueError, match="not running"):
        schedule.finish(unit("wide", 1, 2), results(unit("wide", 1, 2)))


def test_a_throttle_below_one_is_refused():
    with pytest.raises(BackfillPlanError, match="at least 1"):
        Throttle(0)
    with pytest.raises(BackfillPlanError, match="src"):
        Throttle(2, {dg.AssetKey("src"): 0})


def completed(value=None, error: BaseException | None = None) -> Future:
    future = Future()
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)
    return future


def test_a_launch_that_raises_fails_every_node_of_its_unit():
    graph = graph_of("wide")
    reported = []

    def launch(run_unit: RunUnit) -> Future:
        if node("wide", 5) in run_unit.nodes:
            return completed(error=RuntimeError("worker died"))
        return completed(results(run_unit))

    status = execute(graph, launch, Throttle(2), on_result=reported.append, durations=every_second(graph))
    # 8 ready nodes, 2 slots: units 01-01..04 and 01-05..08; the failed one runs again in halves.
    assert {n for n, s in status.items() if s == NodeStatus.FAILED} == {node("wide", 5)}
    assert {n for n, s in status.items() if s == NodeStatus.SUCCEEDED} == set(graph.nodes()) - {node("wide", 5)}
    assert Counter(r.node for r in reported) == Counter(graph.nodes())  # each node reported once, as it ended
    failures = [r for r in reported if not r.succeeded]
    assert {r.error for r in failures} == {"RuntimeError: worker died"}
    assert {r.run_id for r in failures} == {None}


def test_execute_launches_nothing_more_once_asked_to_stop():
    graph = graph_of("src", "clean")
    launched = []

    def launch(run_unit: RunUnit) -> Future:
        launched.append(run_unit)
        return completed(results(run_unit))

    status = execute(graph, launch, Throttle(2), should_stop=lambda: len(launched) >= 2)
    assert launched == [unit("src", 1), unit("src", 2)]
    assert {n for n, s in status.items() if s != NodeStatus.PENDING} == {node("src", 1), node("src", 2)}


def test_execute_with_threads_starts_no_node_before_its_upstream_and_respects_the_throttle():
    graph = graph_of("src", "clean", "rolling", "ledger", "reader", "wide")
    limits = {dg.AssetKey("src"): 1}
    lock = threading.Lock()
    in_flight = Counter()
    peaks = Counter()
    units_of = {}

    def work(run_unit: RunUnit, pause: float) -> list[NodeResult]:
        with lock:
            in_flight["all"] += 1
            in_flight[run_unit.asset] += 1
            peaks["all"] = max(peaks["all"], in_flight["all"])
            peaks[run_unit.asset] = max(peaks[run_unit.asset], in_flight[run_unit.asset])
        started = time.monotonic()
        time.sleep(pause)
        ended = time.monotonic()
        with lock:
            in_flight["all"] -= 1
            in_flight[run_unit.asset] -= 1
        return [NodeResult(member, True, str(id(run_unit)), started, ended) for member in run_unit.nodes]

    pauses = random.Random(7)
    with ThreadPoolExecutor(max_workers=16) as pool:

        def launch(run_unit: RunUnit) -> Future:
            for member in run_unit.nodes:
                units_of[member] = run_unit
            return pool.submit(work, run_unit, pauses.uniform(0.001, 0.02))

        reported = {}
        status = execute(graph, launch, Throttle(3, limits), on_result=lambda r: reported.__setitem__(r.node, r))

    assert set(status.values()) == {NodeStatus.SUCCEEDED}
    assert set(reported) == set(graph.nodes())
    for member in graph.nodes():
        for parent in graph.upstream(member):
            if parent not in units_of[member].nodes:
                assert reported[parent].ended <= reported[member].started, (member, parent)
    assert peaks["all"] <= 3
    assert peaks[dg.AssetKey("src")] == 1
    assert any(len(u.partitions) > 1 for u in units_of.values())  # some units did share runs


def test_a_run_covers_its_range_or_its_one_partition():
    def run(**tags: str) -> dg.DagsterRun:
        return dg.DagsterRun(job_name="job", tags=tags)

    assert partitions_of_run(run(**range_tags("2024-01-02", "2024-01-04")), DAYS) == [
        "2024-01-02",
        "2024-01-03",
        "2024-01-04",
    ]
    assert partitions_of_run(run(**{PARTITION_TAG: "2024-01-05"}), DAYS) == ["2024-01-05"]
    assert partitions_of_run(run(), DAYS) == []  # a run of the whole asset, or of an unpartitioned one
    assert partitions_of_run(run(**range_tags("2024-01-02", "2024-01-04")), None) == []
    assert partitions_of_run(run(**range_tags("2023-12-30", "2024-01-02")), DAYS) == []  # not keys of DAYS
