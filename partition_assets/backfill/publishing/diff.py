"""A staged backfill's diff, per (asset, partition): rows and measure sums before and after,
and whether the content changed (`backfill diff`, the UI's gate check description).

Not guaranteed: "equal" compares checksums of the partitions' content (publishing/partition_stats.py),
not row order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict

from partition_assets.backfill.publishing.gate_evaluation import shown_number, shown_partition
from partition_assets.backfill.publishing.partition_stats import PartitionStats


class MeasureChange(TypedDict):
    old: float | None
    new: float | None


class DiffRow(TypedDict):
    """One partition's change, JSON-able as it is."""

    asset: str
    partition: list[str]
    old_rows: int | None  # None where the partition had no rows
    new_rows: int | None
    measures: dict[str, MeasureChange]
    content: str  # "new", "deleted", "equal" or "changed"
    changed_columns: list[str]  # for stats taken by column (a schema change)


def diff_rows(
    asset: str,
    old: Mapping[tuple[str, ...], PartitionStats],
    new: Mapping[tuple[str, ...], PartitionStats],
) -> list[DiffRow]:
    """Per partition of `old` or `new` (sorted), JSON-able: rows and measure sums before
    and after (None where the partition had no rows), whether the content is equal and,
    for stats taken by column (a schema change, compared through its declared mapping),
    the columns that changed."""
    diffs: list[DiffRow] = []
    for partition in sorted(set(new) | set(old)):
        before, after = old.get(partition), new.get(partition)
        measures = sorted({*(before.measures if before else {}), *(after.measures if after else {})})
        diffs.append(
            DiffRow(
                asset=asset,
                partition=list(partition),
                old_rows=None if before is None else before.rows,
                new_rows=None if after is None else after.rows,
                measures={
                    m: MeasureChange(
                        old=before.measures.get(m) if before else None,
                        new=after.measures.get(m) if after else None,
                    )
                    for m in measures
                },
                content=_content_change(before, after),
                changed_columns=_changed_columns(before, after),
            )
        )
    return diffs


DIFF_HEADER = ("asset", "partition", "rows old -> new", "content", "measures old -> new")


def diff_cells(diff: DiffRow) -> list[str]:
    """One `diff_rows` result as the cells under DIFF_HEADER (the terminal's and the UI's tables)."""
    return [
        diff["asset"],
        shown_partition(diff["partition"]),
        f"{shown_number(diff['old_rows'])} -> {shown_number(diff['new_rows'])}",
        diff["content"] + (f": {','.join(diff['changed_columns'])}" if diff.get("changed_columns") else ""),
        "  ".join(f"{m}: {shown_number(v['old'])} -> {shown_number(v['new'])}" for m, v in diff["measures"].items()),
    ]


def format_diff(diffs: Sequence[DiffRow]) -> str:
    """`diff_rows` results as an aligned table for the terminal."""
    header = list(DIFF_HEADER)
    table = [header] + [diff_cells(d) for d in diffs]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table)


def _content_change(before: PartitionStats | None, after: PartitionStats | None) -> str:
    if before is None:
        return "new"
    if after is None:
        return "deleted"
    return "equal" if before.checksum == after.checksum else "changed"


def _changed_columns(before: PartitionStats | None, after: PartitionStats | None) -> list[str]:
    """The columns whose checksums differ, when both sides have them (a schema change's stats)."""
    if before is None or after is None or not (before.column_checksums and after.column_checksums):
        return []
    columns = before.column_checksums.keys() | after.column_checksums.keys()
    return sorted(c for c in columns if before.column_checksums.get(c) != after.column_checksums.get(c))
