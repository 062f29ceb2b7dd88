"""Writing many asset events of one step to the instance's event log in batches: what a
publish or rollback records costs a handful of writes per asset, not a few per node. The
events are materializations, observations, and materializations planned (what Dagster logs
for each asset partition a run intends to materialize: publishing/dagster_events.py
`record_failures`).

`store_asset_events(context, events)`, called from inside an op, stores each event as the
op's own `yield` would (the same run, step, job, message and event data), but without
Dagster's per-event path (its log manager and one event-log transaction, or two, per event).
Consecutive events of one asset and kind are written together, at most BATCH_SIZE at a time:
- an event log with a batch write of its own (Postgres) writes them with it;
- any other SQL event log (the SQLite ones) gets one transaction inserting the batch's rows,
  their tags and the asset's latest event, as Postgres's does (plus, on Dagster's
  run-sharded SQLite log, one insert into the run's shard);
- any other storage, one event at a time.

Not guaranteed: the events bypass the instance's per-run subscribers (nothing follows a
publish or rollback run live: it starts and finishes in the call that writes them), and
they are logged to no Python logger. A batch's events share its write: the process dying
mid-way leaves earlier batches stored and later ones not (the caller's run then fails, and a
publish records its events again from a new run: see dagster_events.py).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Sequence
from itertools import groupby
from typing import Any

import dagster as dg
import sqlalchemy as db

from partition_assets.dagster_internals import (
    AssetMaterializationPlannedData,
    AssetObservationData,
    EventLogStorage,
    SqlEventLogStorage,
    SqlEventLogStorageTable,
    SqliteEventLogStorage,
    StepMaterializationData,
)

# Rows per insert: well under SQLite's 32,766 bound variables at the event table's columns.
BATCH_SIZE = 1000

AssetEvent = dg.AssetMaterialization | dg.AssetObservation | AssetMaterializationPlannedData


def store_asset_events(context: dg.OpExecutionContext, events: Sequence[AssetEvent]) -> None:
    """Stores `events` as events of the op `context` runs in, in batches (module docstring)."""
    step = context.get_step_execution_context()
    entries = [_entry(step, context.run_id, event) for event in events]
    storage = context.instance.event_log_storage
    for batch in _batches(entries):
        _store(storage, batch)


def _entry(step: Any, run_id: str, event: AssetEvent) -> dg.EventLogEntry:
    """The log entry Dagster's `DagsterEvent.asset_materialization` / `asset_observation` /
    `build_asset_materialization_planned_event` and its log manager make of `event` yielded
    (or planned) by the op of `step` (Dagster's private StepExecutionContext, as
    `get_step_execution_context` returns it)."""
    data: StepMaterializationData | AssetObservationData | AssetMaterializationPlannedData
    message: str | None
    if isinstance(event, dg.AssetMaterialization):
        event_type, data = dg.DagsterEventType.ASSET_MATERIALIZATION, StepMaterializationData(event)
        message = event.description or (f"Materialized value {event.label}." if event.label else "Materialized value.")
    elif isinstance(event, AssetMaterializationPlannedData):
        event_type, data = dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED, event
        message = f"{step.job_name} intends to materialize asset {event.asset_key.to_string()}"
    else:
        event_type, data, message = dg.DagsterEventType.ASSET_OBSERVATION, AssetObservationData(event), None
    dagster_event = dg.DagsterEvent(
        event_type_value=event_type.value,
        job_name=step.job_name,
        step_handle=step.step.handle,
        node_handle=step.step.node_handle,
        step_kind_value=step.step.kind.value,
        logging_tags=step.event_tags,
        event_specific_data=data,
        message=message,
        pid=os.getpid(),
    )
    return dg.EventLogEntry(
        error_info=None,
        level=logging.DEBUG,
        user_message=message or "",
        run_id=run_id,
        timestamp=time.time(),
        step_key=step.step.key,
        job_name=step.job_name,
        dagster_event=dagster_event,
    )


def _batches(entries: Sequence[dg.EventLogEntry]) -> Iterator[list[dg.EventLogEntry]]:
    """Runs of consecutive entries of one kind and asset, at most BATCH_SIZE each: a batch
    write updates its asset's latest event from its last entry only."""
    for _, same in groupby(entries, key=lambda entry: (entry.dagster_event_type, entry.get_dagster_event().asset_key)):
        run = list(same)
        for start in range(0, len(run), BATCH_SIZE):
            yield run[start : start + BATCH_SIZE]


def _store(storage: EventLogStorage, batch: list[dg.EventLogEntry]) -> None:
    if type(storage).store_event_batch is not EventLogStorage.store_event_batch:
        storage.store_event_batch(batch)  # the storage's own batch write (Postgres)
    elif isinstance(storage, SqlEventLogStorage):
        _store_sql_batch(storage, batch)
    else:
        for entry in batch:
            storage.store_event(entry)


def _store_sql_batch(storage: SqlEventLogStorage, batch: list[dg.EventLogEntry]) -> None:
    """What dagster-postgres's `store_event_batch` does, on any SQL event log: one insert of
    the new rows, their asset tags and the asset's latest event, in one index transaction.
    Dagster's run-sharded SQLite log first inserts them in the run's own shard too, as its
    `store_event` does (its index shard holds a copy of every asset event).

    The rows go as the parameters of one single-row insert (an executemany), not as Dagster's
    `prepare_insert_event_batch` builds them, one multi-row VALUES statement: compiling that
    costs about 0.1 ms a row (0.9 s of CPU for 9,125 events written twice); the executemany's
    statement is compiled once. An executemany returns no ids: they are read back in the same
    transaction, the batch's rows being the newest of its run, asset and kind (no other
    process writes a publish or rollback run's events, and the transaction holds the log's
    write lock from its insert to its commit), in insertion order."""
    rows = [storage._event_to_row(entry) for entry in batch]
    insert = SqlEventLogStorageTable.insert()
    if isinstance(storage, SqliteEventLogStorage):
        with storage.run_connection(batch[0].run_id) as connection:
            connection.execute(insert, rows)
    table = SqlEventLogStorageTable
    newest = (
        db.select(table.c.id)
        .where(table.c.run_id == rows[0]["run_id"])
        .where(table.c.asset_key == rows[0]["asset_key"])
        .where(table.c.dagster_event_type == rows[0]["dagster_event_type"])
        .order_by(table.c.id.desc())
        .limit(len(rows))
    )
    with storage.index_transaction() as connection:
        connection.execute(insert, rows)
        event_ids = sorted(row[0] for row in connection.execute(newest))
        storage._store_asset_event_tags(connection, batch, event_ids)
        storage._store_asset_event(connection, batch[-1], event_ids[-1])
