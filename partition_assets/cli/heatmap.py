"""A backfill's per-asset partition heatmap: done / failed / blocked / running / skipped / missing, as text, HTML
or PNG."""

from collections import Counter
from dataclasses import dataclass

from partition_assets.backfill.model import Node, NodeStatus
from partition_assets.backfill.planning.graph import BackfillGraph

_GLYPHS: dict[NodeStatus | None, str] = {
    NodeStatus.SUCCEEDED: "█",
    NodeStatus.FAILED: "✗",
    NodeStatus.BLOCKED: "⊘",
    NodeStatus.RUNNING: "▶",
    NodeStatus.SKIPPED: "○",
}
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
    states: dict[Node, NodeStatus]  # nodes absent here are missing
    title: str

    def rows(self) -> list[tuple[str, list[str], list[NodeStatus | None]]]:
        """(asset, partition keys, state of each) in the graph's order."""
        return [
            (
                key.to_user_string(),
                asset_slice.partition_keys,
                [self.states.get(Node(key, p)) for p in asset_slice.partition_keys],
            )
            for key, asset_slice in self.graph.slices.items()
        ]

    def text(self) -> str:
        lines = [
            self.title,
            "legend: █ done  ✗ failed  ⊘ blocked (behind a failure)  ▶ running  ○ skipped (no output)  · missing",
        ]
        for asset, _, states in self.rows():
            cells = "".join(_GLYPHS.get(state, "·") for state in states)
            counts = Counter(state.value if state else "missing" for state in states)
            summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
            lines.append(f"{asset:<28} {cells[:_TEXT_CELLS]}{'…' if len(cells) > _TEXT_CELLS else ''}  {summary}")
        return "\n".join(lines)

    def html(self) -> str:
        rows = []
        for asset, keys, states in self.rows():
            cells = "".join(
                f'<td title="{key}" style="background:{COLORS.get(state, MISSING_COLOR)}"></td>'
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
                    fill=COLORS.get(state, MISSING_COLOR),
                )
        image.save(path, format="PNG")
