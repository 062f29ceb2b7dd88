"""Writing many asset events of one step to the instance's event log in one batch: what a
publish or rollback records costs a fixed number of storage calls, whatever the number of
nodes. The events are materializations, observations, and materializations planned (what
Dagster logs for each asset partition a run intends to materialize:
publishing/dagster_events.py `record_failures`).

`store_asset_events(context, events)`, called from inside an op, stores each event as the
op's own `yield` would (the same run, step, job, message and event data), but without
Dagster's per-event path (its log manager and one event-log transaction, or two, per event).
On any SQL event log (the SQLite ones, Postgres's) the events go in one transaction of a
fixed number of statements: one insert of every event's row (an executemany: Dagster's own
rows, `_event_to_row`), one read of their ids, one insert of their asset tags, and one
update of each asset's record per kind of event (its latest event: what Dagster's
`store_event` of each event in turn leaves). Dagster's run-sharded SQLite log first inserts
the rows into the run's own shard too, as its `store_event` does. Any other storage stores
them one at a time.

Not Dagster's own `store_event_batch`: on SQLite it stores one event at a time; on Postgres
it builds one multi-row VALUES statement (compiling it costs about 0.1 ms a row: 0.9 s of CPU
for 9,125 events) for materializations and observations only, and stores planned
materializations one at a time (two transactions each: 27,373 statements for 9,124).
On Postgres, SQLAlchemy sends the executemany as pages of 1,000 rows, one statement each,
within the one call.

Not guaranteed: the events bypass the instance's per-run subscribers (nothing follows a
publish or rollback run live: it starts and finishes in the call that writes them), and
they are logged to no Python logger. On the run-sharded SQLite log, the process dying
between the run shard's insert and the index's leaves the events in the run's log but not
in the asset index (the caller's run then fails, and a publish records its events again
from a new run: see dagster_events.py).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
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

AssetEvent = dg.AssetMaterialization | dg.AssetObservation | AssetMaterializationPlannedData


def store_asset_events(context: dg.OpExecutionContext, events: Sequence[AssetEvent]) -> None:
    """Stores `events` as events of the op `context` runs in, in one batch (module docstring)."""
    step = context.get_step_execution_context()
    entries = [_entry(step, context.run_id, event) for event in events]
    if entries:
        store_entries(context.instance.event_log_storage, entries)


def store_entries(storage: EventLogStorage, entries: Sequence[dg.EventLogEntry]) -> None:
    """Stores the log entries of asset events of one run in `storage` in one batch on a SQL
    event log (`_store_sql_batch`), else one at a time."""
    if isinstance(storage, SqlEventLogStorage):
        _store_sql_batch(storage, entries)
    else:
        for entry in entries:
            storage.store_event(entry)


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


def _store_sql_batch(storage: SqlEventLogStorage, batch: Sequence[dg.EventLogEntry]) -> None:
    """One insert of the rows of `batch` (events of one run), their asset tags and each
    asset's record, in one index transaction, as Dagster's `store_event` of each in turn
    leaves them. Dagster's run-sharded SQLite log first inserts them in the run's own shard
    too, as its `store_event` does (its index shard holds a copy of every asset event).

    The rows go as the parameters of one single-row insert (an executemany), not as Dagster's
    `prepare_insert_event_batch` builds them, one multi-row VALUES statement whose compiling
    costs about 0.1 ms a row; the executemany's statement is compiled once, and SQLite's bound
    on a statement's variables does not apply. An executemany returns no ids: they are read back
    in the same transaction, the batch's rows being the newest of its run (no other process
    writes a publish or rollback run's events, and on SQLite the transaction holds the log's
    write lock from its insert to its commit), in insertion order. An asset's record is
    updated from the last event of each kind (its columns differ by kind), in the order of
    those events: the timestamp ends as the last event's, the latest materialization as the
    last materialization's."""
    rows = [storage._event_to_row(entry) for entry in batch]
    insert = SqlEventLogStorageTable.insert()
    if isinstance(storage, SqliteEventLogStorage):
        with storage.run_connection(batch[0].run_id) as connection:
            connection.execute(insert, rows)
    table = SqlEventLogStorageTable
    newest = db.select(table.c.id).where(table.c.run_id == batch[0].run_id).order_by(table.c.id.desc()).limit(len(rows))
    last_of_kind = {(entry.dagster_event_type, entry.get_dagster_event().asset_key): i for i, entry in enumerate(batch)}
    with storage.index_transaction() as connection:
        connection.execute(insert, rows)
        event_ids = sorted(row[0] for row in connection.execute(newest))
        storage._store_asset_event_tags(connection, batch, event_ids)
        for i in sorted(last_of_kind.values()):
            storage._store_asset_event(connection, batch[i], event_ids[i])
