"""What a backfill's new schema changes in a table's schema, column by column: added,
dropped, retyped, and renamed or split as the asset declares (`declare_schema_change`).

A Delta table has one schema, so any change but a nullable column added means every
partition must be rewritten in the same commit (`rewrites_every_partition`); an added
column may cover a partial range, the other partitions reading it as null.

Declare on the asset (stored as JSON in its metadata, under SCHEMA_CHANGE_METADATA_KEY):

    @dg.asset(metadata=declare_schema_change(renamed={"amt": "amount"}, split={"amount": ["net", "tax"]}))

A rename says the new column holds the old one's values; a split says the new columns sum
to the old one (the gate compares them so, see backfill/publishing/diff.py).

Not guaranteed: nothing here reads data; partition columns never change (the write refuses
that before any of this); nested fields are compared as whole columns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import pyarrow as pa

from partition_assets.errors import SchemaChangeError
from partition_assets.storage.delta.types import delta_type_name

SCHEMA_CHANGE_METADATA_KEY = "partition_assets/schema_change"
# Dagster's asset metadata of an asset's columns: what the code declares, and what a publish records.
COLUMN_SCHEMA_METADATA = "dagster/column_schema"
# Materialization metadata of a publish (or rollback) that changed the table's schema: the change.
SCHEMA_CHANGE_METADATA = "schema_change"

ChangeKind = Literal["added", "dropped", "retyped", "renamed", "split"]


@dataclass(frozen=True)
class ColumnMapping:
    """Columns the code declares renamed (old -> new) or split (old -> parts summing to it).

    Raises:
        SchemaChangeError: A column is mapped twice, or a split has fewer than two parts; nothing was run.
    """

    renamed: Mapping[str, str] = field(default_factory=dict)
    split: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        split = {old: (parts,) if isinstance(parts, str) else tuple(parts) for old, parts in self.split.items()}
        for old, parts in split.items():
            if len(parts) < 2 or len(set(parts)) != len(parts):
                raise SchemaChangeError(
                    f"split {old!r} -> {list(parts)} must name two or more distinct columns whose sum is "
                    f"{old!r}; fix declare_schema_change(split=...). Nothing was run."
                )
        twice = set(self.renamed) & set(split)
        if twice:
            raise SchemaChangeError(
                f"column(s) {sorted(twice)} are both renamed and split: declare one of them. Nothing was run."
            )
        object.__setattr__(self, "renamed", MappingProxyType(dict(self.renamed)))
        object.__setattr__(self, "split", MappingProxyType(split))

    def new_columns_of(self, old: str) -> tuple[str, ...]:
        """The new columns holding old column `old`'s values (itself when not mapped)."""
        if old in self.renamed:
            return (self.renamed[old],)
        return self.split.get(old, (old,))

    def applied(self, old: str, new_columns: Sequence[str]) -> tuple[str, ...] | None:
        """The new columns standing for old column `old` in a schema of `new_columns`, when its
        declared rename or split applies there (`old` is gone, every new column is present);
        None when it does not (not declared, or the schema is not the one declared)."""
        targets = self.new_columns_of(old)
        if targets == (old,) or old in new_columns or not all(t in new_columns for t in targets):
            return None
        return targets

    def old_column_of(self, column: str) -> str:
        """The old column a measure named `column` compares against: `column` itself, or the
        column renamed to it."""
        return next((old for old, new in self.renamed.items() if new == column), column)

    def to_json(self) -> dict[str, Any]:
        return {"renamed": dict(self.renamed), "split": {old: list(parts) for old, parts in self.split.items()}}

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> ColumnMapping:
        """The mapping an asset's metadata declares (none when it declares none).

        Raises:
            SchemaChangeError: The declaration is not what `declare_schema_change` writes.
        """
        raw = metadata.get(SCHEMA_CHANGE_METADATA_KEY)
        if raw is None:
            return NO_MAPPING
        value = getattr(raw, "value", raw)  # dagster wraps metadata values
        value = json.loads(value) if isinstance(value, str) else value
        if not isinstance(value, Mapping):
            raise SchemaChangeError(
                f"asset metadata {SCHEMA_CHANGE_METADATA_KEY} is {value!r}: declare it with "
                "declare_schema_change(renamed=..., split=...). Nothing was run."
            )
        return cls(renamed=value.get("renamed") or {}, split=value.get("split") or {})


NO_MAPPING = ColumnMapping()


def declare_schema_change(
    renamed: Mapping[str, str] | None = None, split: Mapping[str, Sequence[str]] | None = None
) -> dict[str, str]:
    """Asset metadata declaring how the asset's new schema maps its old columns.

    Raises:
        SchemaChangeError: See ColumnMapping.
    """
    mapping = ColumnMapping(renamed=renamed or {}, split={old: tuple(parts) for old, parts in (split or {}).items()})
    return {SCHEMA_CHANGE_METADATA_KEY: json.dumps(mapping.to_json(), sort_keys=True)}


@dataclass(frozen=True)
class ColumnChange:
    """One column's change: `column` is its old name (its new one when added)."""

    kind: ChangeKind
    column: str
    old_type: str | None = None
    new_type: str | None = None
    new_columns: tuple[str, ...] = ()  # a rename's or a split's new columns

    def describe(self) -> str:
        if self.kind == "added":
            return f"added    {self.column}: {self.new_type} (nullable)"
        if self.kind == "dropped":
            return f"dropped  {self.column}: {self.old_type}"
        if self.kind == "retyped":
            return f"retyped  {self.column}: {self.old_type} -> {self.new_type}"
        arrow = " + ".join(self.new_columns)
        return f"{self.kind:<8} {self.column} -> {arrow} (declared)"


@dataclass(frozen=True)
class SchemaChange:
    """The changes between a table's schema and a new one, in the old schema's column order."""

    changes: tuple[ColumnChange, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.changes)

    @property
    def rewrites_every_partition(self) -> bool:
        """Whether the change needs every partition rewritten: anything but added columns."""
        return any(change.kind != "added" for change in self.changes)

    @property
    def changed_columns(self) -> tuple[str, ...]:
        """The old columns whose values moved, changed type or went (what readers of them notice)."""
        return tuple(change.column for change in self.changes if change.kind != "added")

    def describe(self) -> list[str]:
        return [change.describe() for change in self.changes]

    def to_json(self) -> list[dict[str, Any]]:
        return [
            {
                "kind": c.kind,
                "column": c.column,
                "old_type": c.old_type,
                "new_type": c.new_type,
                "new_columns": list(c.new_columns),
            }
            for c in self.changes
        ]


def diff_schemas(old: pa.Schema, new: pa.Schema, mapping: ColumnMapping = NO_MAPPING) -> SchemaChange:
    """The column changes from `old` to `new`: a mapped column whose new columns are all in
    `new` is renamed or split (not dropped and added); any other column `new` lacks is
    dropped, any `new` has and `old` lacks is added, and a column whose logical (Delta)
    type differs is retyped. Types compare as Delta stores them (a large string is a string)."""
    old_types = {f.name: f.type for f in old}
    new_types = {f.name: f.type for f in new}
    changes: list[ColumnChange] = []
    mapped_to: set[str] = set()
    for name, old_type in old_types.items():
        targets = mapping.applied(name, list(new_types))
        if targets is not None:
            kind: ChangeKind = "renamed" if name in mapping.renamed else "split"
            new_type = ", ".join(delta_type_name(new_types[t]) for t in targets)
            changes.append(ColumnChange(kind, name, delta_type_name(old_type), new_type, targets))
            mapped_to.update(targets)
        elif name not in new_types:
            changes.append(ColumnChange("dropped", name, delta_type_name(old_type)))
        elif delta_type_name(old_type) != delta_type_name(new_types[name]):
            changes.append(ColumnChange("retyped", name, delta_type_name(old_type), delta_type_name(new_types[name])))
    for name, new_type in new_types.items():
        if name not in old_types and name not in mapped_to:
            changes.append(ColumnChange("added", name, None, delta_type_name(new_type)))
    return SchemaChange(tuple(changes))


def schema_after(published: pa.Schema, staged: Sequence[pa.Schema], started_from: pa.Schema | None = None) -> pa.Schema:
    """The table's schema once `staged` (a backfill's current stagings, in order) publish:
    the published schema plus the columns the stagings add when they keep every column and
    type of `started_from` (the published schema the backfill started from; None: the
    published one), so that columns added to the table since by commits outside the backfill
    stay; else the stagings' own (their first's, plus what later ones add), as only a
    rewrite of every partition may publish. Changed and added columns are nullable:
    partitions staged without them read null."""
    merged = staged[0]
    for schema in staged[1:]:
        for staged_field in schema:
            if staged_field.name not in merged.names:
                merged = merged.append(staged_field)
    if not diff_schemas(published if started_from is None else started_from, merged).rewrites_every_partition:
        return pa.schema([*published, *(f.with_nullable(True) for f in merged if f.name not in published.names)])
    as_published = {f.name: f for f in published}
    return pa.schema(
        [
            as_published[f.name] if f.name in as_published and _same(as_published[f.name], f) else f.with_nullable(True)
            for f in merged
        ]
    )


def _same(old: pa.Field, new: pa.Field) -> bool:
    return delta_type_name(old.type) == delta_type_name(new.type)
