"""The gate API: declared on a real Dagster asset, overridden by CLI texts, evaluated on
hand-made partition stats (on stats computed by Spark: partition_assets_tests/integration/test_partition_stats.py), and
the diff shown to a person."""

import json

import dagster as dg
import pytest

from partition_assets.backfill.planning.gate_rules import (
    GATE_METADATA_KEY,
    Budget,
    Gate,
    GateOverride,
    apply_overrides,
    backfill_gate,
    gate_of,
    parse_override,
)
from partition_assets.backfill.publishing.diff import diff_rows, format_diff
from partition_assets.backfill.publishing.gate_evaluation import GateCheck, evaluate, format_checks
from partition_assets.backfill.publishing.partition_stats import PartitionStats
from partition_assets.errors import GateConfigError, PartitionAssetsError

DECLARED = Gate(row_change=0.05, measures={"revenue": Budget(relative=0.01)}, keys=("order_id",))


def stats(rows, revenue=100.0, checksum="c", null_keys=0, duplicate_keys=0):
    return PartitionStats(rows, checksum, {"revenue": revenue}, null_keys, duplicate_keys)


def test_the_gate_declared_on_a_dagster_asset_reads_back_from_its_specs():
    @dg.asset(
        metadata={**backfill_gate(row_change=0.05, measures={"revenue": Budget(relative=0.01)}, keys=["order_id"])},
        partitions_def=dg.DailyPartitionsDefinition("2024-01-01"),
    )
    def daily_revenue(): ...

    @dg.asset
    def ungated(): ...

    (spec,) = daily_revenue.specs
    assert gate_of(spec.metadata) == DECLARED
    assert gate_of(daily_revenue.metadata_by_key[dg.AssetKey("daily_revenue")]) == DECLARED
    assert gate_of(next(iter(ungated.specs)).metadata) is None
    asset_graph = dg.Definitions(assets=[daily_revenue, ungated]).resolve_asset_graph()
    assert gate_of(asset_graph.get(dg.AssetKey("daily_revenue")).metadata) == DECLARED
    # JSON-serializable, and read back the same when Dagster wraps it as a JSON metadata value.
    stored = json.loads(json.dumps(spec.metadata[GATE_METADATA_KEY]))
    assert gate_of({GATE_METADATA_KEY: dg.MetadataValue.json(stored)}) == DECLARED


@pytest.mark.parametrize(
    "build",
    [
        lambda: Budget(),
        lambda: Budget(absolute=-1),
        lambda: Budget(relative=float("nan")),
        lambda: Gate(row_change=-0.1),
        lambda: Gate(measures={"": Budget(absolute=1)}),
        lambda: Gate(measures={"revenue": 0.01}),
        lambda: Gate(keys=("order_id", " ")),
        lambda: Gate(keys=("order_id", "order_id")),
        lambda: backfill_gate(measures={"revenue": Budget(relative=-0.01)}),
    ],
)
def test_invalid_declarations_raise_a_typed_error_at_definition_time(build):
    with pytest.raises(GateConfigError, match="nothing was run") as raised:
        build()
    assert isinstance(raised.value, PartitionAssetsError)


def test_parse_override_accepts_the_grammar():
    assert parse_override("daily_revenue:rows=0.2") == GateOverride("daily_revenue", "rows", 0.2)
    assert parse_override("daily_revenue:revenue=abs:1000") == GateOverride(
        "daily_revenue", "revenue", Budget(absolute=1000)
    )
    assert parse_override("sales/daily:revenue=rel:0.05,abs:3") == GateOverride(
        "sales/daily", "revenue", Budget(absolute=3, relative=0.05)
    )
    assert parse_override("daily_revenue:keys=order_id, region") == GateOverride(
        "daily_revenue", "keys", ("order_id", "region")
    )
    assert parse_override("daily_revenue:off") == GateOverride("daily_revenue", "off", None)
    assert parse_override("daily_revenue:revenue=off") == GateOverride("daily_revenue", "revenue", None)


@pytest.mark.parametrize(
    "text",
    [
        "daily_revenue",  # no rule
        ":rows=0.2",  # no asset
        "daily_revenue:rows",  # no value
        "daily_revenue:rows=lots",  # bad number
        "daily_revenue:rows=-0.2",  # negative
        "daily_revenue:revenue=0.05",  # budget without abs:/rel:
        "daily_revenue:revenue=pct:5",  # unknown budget kind
        "daily_revenue:revenue=abs:1,abs:2",  # a bound twice
        "daily_revenue:keys=order_id,,region",  # empty column
    ],
)
def test_parse_override_rejects_bad_texts_in_one_line_naming_text_and_grammar(text):
    with pytest.raises(GateConfigError) as raised:
        parse_override(text)
    message = str(raised.value)
    assert repr(text) in message and "<asset>:<measure>=abs:<number>" in message and "\n" not in message


def test_apply_overrides_changes_only_its_asset_and_later_texts_win():
    overrides = [
        "daily_revenue:rows=0.2",
        "daily_revenue:revenue=abs:1000",
        "daily_revenue:cost=rel:0.5",
        "other_asset:off",
        "daily_revenue:keys=order_id,region",
    ]
    assert apply_overrides(DECLARED, "daily_revenue", overrides) == Gate(
        row_change=0.2,
        measures={"revenue": Budget(absolute=1000), "cost": Budget(relative=0.5)},
        keys=("order_id", "region"),
    )
    assert apply_overrides(DECLARED, dg.AssetKey("other_asset"), overrides) is None
    assert apply_overrides(DECLARED, "third", overrides) == DECLARED
    assert apply_overrides(DECLARED, "daily_revenue", ["daily_revenue:revenue=off", "daily_revenue:keys=off"]) == Gate(
        row_change=0.05
    )
    # An asset without a declared gate gets one from overrides; `off` then a rule starts afresh.
    assert apply_overrides(None, "daily_revenue", ["daily_revenue:rows=0.1"]) == Gate(row_change=0.1)
    assert apply_overrides(DECLARED, "daily_revenue", ["daily_revenue:off", "daily_revenue:rows=0.3"]) == Gate(
        row_change=0.3
    )
    with pytest.raises(GateConfigError):
        apply_overrides(DECLARED, "daily_revenue", ["elsewhere:rows=x"])  # invalid even for another asset


def test_evaluate_checks_rows_measures_and_keys_per_rewritten_partition():
    old = {("d1",): stats(100, 100.0), ("d2",): stats(100, 100.0), ("d3",): stats(10, 50.0)}
    new = {
        ("d1",): stats(104, 100.9),  # within 5% rows and 1% revenue
        ("d2",): stats(106, 98.0, null_keys=1, duplicate_keys=2),  # all over
        ("d4",): stats(7, 3.0),  # new partition: no baseline
    }  # d3 deleted by the backfill
    checks = evaluate("daily_revenue", DECLARED, old, new)
    by_partition = {}
    for check in checks:
        by_partition.setdefault(check.partition[0], {})[check.rule] = check
    assert sorted(by_partition) == ["d1", "d2", "d3", "d4"]
    assert all(set(rules) == {"rows", "sum(revenue)", "null_keys", "duplicate_keys"} for rules in by_partition.values())
    assert all(c.passed for c in by_partition["d1"].values())
    assert not any(c.passed for c in by_partition["d2"].values())
    assert by_partition["d2"]["rows"] == GateCheck("daily_revenue", ("d2",), "rows", 100, 106, 5.0, False)
    assert by_partition["d2"]["sum(revenue)"].limit == pytest.approx(1.0)
    assert all(c.passed for c in by_partition["d4"].values())
    assert by_partition["d4"]["rows"].old is None and by_partition["d4"]["rows"].limit is None
    deleted = by_partition["d3"]
    assert (deleted["rows"].new, deleted["rows"].passed) == (0, False)
    assert (deleted["sum(revenue)"].new, deleted["sum(revenue)"].passed) == (0.0, False)
    assert json.loads(json.dumps([c.to_json() for c in checks]))[0] == {
        "asset": "daily_revenue",
        "partition": ["d1"],
        "rule": "rows",
        "old": 100,
        "new": 104,
        "limit": 5.0,
        "passed": True,
    }
    report = format_checks(checks)
    assert "daily_revenue d2 rows: 100 -> 106 (limit ±5) FAILED" in report.splitlines()
    assert " d1 " not in report  # only failures by default


def test_a_budget_with_both_bounds_passes_when_either_does():
    gate = Gate(measures={"revenue": Budget(absolute=5, relative=0.01)})

    def passed(old_sum, new_sum):
        (check,) = evaluate("a", gate, {("d",): stats(1, old_sum)}, {("d",): stats(1, new_sum)})
        return check.passed

    assert passed(100.0, 105.0)  # absolute allows 5
    assert not passed(100.0, 105.5)
    assert passed(10_000.0, 10_100.0)  # relative allows 100
    assert not passed(10_000.0, 10_100.5)
    # A relative budget on a zero baseline allows no change.
    assert not evaluate(
        "a", Gate(measures={"revenue": Budget(relative=0.5)}), {("d",): stats(1, 0.0)}, {("d",): stats(1, 0.1)}
    )[0].passed


def test_diff_rows_marks_new_and_deleted_partitions_and_formats_a_table():
    diffs = diff_rows(
        "t", {("d1",): stats(3, 1.5, "x"), ("d2",): stats(2)}, {("d1",): stats(3, 1.5, "x"), ("d3",): stats(4)}
    )
    assert [d["content"] for d in diffs] == ["equal", "deleted", "new"]
    assert json.loads(json.dumps(diffs)) == diffs
    lines = format_diff(diffs).splitlines()
    assert lines[0].split() == [
        "asset",
        "partition",
        "rows",
        "old",
        "->",
        "new",
        "content",
        "measures",
        "old",
        "->",
        "new",
    ]
    assert lines[1].split() == ["t", "d1", "3", "->", "3", "equal", "revenue:", "1.5", "->", "1.5"]
    assert lines[2].split() == ["t", "d2", "2", "->", "-", "deleted", "revenue:", "100", "->", "-"]
    assert lines[3].split() == ["t", "d3", "-", "->", "4", "new", "revenue:", "-", "->", "100"]
