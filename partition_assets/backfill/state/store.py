"""Backfill records in the Dagster instance's own database, so that every host of a
deployment sharing it (Postgres) sees the same backfills; SQLite for one host.

Two tables, created on first use through the SQL engine of the instance's run storage:
- `partition_assets_backfills`: one row per backfill: its id, status, a version bumped by
  every write, its record's other fields as JSON (`body`: spec, stored plan, fingerprints,
  published versions, created partitions, pins; its format version: state_formats.py),
  and when a host last claimed it to take it over
  (`taken_over_at`: backfill/state/takeover_claims.py);
- `partition_assets_schema`: the version of these tables (state_formats.BACKFILL_TABLES_FORMAT); a
  database written by a newer release is refused (StateFormatError) rather than misread.

Every change of a row is a compare-and-set on its version: the row is read, the change
checked, and written with `UPDATE ... WHERE id = ? AND version = ?`; when another writer
got in between, it starts over from what that writer left.
- A status change (`transition`) is checked against the transition table
  (backfill/state/status.py). So two writers (the coordinator, the UI mirror thread,
  `backfill cancel`, the Launchpad job, on any host) never lose one another's status,
  and a refused change writes nothing.
- A change of the record's other fields (`save`: published versions, approval, ...) is
  checked against the body the record was read with (`BackfillRecord.stored_body`): a
  body another process wrote since is RecordChangedError, nothing written, so a writer
  holding a stale record (a second approval, a coordinator that lost its claim) never
  overwrites what another wrote. A status change alone does not conflict with it.
- A record of an earlier release takes its plan once (`store_plan`), by compare-and-set
  on the row's version: the plan another process stored first is kept.
Each statement is atomic on its own (SQLite in a transaction, Postgres in autocommit),
so none needs a lock.

Records written by earlier releases as `<instance folder>/partition_assets/backfills/<id>.json`
are copied in on first use (`_migrate_files`), and each file renamed to `<id>.json.migrated`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
from sqlalchemy import Column, Connection, Float, Integer, MetaData, Row, String, Table, Text, or_, select, update
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from partition_assets.backfill.model import BackfillCommand, BackfillStatus
from partition_assets.backfill.state.record import BackfillRecord, check_record_format
from partition_assets.backfill.state.status import check_transition
from partition_assets.dagster_instance.key_values import sql_run_storage
from partition_assets.errors import (
    RecordChangedError,
    UnknownBackfillError,
)
from partition_assets.ids import checked_backfill_id, is_backfill_id
from partition_assets.state_formats import BACKFILL_TABLES_FORMAT, checked_version

_log = logging.getLogger(__name__)
_metadata = MetaData()
BACKFILLS = Table(
    "partition_assets_backfills",
    _metadata,
    Column("id", String(128), primary_key=True),
    Column("status", String(32), nullable=False),
    Column("version", Integer, nullable=False),
    Column("body", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    # When a host last claimed the backfill to resume it under a new coordinator (takeover_claims.py).
    Column("taken_over_at", Float, nullable=True),
)
SCHEMA = Table(
    "partition_assets_schema",
    _metadata,
    Column("name", String(64), primary_key=True),
    Column("version", Integer, nullable=False),
)
_SCHEMA_NAME = "backfills"
# Where earlier releases kept each record, under the instance's folder.
LEGACY_FOLDER = ("partition_assets", "backfills")


class BackfillStore:
    """The backfill records of `instance` (see the module docstring).

    Raises:
        EnvironmentSetupError: The instance's run storage is not a SQL storage.
        StateFormatError: The tables were created by a newer release.
    """

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self._storage = sql_run_storage(instance)
        self._root = Path(instance.root_directory)
        self._create_tables()
        self._migrate_files()

    def load(self, backfill_id: str) -> BackfillRecord:
        """The record of `backfill_id`, bound to this store.

        Raises:
            UnknownBackfillError: No record of `backfill_id`; the message lists the recorded ids.
            BackfillIdError: `backfill_id` cannot name a backfill.
            StateFormatError: A newer release wrote the record in a format this one does not read.
        """
        row = self._row(checked_backfill_id(backfill_id), BACKFILLS.c.status, BACKFILLS.c.body)
        if row is None:
            raise self._unknown(backfill_id)
        record = BackfillRecord.from_json(json.loads(row.body), BackfillStatus(row.status), backfill_id, store=self)
        record.stored_body = row.body
        return record

    def status(self, backfill_id: str) -> BackfillStatus:
        """The status of `backfill_id` as stored now (one indexed row: cheap after every node).

        Raises:
            UnknownBackfillError: No record of `backfill_id`; the message lists the recorded ids.
        """
        row = self._row(backfill_id, BACKFILLS.c.status)
        if row is None:
            raise self._unknown(backfill_id)
        return BackfillStatus(row.status)

    def exists(self, backfill_id: str) -> bool:
        return self._row(backfill_id, BACKFILLS.c.id) is not None

    def ids(self) -> list[str]:
        """Every recorded backfill id, oldest first."""
        with self._connect() as connection:
            rows = connection.execute(select(BACKFILLS.c.id).order_by(BACKFILLS.c.created_at, BACKFILLS.c.id))
            return [row.id for row in rows]

    def save(self, record: BackfillRecord) -> None:
        """Writes every field of `record` but its status, by compare-and-set on the row's
        version, when the stored fields are still those `record` was read with (its
        `stored_body`); a record never stored is inserted with the status it holds (its
        first, normally running). `record.stored_body` then holds what was written.

        Raises:
            RecordChangedError: Another process wrote the record's fields since `record`
                was read (or recorded its id first); nothing was written.
            UnknownBackfillError: The record was stored, and is no longer.
        """
        body = json.dumps(record.to_json())
        if record.stored_body is None:
            if not self._insert(record.id, record.status, body):
                raise self._changed(record.id, "another process recorded a backfill of this id first")
            record.stored_body = body
            return
        while True:
            row = self._row(record.id, BACKFILLS.c.body, BACKFILLS.c.version)
            if row is None:
                raise self._unknown(record.id)
            if row.body != record.stored_body:
                raise self._changed(record.id, "another process changed its record since this one read it")
            if self._swap_body(record.id, row.version, body):
                record.stored_body = body
                return

    def _swap_body(self, backfill_id: str, version: int, body: str) -> bool:
        """Writes `body` as the record of `backfill_id` if its row is still at `version` (the
        compare-and-set every change of a body goes through); whether it was written."""
        with self._connect() as connection:
            swapped = connection.execute(
                update(BACKFILLS)
                .where(BACKFILLS.c.id == backfill_id, BACKFILLS.c.version == version)
                .values(body=body, version=version + 1, updated_at=time.time())
            )
        return swapped.rowcount == 1

    def store_plan(self, record: BackfillRecord, plan: dict) -> None:
        """Stores `plan` (backfill/state/stored_plan.py) in the record of `record.id` when it
        holds none (a record of an earlier release), by compare-and-set on the row's version,
        changing no other field; a plan another process stored first is kept. `record` takes
        the stored plan, and the stored body when its other fields are still as stored.

        Raises:
            UnknownBackfillError: No record of `record.id`.
            StateFormatError: A newer release rewrote the record meanwhile, in a format this one
                does not read; nothing was written.
        """
        while True:
            row = self._row(record.id, BACKFILLS.c.body, BACKFILLS.c.version)
            if row is None:
                raise self._unknown(record.id)
            saved = json.loads(row.body)
            check_record_format(saved, record.id)
            if saved.get("plan") is not None:  # another process stored it first
                body = row.body
                break
            saved["plan"] = plan
            body = json.dumps(saved)
            if self._swap_body(record.id, row.version, body):
                break
        stored = json.loads(body)
        record.stored_plan = stored["plan"]
        if record.stored_body is not None and {**json.loads(record.stored_body), "plan": record.stored_plan} == stored:
            record.stored_body = body

    def transition(self, backfill_id: str, target: BackfillStatus, action: BackfillCommand) -> BackfillStatus:
        """Sets the status of `backfill_id` to `target` by compare-and-set; returns the
        status it replaced.

        Args:
            action: What asks for the change, as a refusal names it (e.g. cancel).

        Raises:
            IllegalTransitionError: The stored status may not become `target`; nothing was written.
            UnknownBackfillError: No record of `backfill_id`.
        """
        while True:
            row = self._row(backfill_id, BACKFILLS.c.status, BACKFILLS.c.version)
            if row is None:
                raise self._unknown(backfill_id)
            current = BackfillStatus(row.status)
            check_transition(backfill_id, current, target, action)
            with self._connect() as connection:
                swapped = connection.execute(
                    update(BACKFILLS)
                    .where(BACKFILLS.c.id == backfill_id, BACKFILLS.c.version == row.version)
                    .values(status=target.value, version=row.version + 1, updated_at=time.time())
                )
                if swapped.rowcount == 1:
                    return current

    def versions_in(self, statuses: Iterable[BackfillStatus]) -> dict[str, int]:
        """The version of every backfill whose status is one of `statuses`."""
        with self._connect() as connection:
            rows = connection.execute(
                select(BACKFILLS.c.id, BACKFILLS.c.version).where(BACKFILLS.c.status.in_([s.value for s in statuses]))
            )
            return {row.id: row.version for row in rows}

    def claim_takeover(self, backfill_id: str, version: int, claimed_before: float) -> bool:
        """Marks `backfill_id` as taken over by the caller when it is still at `version` and
        no takeover was claimed after `claimed_before` (epoch seconds); False when another
        caller got there first. One statement: of callers racing, one wins."""
        now = time.time()
        with self._connect() as connection:
            claimed = connection.execute(
                update(BACKFILLS)
                .where(
                    BACKFILLS.c.id == backfill_id,
                    BACKFILLS.c.version == version,
                    or_(BACKFILLS.c.taken_over_at.is_(None), BACKFILLS.c.taken_over_at < claimed_before),
                )
                .values(taken_over_at=now, version=version + 1, updated_at=now)
            )
            return claimed.rowcount == 1

    def _row(self, backfill_id: str, *columns: Column) -> Row | None:
        with self._connect() as connection:
            return connection.execute(select(*columns).where(BACKFILLS.c.id == backfill_id)).first()

    def _insert(self, backfill_id: str, status: BackfillStatus, body: str) -> bool:
        """Inserts a record; False when one of that id exists."""
        now = time.time()
        try:
            with self._connect() as connection:
                connection.execute(
                    BACKFILLS.insert().values(
                        id=backfill_id, status=status.value, version=1, body=body, created_at=now, updated_at=now
                    )
                )
        except IntegrityError:
            return False
        return True

    def _changed(self, backfill_id: str, what: str) -> RecordChangedError:
        return RecordChangedError(
            f"backfill {backfill_id}: {what} (another command or coordinator acted on it meanwhile), so this "
            f"process's view of it is stale. Nothing was written; see where it stands with "
            f"`partition-assets backfill status {backfill_id}`, then run the command again if it still fits."
        )

    def _unknown(self, backfill_id: str) -> UnknownBackfillError:
        known = self.ids()
        return UnknownBackfillError(
            f"no backfill {backfill_id!r} is recorded in the Dagster instance at {self._root}; "
            + (f"known: {', '.join(known[-20:])}" if known else "none is (check DAGSTER_HOME and its storage)")
        )

    @contextmanager
    def _connect(self) -> Iterator[Connection]:
        with self._storage.connect() as connection:
            yield connection

    def _create_tables(self) -> None:
        """Creates the tables when absent (two processes may race: the loser finds them),
        then refuses tables of a newer schema version."""
        _retrying_once(lambda: self._with_connection(lambda c: _metadata.create_all(c, checkfirst=True)))
        with self._connect() as connection:
            stored = connection.execute(select(SCHEMA.c.version).where(SCHEMA.c.name == _SCHEMA_NAME)).scalar()
        if stored is None:
            try:
                with self._connect() as connection:
                    connection.execute(SCHEMA.insert().values(name=_SCHEMA_NAME, version=BACKFILL_TABLES_FORMAT))
            except IntegrityError:  # another process wrote it meanwhile
                pass
        else:
            checked_version(
                stored, BACKFILL_TABLES_FORMAT, f"the backfill tables of the Dagster instance at {self._root}"
            )

    def _with_connection(self, action: Callable[[Connection], object]) -> None:
        with self._connect() as connection:
            action(connection)

    def _migrate_files(self) -> None:
        """Copies each record file an earlier release wrote in, once (see the module docstring)."""
        folder = self._root.joinpath(*LEGACY_FOLDER)
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            if not is_backfill_id(path.stem):
                continue
            saved = json.loads(path.read_text())
            record = BackfillRecord.from_json(
                saved, BackfillStatus(saved.get("status", "running")), path.stem, store=self
            )
            if self._insert(record.id, record.status, json.dumps(record.to_json())):
                _log.info("backfill %s: its record moved from %s into the Dagster instance", record.id, path)
            path.rename(path.with_name(f"{path.name}.migrated"))


def _retrying_once(action: Callable[[], None]) -> None:
    """`action`, again once if it failed (a concurrent CREATE TABLE on Postgres fails the loser)."""
    try:
        action()
    except (IntegrityError, OperationalError, ProgrammingError):
        action()
