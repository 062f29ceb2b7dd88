"""A backfill's per-asset partition heatmap: done / failed / blocked / running / skipped / current / missing, as
text, HTML or PNG. *current*: a node a --catch-up backfill left alone because it was materialized already
(no run of it will come); *missing*: a node with no run yet."""

from collections import Counter
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import cast

from partition_assets.backfill.model import Node, NodeStatus
from partition_assets.backfill.planning.graph import BackfillGraph

_GLYPHS: dict[NodeStatus | None, str] = {
    NodeStatus.SUCCEEDED: "█",
    NodeStatus.FAILED: "✗",
    NodeStatus.BLOCKED: "⊘",
    NodeStatus.RUNNING: "▶",
    NodeStatus.SKIPPED: "○",
}
# A node a --catch-up backfill skipped as current: a cell of its own, not a state of the node's runs.
CURRENT = "current (skipped by --catch-up)"
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
        legend = "legend: █ done  ✗ failed  ⊘ blocked (behind a failure)  ▶ running  ○ skipped (no output)"
        if self.current:  # only a --catch-up backfill has current nodes
            legend += f"  {_CURRENT_GLYPH} {CURRENT}"
        lines = [self.title, f"{legend}  · missing"]
        for asset, _, states in self.rows():
            cells = "".join(_glyph(state) for state in states)
            counts = Counter(_label(state) for state in states)
            summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
            lines.append(f"{asset:<28} {cells[:_TEXT_CELLS]}{'…' if len(cells) > _TEXT_CELLS else ''}  {summary}")
        return "\n".join(lines)

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
