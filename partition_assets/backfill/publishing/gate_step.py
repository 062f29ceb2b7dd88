"""The validation gate of a staged backfill: every table's declared (or overridden)
checks evaluated on its statistics, the ledger's `staged` or `gate_failed` rows recorded,
the partitions the backfill creates noted for rollback, and the fingerprint of each table's
staging the statistics were computed on, which the publish checks. It returns its outcome
(`GateOutcome`): its caller, the coordinator, has it recorded where Dagster shows it
(running/dagster_view.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import dagster as dg

from partition_assets.backfill.model import Node
from partition_assets.backfill.publishing.backfill_stats import TableStats, gate_of_table, stats_of
from partition_assets.backfill.publishing.gate_evaluation import GateCheck, evaluate
from partition_assets.backfill.publishing.ledger_writes import record_staged
from partition_assets.backfill.publishing.publish_step import as_files
from partition_assets.backfill.publishing.tables import Tables
from partition_assets.backfill.state.ledger import Ledger, LedgerEntry, LedgerStatus
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.storage.failpoints import failpoint


@dataclass(frozen=True)
class GateOutcome:
    """What a gate evaluated: every table's statistics, and every check (failed ones included);
    the ledger rows it appended (`rows`: the backfill's latest, as `Ledger.latest` reads them)."""

    stats: tuple[TableStats, ...]
    checks: tuple[GateCheck, ...]
    rows: tuple[LedgerEntry, ...]

    @property
    def failed(self) -> tuple[GateCheck, ...]:
        return tuple(check for check in self.checks if not check.passed)


def gate(
    record: BackfillRecord,
    tables: Tables,
    ledger: Ledger | None,
    ahead: Mapping[dg.AssetKey, TableStats | None] | None = None,
    skipped: Collection[Node] = (),
) -> GateOutcome:
    """Evaluates the gate of each of `tables` on `record`'s staged data, records in `record`
    what the gate saw (the partitions the backfill creates, each staging's fingerprint) and
    appends the ledger's `staged` (or `gate_failed`) rows, and a `skipped` row for each node of
    `skipped` (no output: nothing staged) whose asset is one of `tables`; returns what it evaluated.
    Stats already computed `ahead` (while other nodes ran) are used as they are."""
    failpoint("gating")
    all_stats = stats_of(record, tables, ahead=ahead)
    checks = [
        check
        for stats in all_stats
        if (gate := gate_of_table(stats.table, record.spec.gate)) is not None
        for check in evaluate(stats.table.asset.to_user_string(), gate, stats.old, stats.new)
    ]
    failed = any(not check.passed for check in checks)
    record.created = {stats.table.asset.to_user_string(): _created(record, stats) for stats in all_stats}
    # What the gate saw: a publish commits exactly this (publish_step.check_staging).
    record.gated_staging = {stats.table.asset.to_user_string(): stats.staging.to_json() for stats in all_stats}
    record.save()
    status = LedgerStatus.GATE_FAILED if failed else LedgerStatus.STAGED
    rows = record_staged(ledger, record, all_stats, checks, status, [node for node in skipped if node.asset in tables])
    return GateOutcome(tuple(all_stats), tuple(checks), tuple(rows))


def _created(record: BackfillRecord, stats: TableStats) -> list[str]:
    """The partitions the backfill writes that held no file when it started."""
    before = as_files(record.fingerprints.get(stats.table.asset.to_user_string())) or {}
    return [stats.table.partition_key(row) for row in sorted(stats.partitions) if not before.get(row)]
