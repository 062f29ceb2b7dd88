"""The backfill ledger: one append-only Delta table recording, per backfill, what was
written to each (asset, partition), from which inputs, and what became of it.

The table lives at `ledger_uri(lake_root)`, is written by delta-rs (one commit per
`Ledger.append`) and is partitioned by `backfill_id`, so reading one backfill's rows
opens only that backfill's files however many backfills the ledger holds. It carries
the Delta property `delta.appendOnly=true`: Delta writers refuse to delete or update
its rows. Any Delta reader can read it (delta-rs, Spark, DuckDB); `input_versions`
and `gate` are JSON text so that every reader sees plain columns. The table carries its
format as a table property (state_formats.py): a ledger a newer release created is refused
(StateFormatError), neither read nor appended to.

Not guaranteed: entries are ordered by `recorded_at`; entries with the same time keep
their order only within one append, so give a later entry a later time. Each append
adds a small file: the ledger is not compacted here, and needs no compaction (reading a
backfill opens only its own few files). A compaction run on it must run alone: delta-rs's
`optimize.compact()` run by several processes at once commits each one's copy of every row
(measured: 60 rows for 30 entries with 2 processes, 120 with 4). `latest` still reads one
entry per (asset, partition); `entries` and other Delta readers see the copies.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import pyarrow as pa

from partition_assets.state_formats import LEDGER_FORMAT, checked_table_format, table_format_properties
from partition_assets.storage.delta.append import append_rows
from partition_assets.storage.delta.tables import RecordTable

LEDGER_PATH = "_partition_assets/ledger"

SCHEMA = pa.schema(
    [
        pa.field("backfill_id", pa.string(), nullable=False),
        pa.field("asset", pa.string(), nullable=False),
        pa.field("partition", pa.string(), nullable=False),
        pa.field("run_id", pa.string()),
        pa.field("git_sha", pa.string()),
        pa.field("rows", pa.int64()),
        pa.field("checksum", pa.string()),
        pa.field("input_versions", pa.string(), nullable=False),  # JSON: {table or asset: version or "staged"}
        pa.field("inputs_as_of", pa.string()),  # how the inputs were pinned: "original", an ISO time, or null
        pa.field("runtime", pa.string()),  # JSON: {"python": ..., "pyspark": ..., ...} of the staging run
        pa.field("published_version", pa.int64()),
        pa.field("gate", pa.string()),  # JSON: the gate's checks or configuration
        pa.field("status", pa.string(), nullable=False),
        pa.field("recorded_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("approved_by", pa.string()),  # who approved the publish (backfill/state/approval.py), or null
    ]
)


def ledger_uri(lake_root: str) -> str:
    """Where the ledger of the lake at `lake_root` lives."""
    return f"{lake_root}/{LEDGER_PATH}"


class LedgerStatus(str, Enum):
    """What became of a backfill's write of one partition."""

    STAGED = "staged"
    GATE_FAILED = "gate_failed"
    PUBLISHED = "published"
    DISCARDED = "discarded"
    ROLLED_BACK = "rolled_back"
    APPROVED = "approved"  # its publish approved, by `approved_by` at `recorded_at`
    # Its node yielded no output, or read a parent's that was not produced (running/skips.py):
    # nothing was written, so it is neither published nor rolled back; the row stays as it is.
    SKIPPED = "skipped"


@dataclass(frozen=True, kw_only=True)
class LedgerEntry:
    """One row of the ledger. `partition` is the Dagster partition key; `input_versions`
    maps each input table or asset to the Delta version read, or to "staged" when the
    input was this backfill's staged data; `inputs_as_of` says how they were pinned
    (`--inputs-as-of`: "original" or an ISO time; None when not pinned); `runtime` holds the
    versions the staging run ran on (deploy/runtime.py); `published_version` is the table version that
    published the partition (None until published); `recorded_at` is UTC (naive = UTC); `approved_by`
    names who approved its publish (None when it needed no approval)."""

    backfill_id: str
    asset: str
    partition: str
    status: LedgerStatus
    run_id: str | None = None
    git_sha: str | None = None
    rows: int | None = None
    checksum: str | None = None
    input_versions: Mapping[str, int | str] = field(default_factory=dict)
    inputs_as_of: str | None = None
    runtime: Mapping[str, str] = field(default_factory=dict)
    published_version: int | None = None
    gate: Any = None  # JSON-able: the gate checks (list of dicts) or the gate (dict)
    recorded_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    approved_by: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", LedgerStatus(self.status))
        if self.recorded_at.tzinfo is None:
            object.__setattr__(self, "recorded_at", self.recorded_at.replace(tzinfo=UTC))

    def to_json(self) -> dict[str, Any]:
        """The entry as shown by the CLI (the backfill id is the caller's context)."""
        return {
            "asset": self.asset,
            "partition": self.partition,
            "run_id": self.run_id,
            "git_sha": self.git_sha,
            "rows": self.rows,
            "checksum": self.checksum,
            "input_versions": dict(self.input_versions),
            "inputs_as_of": self.inputs_as_of,
            "runtime": dict(self.runtime),
            "published_version": self.published_version,
            "status": self.status.value,
            "gate": self.gate,
            "recorded_at": self.recorded_at.isoformat(),
            "approved_by": self.approved_by,
        }


class Ledger:
    """The ledger table at `uri` (created by the first append)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri

    def append(self, entries: Iterable[LedgerEntry]) -> None:
        """Adds `entries` in one Delta commit; concurrent appends (other threads or
        processes) all land. CommitError when the commit keeps losing; then nothing
        of these entries was recorded.

        Raises:
            CommitError: The append lost to concurrent writers 20 times; nothing of `entries` was recorded.
            StateFormatError: The ledger is in a newer release's format; nothing was recorded.
        """
        data = _to_arrow(list(entries))
        if data.num_rows:
            self._open()
            properties = table_format_properties(LEDGER_FORMAT)
            append_rows(self.uri, data, "the ledger", partition_by=["backfill_id"], properties=properties)

    def entries(self, backfill_id: str) -> list[LedgerEntry]:
        """Every entry of `backfill_id`, oldest first; [] when none (or no ledger).

        Raises:
            StateFormatError: The ledger is in a newer release's format; nothing was read.
        """
        table = self._open()
        if table is None:
            return []
        rows = table.rows(partition=("backfill_id", backfill_id))
        return sorted((_from_row(row) for row in rows), key=lambda entry: entry.recorded_at)

    def latest(self, backfill_id: str) -> list[LedgerEntry]:
        """The newest entry of each (asset, partition) of `backfill_id`, sorted by asset
        and partition.

        Raises:
            StateFormatError: The ledger is in a newer release's format; nothing was read.
        """
        return newest_of(self.entries(backfill_id))

    def _open(self) -> RecordTable | None:
        """The ledger table (None: none yet), when in a format this release reads."""
        table = RecordTable.open(self.uri)
        if table is not None:
            checked_table_format(table.properties, LEDGER_FORMAT, f"the ledger {self.uri}")
        return table


def newest_of(entries: Iterable[LedgerEntry]) -> list[LedgerEntry]:
    """The last of `entries` (oldest first) of each (asset, partition), sorted by asset and
    partition: what `Ledger.latest` answers once they are the backfill's rows."""
    newest = {(e.asset, e.partition): e for e in entries}
    return [newest[key] for key in sorted(newest)]


def _to_arrow(entries: list[LedgerEntry]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "backfill_id": e.backfill_id,
                "asset": e.asset,
                "partition": e.partition,
                "run_id": e.run_id,
                "git_sha": e.git_sha,
                "rows": e.rows,
                "checksum": e.checksum,
                "input_versions": json.dumps(dict(e.input_versions), sort_keys=True),
                "inputs_as_of": e.inputs_as_of,
                "runtime": json.dumps(dict(e.runtime), sort_keys=True) if e.runtime else None,
                "published_version": e.published_version,
                "gate": None if e.gate is None else json.dumps(e.gate, sort_keys=True),
                "status": e.status.value,
                "recorded_at": e.recorded_at,
                "approved_by": e.approved_by,
            }
            for e in entries
        ],
        schema=SCHEMA,
    )


def _from_row(row: Mapping[str, Any]) -> LedgerEntry:
    return LedgerEntry(
        **{
            **row,
            "input_versions": json.loads(row["input_versions"]),
            "gate": None if row["gate"] is None else json.loads(row["gate"]),
            "runtime": json.loads(row["runtime"]) if row.get("runtime") else {},
        }
    )
