"""A backfill's validation gate, as declared: budgets on an asset, overridable per backfill
(publishing/gate_evaluation.py checks them against the stats of each rewritten partition
before anything is published).

Declare on the asset (stored as JSON in its metadata, under GATE_METADATA_KEY):

    @dg.asset(metadata=backfill_gate(row_change=0.05, measures={"revenue": Budget(relative=0.01)},
                                     keys=["order_id"]))

Override per backfill with texts `<asset>:<rule>` (OVERRIDE_GRAMMAR), later texts win:
`daily_revenue:rows=0.2`, `daily_revenue:revenue=abs:1000`, `daily_revenue:revenue=rel:0.05`,
`daily_revenue:revenue=abs:1000,rel:0.05`, `daily_revenue:revenue=off`,
`daily_revenue:keys=order_id,region`, `daily_revenue:keys=off`, `daily_revenue:rows=off`,
`daily_revenue:off` (no gate for this asset).

Semantics of the checks (gate_evaluation.evaluate), per rewritten partition:
- rows: |new - old| <= row_change * old. A partition without rows before has no
  baseline and passes; a partition the backfill emptied counts as 0 new rows.
- a measure's sum: with a Budget of `absolute` a and `relative` r, passes when
  |new - old| <= max(a, r * |old|), i.e. either bound satisfies it (as math.isclose).
  A relative budget on an old sum of 0 allows no change. New partitions pass.
- keys: the new content has no row with a null key and no key on several rows.

Not guaranteed: rules are per partition (a budget on a whole backfill's total is not
checked); "rows" and "keys" are rule names, so measure columns with those names
cannot be overridden from the command line (declare them in code).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the command line's flags (planning/spec.py) import this module without Dagster
    import dagster as dg

from partition_assets.errors import GateConfigError

GATE_METADATA_KEY = "partition_assets/gate"
# The asset check a gate's evaluations are recorded under (backfill/dagster_ui/gate_asset_checks.py).
GATE_CHECK = "backfill_gate"
OVERRIDE_GRAMMAR = (
    "<asset>:off | <asset>:rows=<fraction>|off | <asset>:keys=<column>[,<column>...]|off | "
    "<asset>:<measure>=abs:<number>[,rel:<fraction>]|rel:<fraction>|off"
)


@dataclass(frozen=True)
class Budget:
    """How far a measure's sum may move in a partition: |new - old| <= max(absolute, relative * |old|).

    Raises:
        GateConfigError: Neither bound is given, or one is not a finite number >= 0; nothing was run.
    """

    absolute: float | None = None
    relative: float | None = None

    def __post_init__(self) -> None:
        if self.absolute is None and self.relative is None:
            raise GateConfigError("a Budget needs absolute=, relative= or both; nothing was run")
        for name, value in (("absolute", self.absolute), ("relative", self.relative)):
            if value is not None and not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise GateConfigError(
                    f"Budget {name}={value!r} must be a finite number >= 0 (e.g. 0.05); nothing was run"
                )

    def limit(self, old: float) -> float:
        """The largest |new - old| this budget allows."""
        return max(self.absolute or 0.0, (self.relative or 0.0) * abs(old))

    def to_json(self) -> dict[str, float | None]:
        return {"absolute": self.absolute, "relative": self.relative}


@dataclass(frozen=True)
class Gate:
    """The rules a backfill's new content of one asset must pass, per partition.

    Raises:
        GateConfigError: `row_change` is not a finite number >= 0, a column name is not a non-empty
            string, a measure's budget is not a Budget, or a key column is named twice; nothing was run.
    """

    row_change: float | None = None  # max relative change of a partition's row count
    measures: Mapping[str, Budget] = field(default_factory=dict)  # max change of each measure's sum
    keys: tuple[str, ...] = ()  # must be non-null and unique within a partition

    def __post_init__(self) -> None:
        if self.row_change is not None and not (
            isinstance(self.row_change, int | float) and math.isfinite(self.row_change) and self.row_change >= 0
        ):
            raise GateConfigError(
                f"gate row_change={self.row_change!r} must be a finite fraction >= 0 (0.05 = 5%); nothing was run"
            )
        keys = (self.keys,) if isinstance(self.keys, str) else tuple(self.keys)
        for column in [*self.measures, *keys]:
            if not isinstance(column, str) or not column.strip():
                raise GateConfigError(
                    f"gate column name {column!r} must be a non-empty string naming a column; nothing was run"
                )
        for column, budget in self.measures.items():
            if not isinstance(budget, Budget):
                raise GateConfigError(
                    f"gate measure {column!r} needs a Budget (e.g. Budget(relative=0.01)), got {budget!r}; "
                    "nothing was run"
                )
        if len(set(keys)) != len(keys):
            raise GateConfigError(f"gate keys {list(keys)} name a column twice; nothing was run")
        object.__setattr__(self, "keys", keys)
        object.__setattr__(self, "measures", MappingProxyType(dict(self.measures)))

    def to_json(self) -> dict[str, Any]:
        return {
            "row_change": self.row_change,
            "measures": {column: budget.to_json() for column, budget in sorted(self.measures.items())},
            "keys": list(self.keys),
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Gate:
        """The gate `to_json` wrote.

        Raises:
            GateConfigError: `row_change` is not a finite number >= 0; a column name is not a
                non-empty string; a measure's budget is not a Budget, or has neither bound or a bound
                that is not a finite number >= 0; a key column is named twice.
        """
        return cls(
            row_change=value.get("row_change"),
            measures={column: Budget(**budget) for column, budget in (value.get("measures") or {}).items()},
            keys=tuple(value.get("keys") or ()),
        )


def backfill_gate(
    row_change: float | None = None,
    measures: Mapping[str, Budget] | None = None,
    keys: Sequence[str] = (),
) -> dict[str, Any]:
    """Asset metadata declaring the asset's gate (validated now, at definition time):
    `@dg.asset(metadata=backfill_gate(row_change=0.05, keys=["order_id"]))`; merge it
    with other metadata as `{**backfill_gate(...), "owner": ...}`.

    Args:
        row_change: The largest change of a partition's row count, relative to its rows
            before (0.05 = 5%); None leaves row counts unchecked.
        measures: The Budget of each measure column's sum.
        keys: Columns whose values must be non-null and unique within a partition.

    Raises:
        GateConfigError: `row_change` is not a finite number >= 0, a column name is not a non-empty
            string, a measure's budget is not a Budget, or a key column is named twice.
    """
    return {GATE_METADATA_KEY: Gate(row_change, measures or {}, tuple(keys)).to_json()}


def gate_of(metadata: Mapping[str, Any] | None) -> Gate | None:
    """The gate an asset's metadata declares, or None when it declares none.

    Raises:
        GateConfigError: The metadata under GATE_METADATA_KEY is not a mapping, or not a valid gate.
    """
    import dagster as dg  # loaded by whatever read the metadata

    value = (metadata or {}).get(GATE_METADATA_KEY)
    if isinstance(value, dg.JsonMetadataValue):
        value = value.value
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise GateConfigError(
            f"asset metadata {GATE_METADATA_KEY!r} holds {value!r}; declare it with backfill_gate(...). "
            "Nothing was run."
        )
    return Gate.from_json(value)


@dataclass(frozen=True)
class GateOverride:
    """One parsed `<asset>:<rule>` text. `rule` is "off", "rows", "keys" or a measure column;
    `value` is None for off, a float for rows, a tuple of columns for keys, a Budget for a measure."""

    asset: str
    rule: str
    value: float | tuple[str, ...] | Budget | None


def parse_override(text: str) -> GateOverride:
    """Parses one override text; GateConfigError naming the text and the grammar when invalid.

    Raises:
        GateConfigError: `text` does not follow OVERRIDE_GRAMMAR, or its value is out of range.
    """
    asset, sep, rule_text = text.partition(":")
    rule, has_value, value = (part.strip() for part in rule_text.partition("="))
    asset = asset.strip()
    try:
        if not sep or not asset or not rule:
            raise ValueError("expected <asset>:<rule>")
        if rule == "off" and not has_value:
            return GateOverride(asset, "off", None)
        if not has_value:
            raise ValueError(f"rule {rule!r} needs =<value>")
        if value == "off":
            return GateOverride(asset, rule, None)
        if rule == "rows":
            return GateOverride(asset, rule, Gate(row_change=float(value)).row_change)
        if rule == "keys":
            return GateOverride(asset, rule, Gate(keys=tuple(k.strip() for k in value.split(","))).keys)
        return GateOverride(asset, rule, _parse_budget(value))
    except (ValueError, GateConfigError) as error:
        raise GateConfigError(
            f"gate override {text!r} is invalid ({error}); expected {OVERRIDE_GRAMMAR}. Nothing was run."
        ) from None


def _parse_budget(text: str) -> Budget:
    bounds: dict[str, float] = {}
    for part in text.split(","):
        kind, colon, number = part.strip().partition(":")
        name = {"abs": "absolute", "rel": "relative"}.get(kind)
        if not colon or name is None or name in bounds:
            raise ValueError(f"a measure budget is abs:<number>, rel:<fraction> or both, got {text!r}")
        bounds[name] = float(number)
    return Budget(**bounds)


def apply_overrides(gate: Gate | None, asset: dg.AssetKey | str, overrides: Sequence[str]) -> Gate | None:
    """`gate` (the asset's declared one, or None) with the overrides for `asset` applied in
    order; overrides for other assets are ignored. `off` drops the gate (None), and a rule
    after it starts from an empty gate. Invalid texts raise GateConfigError.

    Raises:
        GateConfigError: A text of `overrides` (for any asset) is invalid (see `parse_override`).
    """
    name = asset if isinstance(asset, str) else asset.to_user_string()
    for override in map(parse_override, overrides):
        if override.asset != name:
            continue
        if override.rule == "off":
            gate = None
            continue
        gate = gate or Gate()
        if override.rule == "rows":
            gate = replace(gate, row_change=override.value if isinstance(override.value, float) else None)
        elif override.rule == "keys":
            gate = replace(gate, keys=override.value if isinstance(override.value, tuple) else ())
        else:
            measures = {column: budget for column, budget in gate.measures.items() if column != override.rule}
            if isinstance(override.value, Budget):
                measures[override.rule] = override.value
            gate = replace(gate, measures=measures)
    return gate
