"""Backfills that change a table's schema, on real Spark and Delta: a staged rewrite published
in ONE commit holding the new schema (a metaData action), every old file's removal and the new
files; rolled back exactly (schema and values) in one commit; a drop or retype over a partial
range refused with nothing committed. delta-rs and DuckDB read one schema at each version. The
previous version kept as `<table>__previous` shares the old files until vacuum drops it. The
gate's stats compare across types and through a declared split."""

import json
import shutil
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder
from pyspark.sql import functions as F

from partition_assets.backfill.planning.gate_rules import Budget, Gate
from partition_assets.backfill.publishing.diff import diff_rows
from partition_assets.backfill.publishing.gate_evaluation import evaluate
from partition_assets.backfill.publishing.partition_stats import mapped_to_old, partition_stats
from partition_assets.errors import (
    ForeignCommitError,
    MixedSchemaError,
    SchemaChangeError,
    SchemaRollbackError,
    TableSchemaError,
)
from partition_assets.partitions import daily
from partition_assets.storage import DeltaFormat, PartitionScope, WriteOptions
from partition_assets.storage.delta import rollback as delta_rollback
from partition_assets.storage.delta import schema_check
from partition_assets.storage.delta.previous import keep_previous, previous_copy, previous_uri
from partition_assets.storage.delta.vacuum import vacuum_table
from partition_assets.storage.schema_change import ColumnMapping
from partition_assets_tests.support.readers import duckdb_connection
from partition_assets_tests.support.retention import backdate, backdate_removes

DAYS = daily("2024-01-01")
D1, D2, D3, D4 = "2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"
ALL = [D1, D2, D3]
BACKFILL = "schema1"
CHANGE = WriteOptions(allow_schema_change=True)
NEW_COLUMNS = WriteOptions(allow_new_columns=True)


def scope(*days: str) -> PartitionScope:
    return PartitionScope.for_keys(DAYS, days, ("ds",))


def old_frame(spark, days: list[str]):
    """Per day, ids 0..3 with a double `amount` (id * 1.25) and a `tag`; one file per day."""
    day = F.element_at(F.array(*[F.lit(d) for d in days]), (F.col("id") % len(days) + 1).cast("int"))
    return (
        spark.range(4 * len(days))
        .select("id", (F.col("id") * 1.25).alias("amount"), F.lit("old").alias("tag"), day.alias("ds"))
        .repartition(1)
    )


@pytest.fixture(scope="module")
def published(spark, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("schema_change") / "t"
    DeltaFormat().write(old_frame(spark, ALL), str(path), scope(*ALL))
    return path


@pytest.fixture
def table(published, lake) -> str:
    uri = lake / "t"
    shutil.copytree(published, uri)
    return str(uri)


def stage(spark, table: str, days: list[str], change, options: WriteOptions = CHANGE) -> None:
    """Stages the published rows of `days`, changed by `change` (a frame -> frame), as the backfill's."""
    for day in days:
        frame = DeltaFormat().read(spark, table, scope(day))
        DeltaFormat().stage(change(frame), table, scope(day), options, BACKFILL)


def delta_rs_schema(table: str, version: int | None = None) -> dict[str, str]:
    return {f.name: str(f.type) for f in pa.schema(DeltaTable(table, version=version).schema().to_arrow())}


def duckdb_rows(table: str) -> tuple[dict[str, str], list[tuple]]:
    """DuckDB's column types and sorted rows of the latest version."""
    result = duckdb_connection().execute(f"SELECT * FROM delta_scan('{table}') ORDER BY id")
    types = {column[0]: str(column[1]) for column in result.description}
    return types, result.fetchall()


def delta_rs_rows(table: str, version: int | None = None) -> list[dict]:
    rows = DeltaTable(table, version=version).to_pyarrow_dataset().to_table(use_threads=False).to_pylist()
    return sorted(rows, key=lambda row: row["id"])


def commit_actions(table: str, version: int) -> list[str]:
    """The kinds of the actions the commit at `version` holds, e.g. ["commitInfo", "add", ...]."""
    log = Path(table) / "_delta_log" / f"{version:020d}.json"
    return [next(iter(json.loads(line))) for line in log.read_text().splitlines() if line.strip()]


def publish_and_roll_back(table: str) -> tuple[int, list[dict], dict[str, str], list[tuple]]:
    """Publishes the backfill (asserting ONE commit: the new schema, every old file out, the new
    files in), rolls it back (asserting one commit restoring the schema and the rows exactly);
    returns the publish version, the rows delta-rs read then, and DuckDB's types and rows then.
    At each step both readers see one schema: the same columns."""
    before_version = DeltaTable(table).version()
    before_schema, before_rows = delta_rs_schema(table), delta_rs_rows(table)
    old_files = set(DeltaTable(table).file_uris())

    result = DeltaFormat().publish_staged(table, BACKFILL, None, {})
    assert result.version == before_version + 1 == DeltaTable(table).version()
    actions = commit_actions(table, result.version)
    assert actions.count("metaData") == 1 and actions.count("remove") >= 1 and actions.count("add") >= 1
    published_rows = delta_rs_rows(table)
    duckdb_types, duckdb_published = duckdb_rows(table)
    assert duckdb_types.keys() == delta_rs_schema(table).keys() == published_rows[0].keys()
    assert delta_rs_schema(table, before_version) == before_schema  # the old version keeps its schema
    assert delta_rs_rows(table, before_version) == before_rows

    rolled = DeltaFormat().rollback(table, BACKFILL, result.version)
    assert rolled.version == result.version + 1 == DeltaTable(table).version()
    assert commit_actions(table, rolled.version).count("metaData") == 1
    assert delta_rs_schema(table) == before_schema
    assert delta_rs_rows(table) == before_rows
    assert duckdb_rows(table)[0].keys() == before_schema.keys()
    assert set(DeltaTable(table).file_uris()) == old_files  # the very files, nothing rewritten
    return result.version, published_rows, duckdb_types, duckdb_published


def test_a_double_retyped_to_decimal_over_every_partition_publishes_in_one_commit_and_rolls_back(spark, table):
    stage(spark, table, ALL, lambda f: f.withColumn("amount", F.col("amount").cast("decimal(18,6)")))
    assert DeltaFormat().staged(table, BACKFILL).schema.field("amount").type == pa.decimal128(18, 6)
    overlay = DeltaFormat().read_overlay(spark, table, scope(D2), BACKFILL)
    assert dict(overlay.dtypes)["amount"] == "decimal(18,6)"  # downstream nodes read the new schema

    version, rows, duckdb_types, duckdb_published = publish_and_roll_back(table)
    assert delta_rs_schema(table, version)["amount"] == "decimal128(18, 6)"
    assert [row["amount"] for row in rows] == [Decimal(i) * Decimal("1.25") for i in range(12)]
    assert duckdb_types["amount"].upper() == "DECIMAL(18,6)"
    assert [row[1] for row in duckdb_published] == [Decimal(i) * Decimal("1.25") for i in range(12)]
    assert delta_rs_schema(table)["amount"] == "double"


def test_a_retype_over_a_partial_range_is_refused_at_publish_and_nothing_is_committed(spark, table):
    stage(spark, table, [D1, D2], lambda f: f.withColumn("amount", F.col("amount").cast("decimal(18,6)")))
    version = DeltaTable(table).version()

    with pytest.raises(SchemaChangeError, match=r"retyped  amount: double -> decimal.*--all-partitions") as refused:
        DeltaFormat().publish_staged(table, BACKFILL, None, {})
    assert "ds=2024-01-03" in str(refused.value) and "Nothing was published" in str(refused.value)
    assert DeltaTable(table).version() == version and delta_rs_schema(table)["amount"] == "double"
    assert DeltaFormat().staged(table, BACKFILL) is not None  # kept: discard it, or stage the rest
    stage(spark, table, [D3], lambda f: f.withColumn("amount", F.col("amount").cast("decimal(18,6)")))
    DeltaFormat().publish_staged(table, BACKFILL, None, {})
    assert delta_rs_schema(table)["amount"] == "decimal128(18, 6)"


def test_a_column_added_over_a_partial_range_publishes_in_one_commit_older_partitions_read_null(spark, table):
    stage(spark, table, [D2], lambda f: f.withColumn("note", F.concat(F.lit("n"), F.col("id").cast("string"))))

    version, rows, _, _ = publish_and_roll_back(table)
    assert {row["ds"]: row["note"] is None for row in rows} == {D1: True, D2: False, D3: True}
    assert delta_rs_schema(table, version)["note"] in ("string", "large_string", "string_view")
    assert "note" not in delta_rs_schema(table)


def test_a_nullable_column_a_foreign_writer_adds_to_another_partition_is_kept_not_blamed_on_the_backfill(spark, table):
    """Issue 50 hole 10: while a backfill rewriting D1 (its schema unchanged) awaited its publish,
    production added a nullable column writing D3. The publish diff read it as the backfill
    dropping that column, refused it naming the backfill, and advised a rewrite of every
    partition that would drop production's column. The backfill's changes are measured from
    the schema it started from: the column is kept, D1 reads it null, D3 keeps its values."""
    stage(spark, table, [D1], lambda frame: frame.withColumn("tag", F.lit("new")), WriteOptions())
    expected = DeltaFormat().partition_files(table, scope(D1))  # what the backfill replaces, as it took them
    production = DeltaFormat().read(spark, table, scope(D3)).withColumn("note", F.lit("production"))
    DeltaFormat().write(production, table, scope(D3), NEW_COLUMNS)

    DeltaFormat().check_publish(table, BACKFILL, expected)
    DeltaFormat().publish_staged(table, BACKFILL, expected, {})
    rows = delta_rs_rows(table)
    assert {(row["ds"], row["tag"], row["note"]) for row in rows} == {
        (D1, "new", None),
        (D2, "old", None),
        (D3, "old", "production"),
    }


def test_a_column_a_foreign_writer_adds_is_refused_as_a_foreign_commit_when_the_backfill_drops_columns(spark, table):
    """Issue 50 hole 10, the other side: a backfill rewriting every partition without `tag`
    would drop a column production added meanwhile (writing a new day). That is a foreign
    commit, refused as one, naming the column; nothing is published, the staging is kept."""
    stage(spark, table, ALL, lambda frame: frame.drop("tag"))
    expected = DeltaFormat().partition_files(table, scope(*ALL))
    production = DeltaFormat().read(spark, table, scope(D3)).withColumn("ds", F.lit(D4))
    DeltaFormat().write(production.withColumn("note", F.lit("production")), table, scope(D4), NEW_COLUMNS)
    version = DeltaTable(table).version()

    with pytest.raises(ForeignCommitError, match=r"column\(s\) \['note'\] .* added by a commit outside backfill"):
        DeltaFormat().publish_staged(table, BACKFILL, expected, {})
    assert DeltaTable(table).version() == version and DeltaFormat().staged(table, BACKFILL) is not None


def test_a_dropped_column_publishes_in_one_commit_and_rolls_back(spark, table):
    stage(spark, table, ALL, lambda f: f.drop("tag"))

    version, rows, _, _ = publish_and_roll_back(table)
    assert "tag" not in delta_rs_schema(table, version) and all("tag" not in row for row in rows)
    assert len(rows) == 12


def test_a_split_column_publishes_in_one_commit_and_rolls_back(spark, table):
    def split(frame):
        net = F.round(F.col("amount") * 0.8, 6)
        return frame.withColumn("net", net).withColumn("tax", F.col("amount") - net).drop("amount")

    stage(spark, table, ALL, split)

    version, rows, _, _ = publish_and_roll_back(table)
    assert {"net", "tax"} <= delta_rs_schema(table, version).keys()
    assert "amount" not in delta_rs_schema(table, version)
    assert all(row["net"] + row["tax"] == pytest.approx(row["id"] * 1.25) for row in rows)


def split_amount(frame):
    net = F.round(F.col("amount") * 0.8, 6)
    return frame.withColumn("net", net).withColumn("tax", F.col("amount") - net).drop("amount")


def retype_amount(frame):
    return frame.withColumn("amount", F.col("amount").cast("decimal(18,6)"))


@pytest.mark.parametrize(
    ("change", "spark_fails"), [(split_amount, False), (retype_amount, True)], ids=["split", "retype"]
)
def test_a_schema_rollback_after_a_newer_partition_was_written_is_refused_naming_it(
    spark, table, monkeypatch, change, spark_fails
):
    stage(spark, table, ALL, change)
    published = DeltaFormat().publish_staged(table, BACKFILL, None, {}).version
    DeltaFormat().check_one_schema(lambda: spark, table, published)  # one schema, as read by Spark and delta-rs
    DeltaFormat().write(change(old_frame(spark, [D4])), table, scope(D4))  # production writes a new day
    version, schema, rows = DeltaTable(table).version(), delta_rs_schema(table), delta_rs_rows(table)

    for force in (False, True):  # force discards later changes to the backfill's partitions, not this
        with pytest.raises(SchemaRollbackError, match=r"partitions \[ds=2024-01-04\] outside it") as refused:
            DeltaFormat().rollback(table, BACKFILL, published, force=force)
        assert "Nothing was committed" in str(refused.value) and "new backfill over every partition" in str(
            refused.value
        )
    assert (DeltaTable(table).version(), delta_rs_schema(table), delta_rs_rows(table)) == (version, schema, rows)

    # What the refusal prevents, made on purpose: the check after the schema commit finds the mix.
    monkeypatch.setattr(delta_rollback._RollbackPlan, "_check_no_later_partitions", lambda plan, now: None)
    rolled = DeltaFormat().rollback(table, BACKFILL, published).version
    with pytest.raises(MixedSchemaError, match="ds=2024-01-04/"):  # the footer of the day's file
        DeltaFormat().check_one_schema(lambda: spark, table, rolled)
    # Spark's read alone: the retyped day fails it; the split day reads `amount` as null, silently.
    monkeypatch.setattr(schema_check, "_file_problems", lambda *args: [])
    if spark_fails:
        with pytest.raises(MixedSchemaError, match="PARQUET_COLUMN_DATA_TYPE_MISMATCH"):
            DeltaFormat().check_one_schema(lambda: spark, table, rolled)
    else:
        DeltaFormat().check_one_schema(lambda: spark, table, rolled)
        assert {row["ds"] for row in delta_rs_rows(table) if row["amount"] is None} == {D4}


def test_without_a_declared_change_staging_and_writing_still_refuse_a_retype(spark, table):
    retyped = old_frame(spark, [D1]).withColumn("amount", F.col("amount").cast("decimal(18,6)"))
    with pytest.raises(TableSchemaError, match="declare_schema_change"):
        DeltaFormat().stage(retyped, table, scope(D1), WriteOptions(), BACKFILL)
    with pytest.raises(TableSchemaError, match="declare_schema_change"):
        DeltaFormat().write(retyped, table, scope(D1))
    assert delta_rs_schema(table)["amount"] == "double"


def test_a_kept_previous_version_shares_the_old_files_and_vacuum_drops_it_after_expiry(spark, table):
    old_rows = delta_rs_rows(table)
    old_files = {Path(uri).relative_to(table).as_posix() for uri in DeltaTable(table).file_uris()}
    stage(spark, table, ALL, lambda f: f.withColumn("amount", F.col("amount").cast("decimal(18,6)")))
    published = DeltaFormat().publish_staged(table, BACKFILL, None, {}).version
    expires = datetime(2030, 1, 1, tzinfo=UTC)

    copy = keep_previous(table, published - 1, BACKFILL, expires)
    assert keep_previous(table, published - 1, BACKFILL, expires) == copy  # idempotent: one commit
    assert copy.uri == previous_uri(table) == f"{table}__previous" and DeltaTable(copy.uri).version() == 0
    assert copy.shared_paths == old_files and copy.version == published - 1
    assert not list(Path(copy.uri).rglob("*.parquet"))  # nothing copied: its log names the table's files
    # Readable with the old schema and rows (delta-rs through DataFusion resolves absolute paths).
    read = pa.table(QueryBuilder().register("p", DeltaTable(copy.uri)).execute("SELECT * FROM p").read_all())
    assert str(read.schema.field("amount").type) == "double"
    assert sorted(read.to_pylist(), key=lambda row: row["id"]) == old_rows

    backdate(Path(table), 2)
    backdate_removes(table, published, 2)  # two hours on: the replaced files are past the retention
    before_expiry = vacuum_table(table, 1, dry_run=False, now=expires - timedelta(days=1))
    assert before_expiry.dropped_tables == [] and not old_files & set(before_expiry.data_files)
    assert all((Path(table) / path).exists() for path in old_files)
    assert DeltaTable.is_deltatable(copy.uri)

    after_expiry = vacuum_table(table, 1, dry_run=False, now=expires)
    assert after_expiry.dropped_tables == [copy.uri] and not DeltaTable.is_deltatable(copy.uri)
    assert old_files <= set(after_expiry.data_files)
    assert not any((Path(table) / path).exists() for path in old_files)
    assert previous_copy(table) is None and len(delta_rs_rows(table)) == 12


def test_the_gate_compares_across_types_and_through_a_declared_split(spark):
    old = old_frame(spark, ALL)
    mapping = ColumnMapping(split={"amount": ("net", "tax")})  # declared: it applies where net and tax are
    gate = Gate(measures={"amount": Budget(relative=0.001)})

    def split(share_of_tax: float):
        net = F.col("amount") * 0.8
        return old.withColumn("net", net).withColumn("tax", F.col("amount") * share_of_tax).drop("amount")

    old_stats = partition_stats(old, ["ds"], ["amount"], by_column=True)
    for new, passes, changed in [
        (old.withColumn("amount", F.col("amount").cast("decimal(18,6)")), True, []),  # a double sum vs a decimal one
        (split(0.2), True, None),  # net + tax sum to the amount (up to rounding)
        (split(0.4), False, ["amount"]),  # a wrong split: the gate fails, the diff names the column
    ]:
        mapped = mapped_to_old(new, old.schema, mapping)
        assert mapped.columns[: len(old.columns)] == old.columns
        new_stats = partition_stats(mapped, ["ds"], ["amount"], by_column=True)
        checks = evaluate("t", gate, old_stats, new_stats)
        assert len(checks) == 3 and all(check.passed == passes for check in checks), checks
        diffs = diff_rows("t", old_stats, new_stats)
        if changed is not None:
            assert all(d["changed_columns"] == changed for d in diffs), diffs
            assert all(d["content"] == ("equal" if not changed else "changed") for d in diffs)
