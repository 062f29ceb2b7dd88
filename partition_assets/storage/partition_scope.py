"""Partition keys -> the partition columns and values of a table: the one place both
writes (what to replace) and reads (what to select) get their predicates from."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import dagster as dg

TIME_COLUMN = "ds"
KEY_COLUMN = "partition"
# dagster-deltalake's asset metadata naming the partition column(s), honoured here too.
PARTITION_EXPR = "partition_expr"


def partition_columns(
    partitions_def: dg.PartitionsDefinition, metadata: Mapping[str, object] | None = None
) -> tuple[str, ...]:
    """The table's partition columns: one per dimension, each holding the key as a string
    (or, for keys that are ISO dates, as a date: see write_staging.with_partition_columns).

    Defaults: `ds` for a time dimension, `partition` for a static or dynamic one,
    the dimension names for multi partitions. Asset metadata overrides them:
    `partition_column` (one dimension) or `partition_columns` ({dimension: column}), or
    dagster-deltalake's `partition_expr` (a column, or {dimension: column}), so that one
    entry names the column for both IO managers.
    """
    metadata = metadata or {}
    expr = metadata.get(PARTITION_EXPR)
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        renamed = cast(
            Mapping[str, str], metadata.get("partition_columns") or (expr if isinstance(expr, Mapping) else {})
        )
        return tuple(renamed.get(name, name) for name in partitions_def.partition_dimension_names)
    if "partition_column" in metadata:
        return (str(metadata["partition_column"]),)
    if isinstance(expr, str):
        return (expr,)
    if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        return (TIME_COLUMN,)
    return (KEY_COLUMN,)


@dataclass(frozen=True)
class PartitionScope:
    """A set of partitions of one table, as rows of partition-column values."""

    columns: tuple[str, ...]
    rows: frozenset[tuple[str, ...]]

    @classmethod
    def for_keys(
        cls,
        partitions_def: dg.PartitionsDefinition,
        keys: Iterable[str],
        columns: Sequence[str],
    ) -> PartitionScope:
        """The partitions `keys` of `partitions_def`, as rows of the table's partition `columns`.

        Args:
            keys: Partition keys; a multi-partition key as a MultiPartitionKey or its string form.
            columns: The table's partition columns, one per dimension in the order
                `partition_columns` returns them.
        """
        if isinstance(partitions_def, dg.MultiPartitionsDefinition):
            dimensions = partitions_def.partition_dimension_names
            rows = set()
            for key in keys:
                multi_key = (
                    key if isinstance(key, dg.MultiPartitionKey) else partitions_def.get_partition_key_from_str(key)
                )
                by_dimension = multi_key.keys_by_dimension
                rows.add(tuple(by_dimension[dimension] for dimension in dimensions))
            return cls(tuple(columns), frozenset(rows))
        return cls(tuple(columns), frozenset((str(key),) for key in keys))

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def single_row(self) -> dict[str, str] | None:
        """The column values when the scope is exactly one partition."""
        if len(self.rows) != 1:
            return None
        return dict(zip(self.columns, next(iter(self.rows)), strict=True))

    def contains(self, values: Mapping[str, str | None]) -> bool:
        return tuple(values.get(column) for column in self.columns) in self.rows

    def delta_filter(self) -> list[list[tuple[str, str, object]]]:
        """A disjunctive-normal-form filter for delta-rs: per first-column value, the second's."""
        if len(self.columns) == 1:
            return [[(self.columns[0], "in", sorted(row[0] for row in self.rows))]]
        first, second = self.columns  # Dagster's multi partitions have two dimensions
        seconds_by_first: dict[str, list[str]] = defaultdict(list)
        for row in sorted(self.rows):
            seconds_by_first[row[0]].append(row[1])
        return [[(first, "=", value), (second, "in", seconds)] for value, seconds in seconds_by_first.items()]

    def describe(self, limit: int = 5) -> str:
        """The first `limit` partitions (sorted) as `col=value` text, and how many more: for messages."""
        shown = sorted(self.rows)[:limit]
        text = ", ".join("/".join(f"{c}={v}" for c, v in zip(self.columns, row, strict=True)) for row in shown)
        more = f" and {len(self.rows) - limit} more" if len(self.rows) > limit else ""
        return f"[{text}{more}]"
