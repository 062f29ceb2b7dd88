"""A staged backfill's validation gate as a Dagster asset check, `backfill_gate`, on each
asset whose metadata declares a gate, so that the asset's *Checks* tab and the backfill's
runs show every gate evaluation.

- `gate_checks(assets)` declares the checks (add them to the Definitions' `asset_checks`).
  Run by hand (or with a node run, which Dagster plans them in) they report nothing: only a
  backfill's gate evaluates them.
- `record_gate_evaluations` records one evaluation per gated table when the gate runs,
  passed or failed, in one run tagged with the backfill id, each with metadata: the
  backfill id; per partition, old and new rows, checksums and measure sums; the budgets;
  the failed rules; and the diff as a Markdown table (what `backfill diff <id>` prints for
  that table), cut after DIFF_ROWS_SHOWN rows with a count of the rest.

A published backfill's publish run records each evaluation again, after the materializations
it judged (publishing/dagster_events.py), so that Dagster counts it for them: the asset's
*Checks* tab shows it as the latest materialization's, not "Not evaluated".

Not guaranteed: a gate given only by a backfill's `--gate` override, on an asset that
declares none, is recorded too, but Dagster lists an evaluation on the *Checks* tab only
for a declared check. The evaluation is recorded after the gate's ledger rows: a
coordinator killed in between records it again when resumed.
"""

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import dagster as dg

from partition_assets.backfill.planning.gate_rules import GATE_CHECK, gate_of
from partition_assets.backfill.publishing.backfill_stats import TableStats, gate_of_table
from partition_assets.backfill.publishing.dagster_events import run_reporting
from partition_assets.backfill.publishing.diff import DIFF_HEADER, DiffRow, diff_cells, diff_rows
from partition_assets.backfill.publishing.gate_evaluation import GateCheck, format_checks
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.run_tags import BACKFILL_ID_TAG

DIFF_ROWS_SHOWN = 50
_FAILED_SHOWN = 50


def gate_checks(assets: Iterable[Any], name: str = GATE_CHECK) -> list[dg.AssetChecksDefinition]:
    """The `backfill_gate` check of every asset of `assets` (AssetsDefinitions; others are
    skipped) whose metadata declares a gate (`backfill_gate(...)`); [] when none does.

    Args:
        name: The name of the op that declares them: give each call merged into one code
            location its own.
    """
    keys = [
        key
        for definition in assets
        if isinstance(definition, dg.AssetsDefinition)
        for key in definition.keys
        if gate_of(definition.metadata_by_key.get(key)) is not None
    ]
    if not keys:
        return []
    specs = [
        dg.AssetCheckSpec(
            GATE_CHECK,
            asset=key,
            description="The validation gate of staged backfills: each backfill that rewrites this asset "
            "records its evaluation here (per partition: rows, checksums, measure sums; the diff).",
        )
        for key in keys
    ]

    @dg.multi_asset_check(specs=specs, can_subset=True, name=name)
    def backfill_gate(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
        # Optional outputs (can_subset): a run that is not a backfill's gate reports nothing.
        context.log.info(f"{GATE_CHECK} is evaluated by staged backfills' gates, not by runs")
        yield from ()

    return [backfill_gate]


def record_gate_evaluations(
    record: BackfillRecord,
    instance: dg.DagsterInstance,
    all_stats: Sequence[TableStats],
    checks: Sequence[GateCheck],
) -> None:
    """One `backfill_gate` evaluation per table with a gate, in one run tagged with the backfill id."""
    backfill_id = record.id
    evaluations = []
    for stats in all_stats:
        gate = gate_of_table(stats.table, record.spec.gate)
        if gate is None:
            continue
        asset = stats.table.asset.to_user_string()
        own = [check for check in checks if check.asset == asset]
        failed = [check for check in own if not check.passed]
        diffs = diff_rows(asset, stats.old, stats.new)
        evaluations.append(
            dg.AssetCheckEvaluation(
                asset_key=stats.table.asset,
                check_name=GATE_CHECK,
                passed=not failed,
                severity=dg.AssetCheckSeverity.ERROR,
                description=_description(backfill_id, own, failed),
                metadata={
                    "backfill_id": backfill_id,
                    "checks_failed": len(failed),
                    "checks": len(own),
                    "budgets": dg.MetadataValue.json(gate.to_json()),
                    "failed_rules": dg.MetadataValue.json([check.to_json() for check in failed[:_FAILED_SHOWN]]),
                    "partitions": dg.MetadataValue.json(_partitions(stats)),
                    "diff": dg.MetadataValue.md(diff_markdown(diffs, backfill_id)),
                },
            )
        )
    if evaluations:
        run_reporting(instance, evaluations, {BACKFILL_ID_TAG: backfill_id}, "partition_assets_gate")


def _description(backfill_id: str, checks: Sequence[GateCheck], failed: Sequence[GateCheck]) -> str:
    if not failed:
        return f"backfill {backfill_id}: the gate passed ({len(checks)} checks)"
    shown = format_checks(failed[:3]) + (f"\n... and {len(failed) - 3} more" if len(failed) > 3 else "")
    return f"backfill {backfill_id}: the gate failed ({len(failed)} of {len(checks)} checks)\n{shown}"


def _partitions(stats: TableStats) -> dict[str, dict[str, Any]]:
    """Per partition key: old and new rows, checksums and measure sums (None where absent)."""
    shown = {}
    for row in sorted(set(stats.old) | set(stats.new)):
        before, after = stats.old.get(row), stats.new.get(row)
        shown[stats.table.partition_key(row)] = {
            "old_rows": None if before is None else before.rows,
            "new_rows": None if after is None else after.rows,
            "old_checksum": None if before is None else before.checksum,
            "new_checksum": None if after is None else after.checksum,
            "old_sums": None if before is None else dict(before.measures),
            "new_sums": None if after is None else dict(after.measures),
        }
    return shown


def diff_markdown(diffs: Sequence[DiffRow], backfill_id: str, shown: int = DIFF_ROWS_SHOWN) -> str:
    """`diff_rows` results as a Markdown table (the cells `backfill diff` prints), its first
    `shown` rows and a line counting the rest."""
    lines = [_markdown_row(DIFF_HEADER), _markdown_row(["---"] * len(DIFF_HEADER))]
    lines += [_markdown_row(diff_cells(diff)) for diff in diffs[:shown]]
    if len(diffs) > shown:
        lines += [
            "",
            f"... and {len(diffs) - shown} more rows: `partition-assets backfill diff {backfill_id}` lists them all",
        ]
    return "\n".join(lines)


def _markdown_row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"
