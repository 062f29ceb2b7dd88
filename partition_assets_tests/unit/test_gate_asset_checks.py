"""The gate as Dagster asset checks (backfill/dagster_ui/gate_asset_checks.py): declared on the
gated assets only, and the diff in the UI as a Markdown table of `backfill diff`'s cells."""

import dagster as dg

from partition_assets.backfill.dagster_ui.gate_asset_checks import GATE_CHECK, diff_markdown, gate_checks
from partition_assets.backfill.planning.gate_rules import backfill_gate
from partition_assets.backfill.publishing.diff import diff_rows, format_diff
from partition_assets.backfill.publishing.partition_stats import PartitionStats


@dg.asset(metadata=backfill_gate(row_change=0.1))
def gated() -> None: ...


@dg.asset
def ungated() -> None: ...


def test_a_backfill_gate_check_is_declared_on_each_gated_asset_only():
    (checks,) = gate_checks([gated, ungated, dg.AssetSpec("external")])
    assert set(checks.check_keys) == {dg.AssetCheckKey(dg.AssetKey("gated"), GATE_CHECK)}
    assert gate_checks([ungated]) == []


def stats(rows: int, revenue: float) -> PartitionStats:
    return PartitionStats(rows=rows, checksum=f"c{rows}", measures={"revenue": revenue}, null_keys=0, duplicate_keys=0)


def test_the_diff_table_holds_the_cli_diffs_cells_and_counts_the_rows_past_fifty():
    old = {(f"2024-01-{day:02d}", "emea|x"): stats(10, 100.0) for day in range(1, 31)}
    new = {(f"2024-02-{day:02d}", "emea|x"): stats(12, 130.5) for day in range(1, 31)}
    diffs = diff_rows("daily_revenue", old, new)
    lines = diff_markdown(diffs, "b1").splitlines()
    assert lines[0] == "| asset | partition | rows old -> new | content | measures old -> new |"
    assert lines[2] == "| daily_revenue | 2024-01-01\\|emea\\|x | 10 -> - | deleted | revenue: 100 -> - |"
    assert len(lines) == 2 + 50 + 2
    assert lines[-1] == "... and 10 more rows: `partition-assets backfill diff b1` lists them all"
    terminal = format_diff(diffs).splitlines()[1]  # the same cells `backfill diff` prints
    assert terminal.split() == "daily_revenue 2024-01-01|emea|x 10 -> - deleted revenue: 100 -> -".split()
    assert diff_markdown(diffs[:3], "b1").count("\n") == 4  # no count line when all are shown
