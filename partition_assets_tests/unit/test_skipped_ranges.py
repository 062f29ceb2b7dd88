"""A record's `skipped` (--catch-up's current partitions, backfill/state/skipped_ranges.py,
issue 54): stored as runs of consecutive partitions per asset, so that its size grows with the
gaps, not with the history; read back exactly, in the partitions definition's order, for time,
static and multi-partitioned assets; and a format-3 record's listed keys read as listed."""

import json
import random
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest

from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.graph import AssetSlice, BackfillGraph
from partition_assets.backfill.state.skipped_ranges import SkippedNodes, index_runs, stored_skipped
from partition_assets.backfill.state.stored_plan import packed_indexes
from partition_assets.errors import StoredPlanError

HOURS = dg.AssetKey("hours")
REGIONS = dg.AssetKey(["lake", "regions"])
BY_DAY_AND_REGION = dg.AssetKey("by_day_and_region")


def _graph(days: int) -> BackfillGraph:
    """An hourly asset over `days` days, a static one listed out of alphabetical order, a multi one."""
    hourly = dg.HourlyPartitionsDefinition(start_date="2024-01-01-00:00", end_date=None)
    hour_keys = hourly.get_partition_keys(current_time=datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=days))
    static = dg.StaticPartitionsDefinition(["north", "east", "south", "west"])
    multi = dg.MultiPartitionsDefinition(
        {"day": dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-04"), "region": static}
    )
    slices = {
        HOURS: AssetSlice(HOURS, hourly, hour_keys),
        REGIONS: AssetSlice(REGIONS, static, static.get_partition_keys()),
        BY_DAY_AND_REGION: AssetSlice(BY_DAY_AND_REGION, multi, multi.get_partition_keys()),
    }
    return BackfillGraph(slices, {key: [] for key in slices})


def _round_trip(graph: BackfillGraph, nodes) -> SkippedNodes:
    return SkippedNodes.of(json.loads(json.dumps(stored_skipped(graph, nodes))), graph, "b1")


def test_runs_are_the_consecutive_values_whatever_their_order_and_repeats():
    starts, stops = index_runs([9, 1, 2, 3, 10, 5, 2, 9, 12])
    assert (starts.tolist(), stops.tolist()) == ([1, 5, 9, 12], [4, 6, 11, 13])
    assert [array.tolist() for array in index_runs([])] == [[], []]
    assert [array.tolist() for array in index_runs([7])] == [[7], [8]]


def test_skipped_nodes_round_trip_exactly_with_counts_from_the_runs():
    graph = _graph(30)
    rng = random.Random(54)
    every = list(graph.nodes())
    nodes = {node for node in every if rng.random() < 0.9}  # many gaps, of every asset

    read = _round_trip(graph, nodes)

    assert set(read) == nodes and len(read) == len(nodes)
    assert [node in read for node in every] == [node in nodes for node in every]
    for key in graph.slices:
        assert read.count(key) == sum(node.asset == key for node in nodes)
    assert Node(HOURS, "2023-12-31-23:00") not in read and Node(dg.AssetKey("other"), "north") not in read
    assert (read | {Node(HOURS, "x")}) == {*nodes, Node(HOURS, "x")}  # a set operation gives a plain set


def test_runs_follow_the_partitions_definition_s_order_not_the_keys_sorted():
    graph = _graph(1)
    # north, east, south: the static definition's first three, not consecutive in alphabetical order
    nodes = [Node(REGIONS, region) for region in ("south", "north", "east")]

    stored = stored_skipped(graph, nodes)

    read = SkippedNodes.of(stored, graph, "b1")
    assert list(read) == [Node(REGIONS, region) for region in ("north", "east", "south")]
    assert stored == stored_skipped(graph, reversed(nodes))  # the order given changes nothing
    assert list(stored) == ["lake/regions"] and len(json.dumps(stored)) < 100  # one run


def test_two_years_of_hours_with_a_handful_of_gaps_store_in_a_few_hundred_bytes():
    graph = _graph(731)
    keys = graph.slices[HOURS].partition_keys
    gaps = {index for start in range(1_000, len(keys), 2_500) for index in range(start, start + 24)}
    nodes = [Node(HOURS, key) for index, key in enumerate(keys) if index not in gaps]
    assert len(nodes) > 17_000 and len(gaps) == 7 * 24

    stored = stored_skipped(graph, nodes)

    assert len(json.dumps(stored)) < 400, json.dumps(stored)
    read = SkippedNodes.of(stored, graph, "b1")
    assert len(read) == read.count(HOURS) == len(nodes)
    assert [index for index, key in enumerate(keys) if Node(HOURS, key) not in read] == sorted(gaps)


def test_keys_a_format_3_record_lists_are_read_as_listed_those_the_graph_lacks_left_out():
    graph = _graph(1)
    listed = {"hours": ["2024-01-01-05:00", "2024-01-01-03:00", "2024-01-01-04:00", "2030-01-01-00:00"]}

    read = SkippedNodes.of(listed, graph, "b1")

    assert list(read) == [Node(HOURS, f"2024-01-01-0{hour}:00") for hour in (3, 4, 5)] and len(read) == 3


def test_runs_past_the_asset_s_partitions_in_the_plan_are_refused_naming_the_backfill():
    graph = _graph(1)  # 24 hours
    stored = {"hours": {"starts": packed_indexes([20]), "stops": packed_indexes([30])}}

    with pytest.raises(
        StoredPlanError, match=r"backfill b1's record holds --catch-up partitions of hours up to index 29, past the 24"
    ):
        SkippedNodes.of(stored, graph, "b1")
