"""What a run of a backfill leaves alone, held as runs of partitions (backfill/planning/node_runs.py,
issue 54): `NodeRuns` answers `in`, `len` and the counts per asset as a set of the same nodes
would, and `DoneNodes` (the few nodes that succeeded beside a catch-up's current runs) as their
union would, each without making a node per partition."""

import random

import dagster as dg

from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.node_runs import DoneNodes, NodeRuns, asset_counts
from partition_assets_tests.unit.test_skipped_ranges import BY_DAY_AND_REGION, HOURS, REGIONS, _graph


def _nodes_counted(monkeypatch) -> list[int]:
    """How many nodes get made from now on (the one-item list counts them)."""
    made = [0]
    init = Node.__init__

    def counting(self, *args, **kwargs):
        made[0] += 1
        init(self, *args, **kwargs)

    monkeypatch.setattr(Node, "__init__", counting)
    return made


def test_node_runs_of_partitions_answer_as_the_set_of_their_nodes_keys_outside_the_graph_left_out():
    graph = _graph(30)
    rng = random.Random(54)
    every = list(graph.nodes())
    nodes = {node for node in every if rng.random() < 0.9}
    partitions: dict[dg.AssetKey, list[str]] = {}
    for node in nodes:
        partitions.setdefault(node.asset, []).append(node.partition)
    partitions[HOURS].append("2099-01-01-00:00")  # not in the graph

    runs = NodeRuns.of_partitions(graph, partitions)

    assert len(runs) == len(nodes) and set(runs) == nodes
    assert [node in runs for node in every] == [node in nodes for node in every]
    assert Node(HOURS, "2099-01-01-00:00") not in runs and "not a node" not in runs
    assert runs.counts() == asset_counts(list(nodes))
    assert isinstance(runs - {every[0]}, set) and runs - {every[0]} == nodes - {every[0]}


def test_done_nodes_answer_as_the_union_of_the_succeeded_and_the_current_runs():
    graph = _graph(10)
    every = list(graph.nodes())
    current = NodeRuns.of_partitions(graph, {HOURS: graph.slices[HOURS].partition_keys[5:200], REGIONS: ["east"]})
    succeeded = {Node(HOURS, graph.slices[HOURS].partition_keys[3]), Node(BY_DAY_AND_REGION, "2024-01-02|west")}

    done = DoneNodes(succeeded, current)

    union = {*succeeded, *current}
    assert len(done) == len(union) == 195 + 1 + 2 and set(done) == union
    assert [node in done for node in every] == [node in union for node in every]
    assert done.counts() == asset_counts(list(union)) == {HOURS: 196, REGIONS: 1, BY_DAY_AND_REGION: 1}
    assert isinstance(done & {every[4], every[5]}, set) and done & {every[4], every[5]} == {every[5]}


def test_counts_and_membership_of_runs_over_two_years_of_hours_make_no_node_per_partition(monkeypatch):
    graph = _graph(2 * 365)
    keys = graph.slices[HOURS].partition_keys
    current = NodeRuns.of_partitions(graph, {HOURS: keys[:1000] + keys[1100:]})
    done = DoneNodes({Node(HOURS, keys[1000])}, current)
    made = _nodes_counted(monkeypatch)

    assert asset_counts(done) == {HOURS: len(keys) - 99} and len(done) == len(keys) - 99
    assert Node(HOURS, keys[1050]) not in done and Node(HOURS, keys[5000]) in done

    assert made[0] == 2  # the two nodes asked about, none per partition
