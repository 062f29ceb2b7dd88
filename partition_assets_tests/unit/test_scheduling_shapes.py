"""The scheduling core on generated DAG shapes (bench/dag_shapes.py) and on shapes where its
rules are provably optimal, with simulated runs on a simulated clock
(partition_assets_tests/support/simulated_runs.py): no process, no Dagster run, milliseconds each.

A schedule whose makespan equals a lower bound of every schedule (`makespan_bound`) is
optimal: that is how the hand-made shapes below prove their rule. The bound over given runs
(`runs_bound`, bench/engine_bench.py's same-run bound) is checked on fake runs and step seconds."""

import dagster as dg
import pytest

from bench.dag_shapes import MOTIFS, POLICY_MIXES, AssetShape, Edge, Shape, generate
from partition_assets.backfill.model import RunUnit
from partition_assets.backfill.running.scheduling import Throttle
from partition_assets_tests.support.simulated_runs import makespan_bound, runs_bound, simulate

SLOTS = 4
FAMILY = range(12)  # the shapes bench/generated_shapes_bench.py runs for real
WITHIN_BOUND = 1.05


def test_a_seed_draws_the_same_shape_every_time_and_the_family_holds_every_ingredient():
    assert generate(5) == generate(5)
    assert generate(5) != generate(6)
    shapes = [generate(seed) for seed in FAMILY]
    assert {motif for shape in shapes for motif in shape.motifs} == set(MOTIFS)
    assert {shape.policy_mix for shape in shapes} == set(POLICY_MIXES)
    for shape in shapes:
        assert 7 <= shape.days <= 14
        assert all(0.1 <= asset.seconds <= 2.0 for asset in shape.assets)
        assert {asset.range_capable for asset in shape.assets} <= {True, False}
    assert {asset.range_capable for shape in shapes for asset in shape.assets} == {True, False}


@pytest.mark.parametrize("recorded", [False, True], ids=["first-run", "durations-recorded"])
@pytest.mark.parametrize("seed", FAMILY)
def test_the_core_ends_each_generated_shape_within_5_percent_of_the_bound(seed, recorded):
    # Runs take exactly their nodes' work. Without recorded durations the core learns each
    # asset's seconds from its first runs (an asset never run takes no partition along).
    shape = generate(seed)
    graph = shape.graph()
    bound = makespan_bound(graph, SLOTS, shape.work)
    durations = shape.durations() if recorded else None
    simulation = simulate(graph, Throttle(SLOTS), shape.work, durations=durations)
    assert simulation.makespan <= WITHIN_BOUND * bound.tight, (shape.describe(), simulation.makespan, bound)
    assert sorted(node for _, _, unit in simulation.units for node in unit.nodes) == sorted(graph.nodes())


def _shape(days: int, *assets: AssetShape) -> Shape:
    return Shape(seed=-1, days=days, motifs=("hand-made",), policy_mix="hand-made", assets=assets)


# A heavy running total (4 days of 3 s: a chain of 4 nodes, 12 s) beside light chains of
# 6 assets per day (0.1 s each): by nodes the light chains head the longest chains (6 > 4),
# by seconds the total does (12 s > 0.6 s).
HEAVY_BESIDE_LIGHT = _shape(
    4,
    AssetShape("total", "daily", (Edge("total", "previous"),), 3.0, False),
    AssetShape("light0", "daily", (), 0.1, False),
    *(AssetShape(f"light{i}", "daily", (Edge(f"light{i - 1}", "identity"),), 0.1, False) for i in range(1, 6)),
)


def test_the_longest_chain_in_seconds_goes_first_and_ends_at_the_critical_path():
    graph = HEAVY_BESIDE_LIGHT.graph()
    bound = makespan_bound(graph, 2, HEAVY_BESIDE_LIGHT.work)
    assert bound.tight == bound.critical == pytest.approx(12.0)  # the total's chain
    # With durations recorded, the total's first day starts at once: the bound, optimal.
    known = simulate(graph, Throttle(2), HEAVY_BESIDE_LIGHT.work, durations=HEAVY_BESIDE_LIGHT.durations())
    assert known.makespan == pytest.approx(bound.tight)
    start, _, first = known.units[0]
    assert (start, first.asset) == (0.0, dg.AssetKey("total"))
    # Without them every node weighs the same until measured: light chains (6 nodes) go
    # first and the total's chain starts late, past the bound by what ran before it.
    first_run = simulate(graph, Throttle(2), HEAVY_BESIDE_LIGHT.work)
    started = min(start for start, _, unit in first_run.units if unit.asset == dg.AssetKey("total"))
    assert started > 0.0
    assert first_run.makespan == pytest.approx(bound.tight + started)


def test_batching_beside_the_critical_path_never_lengthens_it():
    # A self-dependent total (default policy: one run per day, 1 s + 0.2 s of run overhead
    # each) is the critical path; a range-capable wide asset (0.5 s a day) fills the other
    # slot. Every run costs its overhead, so the total's chain of runs, 14 x 1.2 s, bounds
    # any schedule: the core ends there, having batched the wide asset into few runs.
    overhead = 0.2
    shape = _shape(
        14,
        AssetShape("total", "daily", (Edge("total", "previous"),), 1.0, False),
        AssetShape("wide", "daily", (), 0.5, True),
    )
    graph = shape.graph()
    simulation = simulate(graph, Throttle(2), shape.work, run_overhead=overhead, durations=shape.durations())
    assert simulation.makespan == pytest.approx(14 * (1.0 + overhead))
    wide_runs = [unit for _, _, unit in simulation.units if unit.asset == dg.AssetKey("wide")]
    assert len(wide_runs) < 14


@pytest.mark.parametrize("slots", [2, 4])
def test_a_wide_backlog_is_split_evenly_over_the_slots_one_run_each(slots):
    # 12 independent days of 1 s, range-capable, 0.3 s of overhead per run: every slot runs
    # at least one run, so no schedule ends before 0.3 + 12 / slots s; one run of 12 / slots
    # days per slot ends exactly then.
    overhead = 0.3
    shape = _shape(12, AssetShape("wide", "daily", (), 1.0, True))
    graph = shape.graph()
    simulation = simulate(graph, Throttle(slots), shape.work, run_overhead=overhead, durations=shape.durations())
    assert simulation.makespan == pytest.approx(overhead + 12 / slots)
    assert [len(unit.nodes) for _, _, unit in simulation.units] == [12 // slots] * slots


def _days(asset: str, first: int, last: int) -> RunUnit:
    """One run of `asset` over 2024-01-`first` to 2024-01-`last`."""
    return RunUnit(dg.AssetKey(asset), tuple(f"2024-01-{day:02d}" for day in range(first, last + 1)))


# raw (1 s a day) -> clean (identity, 2 s a day) over 4 days.
RAW_CLEAN = _shape(
    4,
    AssetShape("raw", "daily", (), 1.0, True),
    AssetShape("clean", "daily", (Edge("raw", "identity"),), 2.0, True),
)


def test_the_bound_over_one_run_per_node_is_the_node_level_bound():
    # HEAVY_BESIDE_LIGHT by hand: the total's chain of 4 x 3 s is the longest; 14.4 s of work.
    graph = HEAVY_BESIDE_LIGHT.graph()
    runs = {RunUnit(node.asset, (node.partition,)): HEAVY_BESIDE_LIGHT.work(node) for node in graph.nodes()}
    bound = runs_bound(graph, runs, 2)
    assert (bound.critical, bound.classic) == pytest.approx((12.0, 12.0))
    assert bound == makespan_bound(graph, 2, HEAVY_BESIDE_LIGHT.work)
    assert runs_bound(graph, runs, 1).classic == pytest.approx(14.4)  # the work on one slot


def test_a_chain_of_range_runs_bounds_by_the_sum_of_their_steps():
    # One range run per asset: clean's run starts when raw's ends, so 4 s + 8 s; node by node
    # clean's day 1 could start after raw's day 1: 3 s (and 12 s of work over 4 slots).
    graph = RAW_CLEAN.graph()
    runs = {_days("raw", 1, 4): 4.0, _days("clean", 1, 4): 8.0}
    bound = runs_bound(graph, runs, 4)
    assert (bound.critical, bound.classic) == pytest.approx((12.0, 12.0))
    assert makespan_bound(graph, 4, RAW_CLEAN.work).classic == pytest.approx(3.0)
    # Two runs per asset: clean's first half waits for raw's first run only.
    halves = {_days("raw", 1, 2): 2.0, _days("raw", 3, 4): 2.0, _days("clean", 1, 2): 4.0, _days("clean", 3, 4): 4.0}
    assert runs_bound(graph, halves, 4).critical == pytest.approx(2.0 + 4.0)


def test_a_dependency_inside_a_run_is_ignored_and_one_between_runs_of_an_asset_is_not():
    # A self-dependent total over 4 days, with step seconds that are not its simulated work:
    # in one range run its day-to-day dependencies are inside the step; in two runs the second waits.
    shape = _shape(4, AssetShape("total", "daily", (Edge("total", "previous"),), 3.0, True))
    graph = shape.graph()
    assert runs_bound(graph, {_days("total", 1, 4): 10.0}, 4).critical == pytest.approx(10.0)
    assert runs_bound(graph, {_days("total", 1, 2): 4.0, _days("total", 3, 4): 5.0}, 4).critical == pytest.approx(9.0)
    # Runs that are not contiguous ranges depend on each other both ways: no schedule exists.
    interleaved = {
        RunUnit(dg.AssetKey("total"), ("2024-01-01", "2024-01-03")): 1.0,
        RunUnit(dg.AssetKey("total"), ("2024-01-02", "2024-01-04")): 1.0,
    }
    with pytest.raises(ValueError, match="depends on the later run"):
        runs_bound(graph, interleaved, 4)
    with pytest.raises(ValueError, match="exactly one run"):
        runs_bound(graph, {_days("total", 1, 3): 1.0}, 4)
