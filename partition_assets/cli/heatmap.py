"""A backfill's per-asset partition heatmap: done / failed / blocked / running / skipped / current / missing, as
text, HTML or PNG. *current*: a node a --catch-up backfill left alone because it was materialized already
(no run of it will come); *missing*: a node with no run yet."""

from collections import Counter
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import cast

from dagster import AssetKey

from partition_assets.backfill.model import Node, NodeStatus
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.planning.node_runs import asset_counts
from partition_assets.backfill.running.progress import CURRENT  # a cell of its own, not a state of the node's runs

_GLYPHS: dict[NodeStatus | None, str] = {
    NodeStatus.SUCCEEDED: "█",
    NodeStatus.FAILED: "✗",
    NodeStatus.BLOCKED: "⊘",
    NodeStatus.RUNNING: "▶",
    NodeStatus.SKIPPED: "○",
}
_CURRENT_GLYPH, CURRENT_COLOR = "▒", "#a5d6a7"  # a lighter green: materialized, not by this backfill
COLORS: dict[NodeStatus | None, str] = {
    NodeStatus.SUCCEEDED: "#2e7d32",
    NodeStatus.FAILED: "#c62828",
    NodeStatus.BLOCKED: "#ef9a9a",  # a lighter red: never ran, failed in Dagster's eyes
    NodeStatus.RUNNING: "#f9a825",
    NodeStatus.SKIPPED: "#90a4ae",
}
MISSING_COLOR = "#e0e0e0"
_TEXT_CELLS = 96
_CELL_WIDTH, _ROW_HEIGHT, _LABEL_WIDTH, _MAX_IMAGE_WIDTH = 6, 16, 200, 4000


@dataclass
class Heatmap:
    graph: BackfillGraph
    states: dict[Node, NodeStatus]  # nodes absent here are current when in `current`, else missing
    title: str
    current: AbstractSet[Node] = field(default_factory=frozenset)  # left alone by --catch-up as current

    def rows(self) -> list[tuple[str, list[str], list[NodeStatus | str | None]]]:
        """(asset, partition keys, state of each: its runs', else CURRENT, else None) in the graph's order."""
        return [
            (
                key.to_user_string(),
                asset_slice.partition_keys,
                [self._state(Node(key, p)) for p in asset_slice.partition_keys],
            )
            for key, asset_slice in self.graph.slices.items()
        ]

    def _state(self, node: Node) -> NodeStatus | str | None:
        state = self.states.get(node)
        return CURRENT if state is None and node in self.current else state

    def text(self) -> str:
        """The title, the legend, and a line per asset: its first _TEXT_CELLS partitions' glyphs
        and how many of its partitions are in each state. Only those cells and the nodes in
        `states` are looked at one by one: the current and missing counts are the rest, so a
        line costs the same for 100 partitions as for 100,000."""
        legend = "legend: █ done  ✗ failed  ⊘ blocked (behind a failure)  ▶ running  ○ skipped (no output)"
        if self.current:  # only a --catch-up backfill has current nodes
            legend += f"  {_CURRENT_GLYPH} {CURRENT}"
        lines = [self.title, f"{legend}  · missing"]
        counts = self._counts()
        for key, asset_slice in self.graph.slices.items():
            keys = asset_slice.partition_keys
            cells = "".join(_glyph(self._state(Node(key, partition))) for partition in keys[:_TEXT_CELLS])
            summary = ", ".join(f"{n} {s}" for s, n in sorted(counts[key].items()) if n)
            more = "…" if len(keys) > _TEXT_CELLS else ""
            lines.append(f"{key.to_user_string():<28} {cells}{more}  {summary}")
        return "\n".join(lines)

    def _counts(self) -> dict[AssetKey, Counter[str]]:
        """{asset: {label: how many of its partitions}}: the states' nodes counted one by one,
        the current ones read from `current`'s counts per asset (`asset_counts`: no node made
        for a set held as runs), the missing ones what is left."""
        counts: dict[AssetKey, Counter[str]] = {key: Counter() for key in self.graph.slices}
        current = asset_counts(self.current)
        for node, state in self.states.items():
            asset_slice = self.graph.slices.get(node.asset)
            if asset_slice is None or node.partition not in asset_slice.index_of:
                continue  # not a node of the graph: its rows never show it
            counts[node.asset][_label(state)] += 1
            if node in self.current:  # shown by its state, not as current
                current[node.asset] -= 1
        for key, asset_slice in self.graph.slices.items():
            counts[key][CURRENT] += current[key]
            counts[key]["missing"] += len(asset_slice.partition_keys) - sum(counts[key].values())
        return counts

    def html(self) -> str:
        rows = []
        for asset, keys, states in self.rows():
            cells = "".join(
                f'<td title="{key}: {_label(state)}" style="background:{_color(state)}"></td>'
                for key, state in zip(keys, states, strict=True)
            )
            rows.append(f"<tr><th>{asset}</th>{cells}</tr>")
        return (
            f"<!doctype html><meta charset=utf-8><title>{self.title}</title>"
            "<style>td{width:8px;height:14px;padding:0}th{text-align:left;font:12px sans-serif;padding-right:8px}"
            f"</style><h3>{self.title}</h3><table>{''.join(rows)}</table>"
        )

    def png(self, path: str) -> None:
        """One row per asset, one cell per partition (narrower when there are many)."""
        # Imported here: only a PNG needs Pillow, and its import took ~20 ms of every command's start-up.
        from PIL import Image, ImageDraw

        rows = self.rows()
        widest = max((len(keys) for _, keys, _ in rows), default=1)
        cell = max(1, min(_CELL_WIDTH, (_MAX_IMAGE_WIDTH - _LABEL_WIDTH) // max(widest, 1)))
        image = Image.new("RGB", (_LABEL_WIDTH + cell * widest + 8, _ROW_HEIGHT * (len(rows) + 1) + 8), "white")
        draw = ImageDraw.Draw(image)
        draw.text((4, 4), self.title, fill="black")
        for row, (asset, _, states) in enumerate(rows, start=1):
            top = 4 + row * _ROW_HEIGHT
            draw.text((4, top + 2), asset[:32], fill="black")
            for column, state in enumerate(states):
                left = _LABEL_WIDTH + column * cell
                draw.rectangle(
                    (left, top + 2, left + max(cell - 2, 0), top + _ROW_HEIGHT - 3),
                    fill=_color(state),
                )
        image.save(path, format="PNG")


def _glyph(state: NodeStatus | str | None) -> str:
    return _CURRENT_GLYPH if state == CURRENT else _GLYPHS.get(cast(NodeStatus | None, state), "·")


def _color(state: NodeStatus | str | None) -> str:
    return CURRENT_COLOR if state == CURRENT else COLORS.get(cast(NodeStatus | None, state), MISSING_COLOR)


def _label(state: NodeStatus | str | None) -> str:
    """How the summary and the HTML's cells name a state."""
    if isinstance(state, NodeStatus):
        return state.value
    return state or "missing"
