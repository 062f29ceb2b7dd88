"""Compare-and-set on the Dagster instance's key-value store (the `kvs` table of its run
storage), for the keys several processes change: a backfill's coordinator announcement
(backfill/state/presence.py) and the list of freezing backfills (backfill/publishing/freeze.py).

`swap(instance, key, expected, new)` writes `new` only while `key` still holds `expected`
(None: the key is absent) and says whether it did: one `UPDATE kvs SET value = new WHERE
key = key AND value = expected`, or, for an absent key, one INSERT that the table's unique
index on `key` refuses when another writer inserted it first. Each statement is atomic on
its own (SQLite and Postgres), so of two writers swapping from the same value exactly one
wins, without a lock or a wait; the loser has written nothing, reads again and decides anew.

Beside the lease proof of node runs, which binds their ids with it (dagster_instance/lease_proof.py).

`insert_absent(instance, values)` is the same first write for many keys at once, in one
statement: each key absent until then takes its value, each present one keeps its own.

Not guaranteed: Dagster's `set_cursor_values` (an unconditional upsert) still overwrites a
key; only writers that all change it through `swap` exclude one another.
"""

from collections.abc import Mapping

import dagster as dg
from sqlalchemy import insert, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from partition_assets.dagster_internals import KeyValueStoreTable, LegacyRunStorage, SqlRunStorage
from partition_assets.errors import EnvironmentSetupError


def sql_run_storage(instance: dg.DagsterInstance) -> SqlRunStorage:
    """The SQL run storage of `instance` (SQLite or Postgres), under Dagster's composite wrapper.

    Raises:
        EnvironmentSetupError: The instance's run storage is not a SQL storage.
    """
    storage = instance.run_storage
    if isinstance(storage, LegacyRunStorage):
        storage = storage._storage.run_storage  # pinned in partition_assets_tests/integration/test_dagster_internals.py
    if not isinstance(storage, SqlRunStorage):
        raise EnvironmentSetupError(
            f"the Dagster instance at {instance.root_directory} stores runs in {type(storage).__name__}, not in a "
            "SQL database: backfills are recorded in the instance's database; configure SQLite (the default) or "
            "Postgres storage in its dagster.yaml. Nothing was written."
        )
    return storage


def value_of(instance: dg.DagsterInstance, key: str) -> str | None:
    """The value of `key` in `instance`'s key-value store, None when absent."""
    return instance.run_storage.get_cursor_values({key}).get(key)


def swap(instance: dg.DagsterInstance, key: str, expected: str | None, new: str) -> bool:
    """Sets `key` to `new` if it still holds `expected` (None: absent); True when it did,
    False (nothing written) when another writer changed it since it was read.

    Raises:
        EnvironmentSetupError: The instance's run storage is not a SQL storage.
    """
    storage = sql_run_storage(instance)
    if expected is None:
        try:
            with storage.connect() as connection:
                connection.execute(insert(KeyValueStoreTable).values(key=key, value=new))
        except IntegrityError:  # another writer inserted it first
            return False
        return True
    with storage.connect() as connection:
        changed = connection.execute(
            update(KeyValueStoreTable)
            .where(KeyValueStoreTable.c.key == key, KeyValueStoreTable.c.value == expected)
            .values(value=new)
        )
    return changed.rowcount == 1


def insert_absent(instance: dg.DagsterInstance, values: Mapping[str, str]) -> None:
    """Inserts each key of `values` that is absent from the key-value store, in one statement
    (INSERT ... ON CONFLICT DO NOTHING, on SQLite and Postgres); a key another writer inserted
    first keeps its value (read it back with `get_cursor_values`).

    Raises:
        EnvironmentSetupError: The instance's run storage is not a SQL storage.
    """
    if not values:
        return
    storage = sql_run_storage(instance)
    rows = [{"key": key, "value": value} for key, value in values.items()]
    with storage.connect() as connection:
        dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
        connection.execute(
            dialect.insert(KeyValueStoreTable).values(rows).on_conflict_do_nothing(index_elements=["key"])
        )
