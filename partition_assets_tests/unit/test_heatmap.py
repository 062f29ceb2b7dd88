"""`status`'s heatmap (cli/heatmap.py): its text reads the nodes that have a state, the first
cells of each row and the counts of the current set, never every partition of the graph, and
says what a row of every node's state says (issue 54: `status` of a 100,000-partition asset)."""

import random
from collections import Counter

from partition_assets.backfill.model import Node, NodeStatus
from partition_assets.backfill.planning.node_runs import NodeRuns
from partition_assets.cli.heatmap import _TEXT_CELLS, CURRENT, Heatmap, _glyph, _label
from partition_assets_tests.unit.test_node_runs import _nodes_counted
from partition_assets_tests.unit.test_skipped_ranges import HOURS, REGIONS, _graph


def _text_of_every_node(heatmap: Heatmap) -> list[str]:
    """The asset lines as a row of every node's state says them (`Heatmap.rows`)."""
    lines = []
    for asset, keys, states in heatmap.rows():
        counts = Counter(_label(state) for state in states)
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        cells = "".join(_glyph(state) for state in states[:_TEXT_CELLS])
        lines.append(f"{asset:<28} {cells}{'…' if len(keys) > _TEXT_CELLS else ''}  {summary}")
    return lines


def test_the_text_says_what_every_nodes_state_says_with_current_nodes_that_ran_shown_by_their_state():
    graph = _graph(30)
    rng = random.Random(54)
    every = list(graph.nodes())
    states = {node: rng.choice(list(NodeStatus)) for node in every if rng.random() < 0.1}
    states[Node(HOURS, "2099-01-01-00:00")] = NodeStatus.FAILED  # not in the graph: never shown
    hours = graph.slices[HOURS].partition_keys
    current = NodeRuns.of_partitions(graph, {HOURS: hours[50:600], REGIONS: ["east", "west"]})

    heatmap = Heatmap(graph, states, "title", current)

    assert heatmap.text().splitlines()[2:] == _text_of_every_node(heatmap)
    assert CURRENT in heatmap.text() and "missing" in heatmap.text()
    assert Heatmap(graph, states, "title").text().splitlines()[2:] == _text_of_every_node(Heatmap(graph, states, "t"))


def test_the_text_of_a_row_of_years_of_hours_makes_a_node_per_cell_and_per_state_not_per_partition(monkeypatch):
    graph = _graph(2 * 365)
    hours = graph.slices[HOURS].partition_keys
    states = {Node(HOURS, key): NodeStatus.SUCCEEDED for key in hours[-24:]}
    heatmap = Heatmap(graph, states, "title", NodeRuns.of_partitions(graph, {HOURS: hours[:-24]}))
    made = _nodes_counted(monkeypatch)

    text = heatmap.text()

    assert f"{len(hours) - 24} {CURRENT}, 24 succeeded" in text
    cells = sum(min(len(asset_slice.partition_keys), _TEXT_CELLS) for asset_slice in graph.slices.values())
    assert made[0] <= cells, f"{made[0]:,} nodes made for {len(hours):,} partitions"
