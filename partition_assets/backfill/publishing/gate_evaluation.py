"""The gate's evaluation: every rule of an asset's gate (planning/gate_rules.py) checked on
every partition the backfill rewrote, from the stats of its old and new content
(publishing/partition_stats.py), as `GateCheck`s; and those checks as terminal lines.

Not guaranteed: rules are checked per partition; a budget on a whole backfill's total is
not (see planning/gate_rules.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from partition_assets.backfill.planning.gate_rules import Gate
from partition_assets.backfill.publishing.partition_stats import PartitionStats


@dataclass(frozen=True)
class GateCheck:
    """One rule checked on one partition. `old`/`new` are the rule's numbers (rows, a sum,
    a count of bad keys); `limit` is the largest |new - old| allowed (for keys: the most
    bad rows allowed, 0), None when the partition had no baseline."""

    asset: str
    partition: tuple[str, ...]
    rule: str  # "rows", "sum(<measure>)", "null_keys" or "duplicate_keys"
    old: float | None
    new: float
    limit: float | None
    passed: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "asset": self.asset,
            "partition": list(self.partition),
            "rule": self.rule,
            "old": self.old,
            "new": self.new,
            "limit": self.limit,
            "passed": self.passed,
        }


_EMPTY = PartitionStats(rows=0, checksum="", measures={}, null_keys=0, duplicate_keys=0)


def evaluate(
    asset: str,
    gate: Gate,
    old: Mapping[tuple[str, ...], PartitionStats],
    new: Mapping[tuple[str, ...], PartitionStats],
) -> list[GateCheck]:
    """Every check of `gate` on every partition the backfill rewrote: each partition of
    `new`, and each of `old` missing from `new` (the backfill deleted its rows). `old`
    must hold the published stats of (at least) those partitions."""
    checks = []
    for partition in sorted(set(new) | set(old)):
        before, after = old.get(partition), new.get(partition, _EMPTY)
        if gate.row_change is not None:
            old_rows = None if before is None else before.rows
            limit = None if before is None else gate.row_change * before.rows
            checks.append(_check(asset, partition, "rows", old_rows, after.rows, limit))
        for column, budget in sorted(gate.measures.items()):
            old_sum = None if before is None else before.measures[column]
            limit = None if old_sum is None else budget.limit(old_sum)
            new_sum = after.measures[column] if after is not _EMPTY else 0.0
            checks.append(_check(asset, partition, f"sum({column})", old_sum, new_sum, limit))
        if gate.keys:
            checks.append(_check(asset, partition, "null_keys", 0, after.null_keys, 0))
            checks.append(_check(asset, partition, "duplicate_keys", 0, after.duplicate_keys, 0))
    return checks


def _check(
    asset: str, partition: tuple[str, ...], rule: str, old: float | None, new: float, limit: float | None
) -> GateCheck:
    passed = limit is None or old is None or abs(new - old) <= limit
    return GateCheck(asset, partition, rule, old, new, limit, passed)


def format_checks(checks: Sequence[GateCheck], only_failed: bool = True) -> str:
    """The checks as terminal lines, e.g. `daily_revenue 2024-01-02 rows: 100 -> 140 (limit ±10) FAILED`."""
    lines = []
    for c in checks:
        if only_failed and c.passed:
            continue
        limit = "no baseline" if c.limit is None else f"limit ±{shown_number(c.limit)}"
        old = "-" if c.old is None else shown_number(c.old)
        verdict = "ok" if c.passed else "FAILED"
        lines.append(
            f"{c.asset} {shown_partition(c.partition)} {c.rule}: {old} -> {shown_number(c.new)} ({limit}) {verdict}"
        )
    return "\n".join(lines)


def shown_partition(values: Sequence[str]) -> str:
    """A partition key (its dimensions' keys) as the terminal and the UI show it."""
    return "|".join(values)


def shown_number(value: float | None) -> str:
    """A count or a sum as shown: an integer without decimals, "-" for None."""
    if value is None:
        return "-"
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"
