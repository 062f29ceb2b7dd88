"""A schema change, column by column, without data: the diff (added, dropped, retyped, renamed or
split as declared), which changes need every partition, the schema a backfill publishes, the
declaration in asset metadata, and the plan's refusal of a partial range."""

from datetime import timedelta

import dagster as dg
import pyarrow as pa
import pytest

from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing.schema_plan import declared_schema, plan_schema_changes
from partition_assets.backfill.publishing.tables import BackfillTable
from partition_assets.errors import BackfillPlanError, SchemaChangeError
from partition_assets.partitions import daily
from partition_assets.storage import DeltaFormat, declare_schema_change
from partition_assets.storage.schema_change import COLUMN_SCHEMA_METADATA, ColumnMapping, diff_schemas, schema_after

OLD = pa.schema([("id", pa.int64()), ("amount", pa.float64()), ("tag", pa.string()), ("ds", pa.string())])


def kinds(change) -> dict[str, str]:
    return {c.column: c.kind for c in change.changes}


def test_no_change_is_empty_and_string_flavours_are_one_type():
    same = pa.schema([("id", pa.int64()), ("amount", pa.float64()), ("tag", pa.large_string()), ("ds", pa.string())])
    assert not diff_schemas(OLD, same)


def test_a_retype_and_a_drop_need_every_partition_an_added_column_does_not():
    retyped = OLD.set(1, pa.field("amount", pa.decimal128(18, 6)))
    change = diff_schemas(OLD, retyped)
    assert kinds(change) == {"amount": "retyped"} and change.rewrites_every_partition
    assert change.describe() == ["retyped  amount: double -> decimal(18,6)"]

    dropped = diff_schemas(OLD, OLD.remove(2))
    assert kinds(dropped) == {"tag": "dropped"} and dropped.rewrites_every_partition
    assert dropped.changed_columns == ("tag",)

    added = diff_schemas(OLD, OLD.append(pa.field("note", pa.string())))
    assert kinds(added) == {"note": "added"} and not added.rewrites_every_partition
    assert added.describe() == ["added    note: string (nullable)"] and added.changed_columns == ()


def test_declared_renames_and_splits_are_reported_as_such_not_as_drops_and_adds():
    new = pa.schema(
        [("id", pa.int64()), ("net", pa.float64()), ("tax", pa.float64()), ("label", pa.string()), ("ds", pa.string())]
    )
    undeclared = diff_schemas(OLD, new)
    assert kinds(undeclared) == {
        "amount": "dropped",
        "tag": "dropped",
        "net": "added",
        "tax": "added",
        "label": "added",
    }

    mapping = ColumnMapping(renamed={"tag": "label"}, split={"amount": ("net", "tax")})
    change = diff_schemas(OLD, new, mapping)
    assert kinds(change) == {"amount": "split", "tag": "renamed"} and change.rewrites_every_partition
    assert change.describe() == ["split    amount -> net + tax (declared)", "renamed  tag -> label (declared)"]
    assert mapping.new_columns_of("amount") == ("net", "tax") and mapping.old_column_of("label") == "tag"


def test_the_declaration_round_trips_through_asset_metadata_and_refuses_nonsense():
    metadata = declare_schema_change(renamed={"tag": "label"}, split={"amount": ["net", "tax"]})
    mapping = ColumnMapping.from_metadata(metadata)
    assert dict(mapping.renamed) == {"tag": "label"} and dict(mapping.split) == {"amount": ("net", "tax")}
    assert ColumnMapping.from_metadata({}) == ColumnMapping()
    with pytest.raises(SchemaChangeError, match="two or more distinct columns"):
        declare_schema_change(split={"amount": ["net"]})
    with pytest.raises(SchemaChangeError, match="both renamed and split"):
        declare_schema_change(renamed={"amount": "x"}, split={"amount": ["net", "tax"]})


def test_the_published_schema_extends_the_old_one_or_is_the_stagings_own():
    added = schema_after(OLD, [OLD.append(pa.field("note", pa.string(), nullable=False))])
    assert added.names == [*OLD.names, "note"] and added.field("note").nullable

    retyped = OLD.set(1, pa.field("amount", pa.decimal128(18, 6), nullable=False))
    published = schema_after(OLD, [retyped, retyped.append(pa.field("note", pa.string()))])
    assert published.names == [*OLD.names, "note"]
    assert published.field("amount").type == pa.decimal128(18, 6) and published.field("amount").nullable
    assert schema_after(OLD, [OLD.remove(2)]).names == ["id", "amount", "ds"]


def test_a_declared_column_schema_reads_as_arrow_with_spark_aliases():
    columns = [
        dg.TableColumn("id", "bigint"),
        dg.TableColumn("amount", "decimal(18,6)"),
        dg.TableColumn("ds", "string"),
    ]
    schema = declared_schema({"dagster/column_schema": dg.TableSchema(columns=columns)})
    assert schema is not None and schema.field("amount").type == pa.decimal128(18, 6)
    assert schema.field("id").type == pa.int64()
    assert declared_schema({}) is None
    with pytest.raises(SchemaChangeError, match="no Delta type"):
        declared_schema({"dagster/column_schema": dg.TableSchema(columns=[dg.TableColumn("x", "money")])})


def test_keep_previous_takes_a_duration_and_all_partitions_contradicts_a_range():
    spec = BackfillSpec(module="m", selection="*", all_partitions=True, keep_previous="30d")
    assert spec.keep_previous_for() == timedelta(days=30)
    assert BackfillSpec(module="m", selection="*", keep_previous="12h").keep_previous_for() == timedelta(hours=12)
    assert BackfillSpec(module="m", selection="*").keep_previous_for() is None
    for bad in ("30", "0d", "1w", "d", "-3h"):
        with pytest.raises(BackfillPlanError, match="--keep-previous .* e.g. 30d"):
            BackfillSpec(module="m", selection="*", keep_previous=bad)
    with pytest.raises(BackfillPlanError, match="--all-partitions and --start/--end or --keys contradict"):
        BackfillSpec(module="m", selection="*", all_partitions=True, start="2024-01-01", end="2024-01-02")


class PublishedTable(DeltaFormat):
    """A Delta table as the plan sees it, without one on disk: its schema and partitions."""

    def __init__(self, schema: pa.Schema, days: list[str]) -> None:
        self._schema, self._days = schema, days

    def schema(self, table_uri, version=None):
        return self._schema

    def partition_files(self, table_uri, scope):
        return {(day,): frozenset() for day in self._days}


def planned(declared: list[tuple[str, str]], backfilled: list[str], **declaration) -> list:
    days = daily("2024-01-01", end="2024-01-04")
    metadata = {
        **declare_schema_change(**declaration),
        COLUMN_SCHEMA_METADATA: dg.TableSchema(columns=[dg.TableColumn(n, t) for n, t in declared]),
    }
    table = BackfillTable(
        asset=dg.AssetKey("t"),
        uri="lake/t",
        table_format=PublishedTable(OLD, ["2024-01-01", "2024-01-02", "2024-01-03"]),
        columns=("ds",),
        partitions_def=days,
        partition_keys=tuple(backfilled),
        metadata=metadata,
        spark=None,  # the plan reads no rows
    )
    return plan_schema_changes({table.asset: table}, {table.asset: ["report"]})


def test_the_plan_reports_each_column_and_refuses_a_retype_over_a_partial_range():
    v1 = [("id", "bigint"), ("amount", "double"), ("tag", "string")]
    assert planned(v1, ["2024-01-02"]) == []  # no change: nothing to report

    added = planned([*v1, ("note", "string")], ["2024-01-02"])
    assert added[0].describe()[1:] == [
        "  added    note: string (nullable)",
        "  added columns only: the 2 partitions outside the range read them as null",
    ]

    retyped = [("id", "bigint"), ("amount", "decimal(18,6)"), ("tag", "string")]
    with pytest.raises(SchemaChangeError, match=r"(?s)retyped  amount: double -> decimal\(18,6\).*1 of the table's 3"):
        planned(retyped, ["2024-01-02"])
    whole = planned(retyped, ["2024-01-01", "2024-01-02", "2024-01-03"])
    assert whole[0].change.rewrites_every_partition
    assert "read outside the backfill by report: they see amount change" in whole[0].describe()[-1]

    split = planned(
        [("id", "bigint"), ("net", "double"), ("tax", "double"), ("tag", "string")],
        ["2024-01-01", "2024-01-02", "2024-01-03"],
        split={"amount": ["net", "tax"]},
    )
    assert split[0].describe()[1] == "  split    amount -> net + tax (declared)"
