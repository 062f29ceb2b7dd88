"""A Dagster backfill's row in the instance's run storage (Dagster's `bulk_actions` table),
read and written without deserializing or serializing its body.

- `stored_status` reads the row's status column alone: what the mirror checks every tick
  (a *Cancel* clicked in the UI), where `DagsterInstance.get_backfill` would deserialize
  the whole record.
- `write_if_status` sets the status and the body (a JSON text, backfill_body.py) in one
  statement, only while the status is still the one read: a status another process wrote
  meanwhile (the UI's CANCELING, `backfill cancel`'s CANCELED) is never overwritten.

Not guaranteed: the row's other columns and Dagster's `backfill_tags` table are left as
they are (as `DagsterInstance.update_backfill` leaves them); a body that is not a
`PartitionBackfill` is stored as given. SQL run storages only (SQLite, Postgres), through
backfill/state/store.py's `sql_run_storage`; `BulkActionsTable` is pinned in
partition_assets_tests/integration/test_dagster_internals.py.
"""

from __future__ import annotations

import dagster as dg
from sqlalchemy import select

from partition_assets.backfill.state.store import sql_run_storage
from partition_assets.dagster_internals import BulkActionsTable, BulkActionStatus


def stored_status(instance: dg.DagsterInstance, backfill_id: str) -> BulkActionStatus | None:
    """The status of the Dagster backfill `backfill_id`; None when there is none (deleted)."""
    query = select(BulkActionsTable.c.status).where(BulkActionsTable.c.key == backfill_id)
    with sql_run_storage(instance).connect() as connection:
        row = connection.execute(query).first()
    return None if row is None else BulkActionStatus(row[0])


def write_if_status(
    instance: dg.DagsterInstance, backfill_id: str, expected: BulkActionStatus, status: BulkActionStatus, body: str
) -> bool:
    """Sets the backfill's status and body if its status is still `expected`; whether it did."""
    update = (
        BulkActionsTable.update()
        .where(BulkActionsTable.c.key == backfill_id, BulkActionsTable.c.status == expected.value)
        .values(status=status.value, body=body)
    )
    with sql_run_storage(instance).connect() as connection:
        return connection.execute(update).rowcount == 1
