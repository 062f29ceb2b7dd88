"""Partition stats computed by Spark: an order-independent, duplicate-sensitive checksum,
exact measure sums and key counts, on real frames and on files written by Spark; the gate
evaluated on them (partition_assets_tests/unit/test_gate_rules.py evaluates it on hand-made stats)."""

from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from partition_assets.backfill.publishing.diff import diff_rows
from partition_assets.backfill.publishing.gate_evaluation import evaluate
from partition_assets.backfill.publishing.partition_stats import PartitionStats, partition_stats
from partition_assets_tests.unit.test_gate_rules import DECLARED

SCHEMA = StructType(
    [
        StructField("ds", StringType()),
        StructField("order_id", LongType()),
        StructField("region", StringType()),
        StructField("revenue", DoubleType()),
    ]
)
ROWS = [
    ("2024-01-01", 1, "eu", 10.5),
    ("2024-01-01", 2, "us", 20.0),
    ("2024-01-01", 3, None, 1.25),
    ("2024-01-02", 4, "eu", 7.0),
]


def stats_of(spark, rows, **kwargs):
    return partition_stats(spark.createDataFrame(rows, SCHEMA), ["ds"], **kwargs)


def checksums(spark, rows) -> dict:
    return {partition: s.checksum for partition, s in stats_of(spark, rows).items()}


def test_same_rows_in_another_order_split_or_column_order_give_the_same_checksum(spark, tmp_path):
    original = stats_of(spark, ROWS)
    assert set(original) == {("2024-01-01",), ("2024-01-02",)}
    assert all(isinstance(s.checksum, str) for s in original.values())

    shuffled = spark.createDataFrame(list(reversed(ROWS)), SCHEMA).repartition(3, "order_id")
    reordered_columns = shuffled.select("revenue", "ds", "region", "order_id")
    assert partition_stats(reordered_columns, ["ds"]) == original

    # The same rows written as several files by Spark and read back.
    spark.createDataFrame(ROWS, SCHEMA).repartition(4).write.parquet(str(tmp_path / "files"))
    from_files = spark.read.parquet(str(tmp_path / "files"))
    assert from_files.inputFiles() and len(from_files.inputFiles()) > 1
    assert partition_stats(from_files, ["ds"]) == original


def test_one_changed_value_changes_only_its_partitions_checksum(spark):
    changed = [ROWS[0], ROWS[1], ("2024-01-01", 3, None, 1.26), ROWS[3]]
    before, after = checksums(spark, ROWS), checksums(spark, changed)
    assert after[("2024-01-01",)] != before[("2024-01-01",)]
    assert after[("2024-01-02",)] == before[("2024-01-02",)]


def test_a_duplicated_row_changes_the_checksum(spark):
    assert checksums(spark, [*ROWS, ROWS[0]]) != checksums(spark, ROWS)
    # Duplicating a row twice is not the same as once (no cancellation by xor).
    assert checksums(spark, [*ROWS, ROWS[0], ROWS[0]]) != checksums(spark, [*ROWS, ROWS[0]])


def test_null_differs_from_empty_string_and_zero_and_from_a_null_in_another_column(spark):
    schema = StructType([StructField("ds", StringType()), StructField("a", StringType()), StructField("b", LongType())])

    def checksum(row):
        return partition_stats(spark.createDataFrame([row], schema), ["ds"])[("d",)].checksum

    assert len({checksum(("d", None, 1)), checksum(("d", "", 1)), checksum(("d", "x", 1))}) == 3
    assert checksum(("d", "x", None)) != checksum(("d", "x", 0))
    # Spark's xxhash64 skips nulls; the null flags keep these two rows apart.
    two = StructType([StructField("ds", StringType()), StructField("a", StringType()), StructField("b", StringType())])
    assert partition_stats(spark.createDataFrame([("d", None, "v")], two), ["ds"]) != partition_stats(
        spark.createDataFrame([("d", "v", None)], two), ["ds"]
    )


def test_measures_and_key_counts_are_exact(spark):
    rows = [
        *ROWS,
        ("2024-01-01", 2, "us", 5.0),  # order 2 a second time
        ("2024-01-01", 2, "eu", 0.25),  # and a third
        ("2024-01-01", None, "eu", None),  # a null key and a null measure
        ("2024-01-02", 5, "eu", 3.0),
    ]
    stats = stats_of(spark, rows, measures=["revenue", "order_id"], keys=["order_id"])
    first, second = stats[("2024-01-01",)], stats[("2024-01-02",)]
    assert (first.rows, first.null_keys, first.duplicate_keys) == (6, 1, 3)
    assert first.measures == {"revenue": 10.5 + 20.0 + 1.25 + 5.0 + 0.25, "order_id": 1 + 2 + 3 + 2 + 2}
    assert second == PartitionStats(
        rows=2,
        checksum=second.checksum,
        measures={"revenue": 10.0, "order_id": 9.0},
        null_keys=0,
        duplicate_keys=0,
    )
    # The checksum does not depend on which measures or keys were asked for.
    assert stats_of(spark, rows)[("2024-01-01",)].checksum == first.checksum

    # A composite key: (2, "us") twice; (2, "eu") once, (3, null) has a null part.
    composite = stats_of(spark, rows, keys=["order_id", "region"])[("2024-01-01",)]
    assert (composite.null_keys, composite.duplicate_keys) == (2, 2)
    # A key that includes the partition column counts the same as without it.
    with_partition = stats_of(spark, rows, keys=["ds", "order_id"])[("2024-01-01",)]
    assert (with_partition.null_keys, with_partition.duplicate_keys) == (1, 3)


def test_a_partition_without_rows_does_not_appear_and_big_hashes_do_not_overflow(spark):
    assert stats_of(spark, []) == {}
    # 200k rows: summing their 64-bit hashes as longs would overflow under ANSI mode.
    frame = spark.range(200_000).select(F.lit("d").alias("ds"), F.col("id"), (F.col("id") * 7).alias("v"))
    stats = partition_stats(frame, ["ds"], measures=["v"])
    assert stats[("d",)].rows == 200_000
    assert stats[("d",)].measures == {"v": 7.0 * 199_999 * 200_000 / 2}


def test_evaluate_on_stats_computed_by_spark(spark):
    schema = StructType(
        [StructField("ds", StringType()), StructField("order_id", LongType()), StructField("revenue", DoubleType())]
    )
    old_rows = [("d1", i, 10.0) for i in range(20)] + [("d2", i, 1.0) for i in range(20)]
    new_rows = [("d1", i, 10.0) for i in range(20)] + [("d2", i % 10, 1.0) for i in range(25)]

    def stats_of(rows):
        return partition_stats(spark.createDataFrame(rows, schema), ["ds"], measures=["revenue"], keys=["order_id"])

    old, new = stats_of(old_rows), stats_of(new_rows)
    failed = {(c.partition, c.rule) for c in evaluate("t", DECLARED, old, new) if not c.passed}
    assert failed == {(("d2",), "rows"), (("d2",), "sum(revenue)"), (("d2",), "duplicate_keys")}

    diffs = diff_rows("t", old, new)
    assert [(d["partition"], d["old_rows"], d["new_rows"], d["content"]) for d in diffs] == [
        (["d1"], 20, 20, "equal"),
        (["d2"], 20, 25, "changed"),
    ]
    assert diffs[1]["measures"] == {"revenue": {"old": 20.0, "new": 25.0}}
