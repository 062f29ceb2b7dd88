"""The release a Dagster run reads its inputs from (storage/release_log.py): the release log as
it was at the run's start, so that all its steps and inputs agree on which operations are
complete; recorded in the run's tags (RELEASE_PIN_TAG).

Cost: one read of the pinned log per run and step process, and per input a listing of the
log's newest commits (to learn of operations begun since the pin).

Not guaranteed: see storage/release_log.py (a run's pin by commit timestamps).
"""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg

from partition_assets.errors import TableNotFoundError
from partition_assets.run_tags import RELEASE_PIN_TAG
from partition_assets.storage.delta.tables import RecordTable
from partition_assets.storage.release_log import NO_TABLE, LogView, pin_at, release_log_uri, rows_of, table_name
from partition_assets.storage.table_format import VersionedFormat

# Per (lake root, run id): the log's records at the run's pin, read once.
_pinned: dict[tuple[str, str], tuple[int, list[dict]]] = {}
# Per lake root: the latest log, refreshed incrementally.
_latest: dict[str, tuple[RecordTable, list[dict]]] = {}


def released_version(
    context: dg.InputContext, lake_root: str, table_format: VersionedFormat, table_uri: str
) -> int | None:
    """The version of `table_uri` (a table of `table_format`) the run of `context` reads: its
    version before an operation not complete at the run's pin (or overlapping one that is not:
    each operation is read whole or not at all, storage/release_log.py), else its latest; None
    when there is no table.

    Raises:
        TableNotFoundError: The table exists only through an operation not complete at the run's pin.
    """
    pin = _run_pin(context, lake_root)
    # The table's version before the latest log: see release_reads.pinned_versions.
    latest = table_format.version(table_uri)
    latest_rows = _latest_rows(lake_root)
    view = LogView.latest(latest_rows) if pin is None else LogView(latest_rows, pin[1], pin[0])
    name = table_name(lake_root, table_uri)
    version = view.read_versions({name: NO_TABLE if latest is None else latest}).versions[name]
    if version == NO_TABLE and latest is not None:
        raise TableNotFoundError(
            f"no table {table_uri} in the release this run reads: the publish creating it is not "
            "complete. Run again once it is published. Nothing was written."
        )
    return None if version == NO_TABLE else version


def _run_pin(context: dg.InputContext, lake_root: str) -> tuple[int, list[dict]] | None:
    """The run's pinned log version and its records; None for a context built outside a run."""
    try:
        step = context.step_context
    except dg.DagsterInvariantViolationError:
        return None
    key = (lake_root, step.run_id)
    if key not in _pinned:
        tagged = step.run_tags.get(RELEASE_PIN_TAG)
        if tagged is not None:
            version = int(tagged)
        else:
            version = pin_at(lake_root, _run_start(step.instance, step.run_id))
            step.instance.add_run_tags(step.run_id, {RELEASE_PIN_TAG: str(version)})  # every step: the same value
        rows = [] if version < 0 else rows_of(RecordTable.open(release_log_uri(lake_root), version=version))
        _pinned[key] = (version, rows)
    return _pinned[key]


def _run_start(instance: dg.DagsterInstance, run_id: str) -> datetime:
    record = instance.get_run_record_by_id(run_id)
    if record is None:
        return datetime.now(UTC)
    if record.start_time is not None:
        return datetime.fromtimestamp(record.start_time, UTC)
    return record.create_timestamp


def _latest_rows(lake_root: str) -> list[dict]:
    """The latest log's records: read again only when a listing of its commits finds a new one."""
    cached = _latest.get(lake_root)
    if cached is None:
        table = RecordTable.open(release_log_uri(lake_root))
        if table is None:
            return []
        cached = _latest[lake_root] = (table, rows_of(table))
    table, rows = cached
    if table.refresh():
        rows = rows_of(table)
        _latest[lake_root] = (table, rows)
    return rows
