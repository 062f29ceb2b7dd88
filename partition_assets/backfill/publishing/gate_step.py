"""The validation gate of a staged backfill: every table's declared (or overridden)
checks evaluated on its statistics, the ledger's `staged` or `gate_failed` rows recorded,
the partitions the backfill creates noted for rollback, and the fingerprint of each table's
staging the statistics were computed on, which the publish checks. It returns its outcome
(`GateOutcome`): its caller, the coordinator, has it recorded where Dagster shows it
(running/dagster_view.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import dagster as dg

from partition_assets.backfill.publishing.backfill_stats import TableStats, gate_of_table, stats_of
from partition_assets.backfill.publishing.gate_evaluation import GateCheck, evaluate
from partition_assets.backfill.publishing.ledger_writes import record_staged
from partition_assets.backfill.publishing.publish_step import as_files
from partition_assets.backfill.state.ledger import LedgerStatus
from partition_assets.storage.failpoints import failpoint

if TYPE_CHECKING:
    from partition_assets.backfill.publishing.publication import Publication


@dataclass(frozen=True)
class GateOutcome:
    """What a gate evaluated: every table's statistics, and every check (failed ones included)."""

    stats: tuple[TableStats, ...]
    checks: tuple[GateCheck, ...]

    @property
    def failed(self) -> tuple[GateCheck, ...]:
        return tuple(check for check in self.checks if not check.passed)


def gate(
    publication: Publication, instance: dg.DagsterInstance, ahead: Mapping[dg.AssetKey, TableStats | None] | None = None
) -> GateOutcome:
    """Evaluates every table's gate on the staged data and records the ledger's
    `staged` (or `gate_failed`) rows; returns what it evaluated.
    Stats already computed `ahead` (while other nodes ran) are used as they are."""
    failpoint("gating")
    all_stats = stats_of(publication, ahead=ahead)
    checks = [
        check
        for stats in all_stats
        if (gate := gate_of_table(publication, stats.table)) is not None
        for check in evaluate(stats.table.asset.to_user_string(), gate, stats.old, stats.new)
    ]
    failed = any(not check.passed for check in checks)
    publication.record.created = {
        stats.table.asset.to_user_string(): _created(publication, stats) for stats in all_stats
    }
    # What the gate saw: a publish commits exactly this (publish_step.check_staging).
    publication.record.gated_staging = {
        stats.table.asset.to_user_string(): stats.staging.to_json() for stats in all_stats
    }
    publication.record.save()
    record_staged(publication, instance, all_stats, checks, LedgerStatus.GATE_FAILED if failed else LedgerStatus.STAGED)
    return GateOutcome(tuple(all_stats), tuple(checks))


def _created(publication: Publication, stats: TableStats) -> list[str]:
    """The partitions the backfill writes that held no file when it started."""
    before = as_files(publication.record.fingerprints.get(stats.table.asset.to_user_string())) or {}
    return [stats.table.partition_key(row) for row in sorted(stats.partitions) if not before.get(row)]
