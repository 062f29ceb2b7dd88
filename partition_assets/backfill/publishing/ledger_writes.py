"""The ledger rows a staged backfill appends: one per (asset, partition) when it is
gated, then again with each later status (published, discarded, rolled back). A partition
its backfill skipped (no output: running/skips.py) has one `skipped` row, written when it is
gated, which later statuses leave as it is: nothing of it was written. Each takes the ledger
(None: the lake keeps none, and nothing is written) and the backfill's record.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from partition_assets.backfill.model import Node
from partition_assets.backfill.publishing.backfill_stats import TableStats
from partition_assets.backfill.publishing.gate_evaluation import GateCheck
from partition_assets.backfill.state.ledger import Ledger, LedgerEntry, LedgerStatus, newest_of
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.deploy.runtime import RUNTIME_METADATA
from partition_assets.deploy.versioning import GIT_SHA_METADATA
from partition_assets.storage.io_manager import INPUT_VERSIONS_METADATA, RUN_ID_METADATA


def record_staged(
    ledger: Ledger | None,
    record: BackfillRecord,
    all_stats: list[TableStats],
    checks: list[GateCheck],
    status: LedgerStatus,
    skipped: Iterable[Node] = (),
) -> list[LedgerEntry]:
    """A row of `status` (staged or gate_failed) per partition the gate evaluated, with its
    provenance, statistics and checks; a `skipped` row per node of `skipped` (nothing staged).
    Returns them as `Ledger.latest` reads them back (`newest_of`): a gate's rows cover every
    partition of the backfill's tables it staged or skipped, so they are its latest rows, which
    the publish that follows takes without reading the ledger ([] without a ledger)."""
    if ledger is None:
        return []
    checks_by_partition: dict[tuple[str, tuple[str, ...]], list[dict]] = {}
    for check in checks:
        checks_by_partition.setdefault((check.asset, check.partition), []).append(check.to_json())
    now = datetime.now(UTC)  # bookkeeping time of the ledger row, not asset logic
    entries = []
    for stats in all_stats:
        table = stats.table
        asset = table.asset.to_user_string()
        for row in sorted(stats.partitions):
            partition = table.partition_key(row)
            provenance = stats.provenance.get(row, {})
            new = stats.new.get(row)
            entries.append(
                LedgerEntry(
                    backfill_id=record.id,
                    asset=asset,
                    partition=partition,
                    run_id=provenance.get(RUN_ID_METADATA),
                    git_sha=provenance.get(GIT_SHA_METADATA),
                    rows=new.rows if new else 0,
                    checksum=new.checksum if new else None,
                    input_versions=json.loads(provenance.get(INPUT_VERSIONS_METADATA, "{}")),
                    inputs_as_of=record.spec.inputs_as_of,
                    runtime=json.loads(provenance.get(RUNTIME_METADATA, "{}")),
                    published_version=None,
                    gate=checks_by_partition.get((asset, row), []),
                    status=status,
                    recorded_at=now,
                )
            )
    entries += [
        LedgerEntry(
            backfill_id=record.id,
            asset=node.asset.to_user_string(),
            partition=node.partition,
            inputs_as_of=record.spec.inputs_as_of,
            status=LedgerStatus.SKIPPED,
            recorded_at=now,
        )
        for node in skipped
    ]
    ledger.append(entries)
    return newest_of(entries)


def latest(ledger: Ledger | None, backfill_id: str) -> list[LedgerEntry]:
    """The newest ledger row of each (asset, partition) the backfill touched."""
    return ledger.latest(backfill_id) if ledger else []


def append_status(
    ledger: Ledger | None,
    record: BackfillRecord,
    status: LedgerStatus,
    approved_by: str | None = None,
    rows: Sequence[LedgerEntry] | None = None,
) -> list[LedgerEntry]:
    """The latest ledger rows again, with `status` and the table version now published (and
    `approved_by`, when given: later rows keep it), but the `skipped` ones, which stay as they
    are (nothing of them is published or undone); returns the rows appended, now the latest.
    `rows`: the latest rows when the caller read them already (a publish reads them for
    Dagster's records), which spares reading the ledger again (a second of 9,125 rows)."""
    if ledger is None:
        return []
    now = datetime.now(UTC)  # bookkeeping time of the ledger row, not asset logic
    entries = [
        dataclasses.replace(
            entry,
            status=status,
            recorded_at=now,
            published_version=record.published_versions.get(entry.asset)
            if status == LedgerStatus.PUBLISHED
            else entry.published_version,
            approved_by=approved_by or entry.approved_by,
        )
        for entry in (latest(ledger, record.id) if rows is None else rows)
        if entry.status != LedgerStatus.SKIPPED
    ]
    if entries:
        ledger.append(entries)
    return entries
