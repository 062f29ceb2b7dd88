"""Rolling back a backfill's publish commit: one commit that restores the partitions it
changed to their files before it, read from the log (the backfill's manifests are gone
by then), and the schema before it when the publish changed the schema, carrying the
application transaction `rollback_app_id(backfill_id)` so that a repeated rollback
commits nothing. Partitions the backfill created are removed.

A rollback refuses (RollbackError, nothing committed) when the version given is not the
backfill's publish commit, when a later commit changed those partitions (unless
forced), or when a file to restore is gone; a rollback of a schema change refuses
(SchemaRollbackError, even forced) when a partition outside the publish was written
since, as the old schema would not fit its files.

Not guaranteed: a rollback re-adds files that a vacuum may delete between its check and
its commit: keep the vacuum retention longer than backfills may be rolled back. Files
are re-added with their row count as their only statistics.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.transaction import CommitProperties, Transaction

from partition_assets.errors import RollbackError, SchemaRollbackError
from partition_assets.storage.backfill_staging import PartitionRow
from partition_assets.storage.delta.commit import add_action, remove_actions, replace_with_schema, with_commit_retries
from partition_assets.storage.delta.log import (
    PUBLISH,
    ROLLBACK,
    LoggedFile,
    backfill_commit_metadata,
    backfill_commit_version,
    changed_partitions,
    commit_effect,
    files_by_partition,
    is_backfill_commit,
    open_table,
    paths,
    rollback_app_id,
    table_schema,
)
from partition_assets.storage.partition_scope import PartitionScope
from partition_assets.storage.schema_change import diff_schemas
from partition_assets.storage.table_format import PublishResult
from partition_assets.storage.write_staging import table_filesystem


def rollback_publish(table_uri: str, backfill_id: str, published_version: int, force: bool = False) -> PublishResult:
    """Restores the partitions backfill `backfill_id` published at `published_version`
    to their files at `published_version - 1`, in one commit carrying the application
    transaction (rollback_app_id(backfill_id), 1); partitions the backfill created are
    removed. The partitions are read from the log (what that commit changed), so the
    backfill's manifests are not needed. Idempotent like publish_staged.

    Raises:
        RollbackError: There is no table, or `check_rollback` refuses; nothing was committed.
        CommitError: The commit kept losing to concurrent writers (the table is unchanged), or the
            table holds the rollback but its log no longer names its version.
    """
    plan = _RollbackPlan.of(table_uri, backfill_id, published_version)
    if plan.done_version is not None:
        return commit_effect(table_uri, plan.done_version)

    def attempt(current: DeltaTable | None) -> int:
        assert current is not None  # a table never disappears from under a rollback
        plan.check_unchanged(current, force)
        adds = [add_action(file, file.modification_time) for file in plan.restored]
        properties = CommitProperties(
            custom_metadata=backfill_commit_metadata({}, backfill_id, ROLLBACK),
            max_commit_retries=0,
            app_transactions=[Transaction(app_id=rollback_app_id(backfill_id), version=1)],
        )
        if plan.schema_before is not None:  # the publish changed the schema: restore it in the same commit
            # When the publish rewrote every partition there is, the whole table goes back.
            whole = set(files_by_partition(current)) <= set(plan.partitions)
            return replace_with_schema(current, adds, None if whole else plan.scope, plan.schema_before, properties)[0]
        removes = remove_actions(current, plan.scope)
        read_version = current.version()
        current.create_write_transaction(
            [*adds, *removes],
            mode="append",
            schema=current.schema(),
            partition_by=list(plan.columns) or None,
            commit_properties=properties,
        )
        return read_version + 1

    version = with_commit_retries(table_uri, plan.table, attempt)
    return commit_effect(table_uri, version)


def check_rollback(table_uri: str, backfill_id: str, published_version: int, force: bool = False) -> None:
    """Raises RollbackError, committing nothing, when `rollback_publish` would refuse: when
    `published_version` is not the backfill's publish commit; when a later commit
    changed those partitions (unless `force`, which discards that commit's changes to
    them); when a file to restore is gone. Lets a multi-table rollback refuse before
    committing any table.

    Raises:
        RollbackError: There is no table, or a refusal named above.
        CommitError: The table holds the rollback but its log no longer names its version.
    """
    plan = _RollbackPlan.of(table_uri, backfill_id, published_version)
    if plan.done_version is None:
        plan.check_unchanged(plan.table, force)


@dataclass
class _RollbackPlan:
    """What rolling back one table's publish commit restores, checked against the log."""

    table_uri: str
    backfill_id: str
    published_version: int
    table: DeltaTable
    done_version: int | None  # the rollback commit, when the table holds it already
    partitions: list[PartitionRow] = field(default_factory=list)
    restored: list[LoggedFile] = field(default_factory=list)
    after: dict[PartitionRow, list[LoggedFile]] = field(default_factory=dict)
    columns: tuple[str, ...] = ()
    schema_before: pa.Schema | None = None  # the schema to restore, when the publish changed it

    @property
    def scope(self) -> PartitionScope | None:
        return PartitionScope(self.columns, frozenset(self.partitions)) if self.columns else None

    @classmethod
    def of(cls, table_uri: str, backfill_id: str, published_version: int) -> _RollbackPlan:
        table = open_table(table_uri)
        if table is None:
            raise RollbackError(f"no Delta table at {table_uri}: nothing to roll back; nothing was committed.")
        if table.transaction_version(rollback_app_id(backfill_id)) is not None:
            done = backfill_commit_version(table, backfill_id, ROLLBACK)
            return cls(table_uri, backfill_id, published_version, table, done)
        entry = next((e for e in table.history() if e.get("version") == published_version), {})
        if not is_backfill_commit(entry, backfill_id, PUBLISH):
            raise RollbackError(
                f"version {published_version} of table {table_uri} is not backfill {backfill_id}'s "
                "publish commit: pass the version its publish returned (see the backfill's "
                "ledger). Nothing was committed."
            )
        previous = open_table(table_uri, version=published_version - 1) if published_version else None
        published = open_table(table_uri, version=published_version)
        before, after = files_by_partition(previous), files_by_partition(published)
        partitions = sorted(changed_partitions(before, after))
        restored = [file for row in partitions for file in before.get(row, ())]
        fs, root = table_filesystem(table_uri)
        missing = [f for f in restored if fs.get_file_info(f"{root}/{f.path}").type != pafs.FileType.File]
        if missing:
            raise RollbackError(
                f"{len(missing)} of the {len(restored)} files backfill {backfill_id} replaced in "
                f"{table_uri} are gone (vacuumed, e.g. {missing[0].path}): the previous content "
                "cannot be restored; nothing was committed. Vacuum retention must exceed the time "
                "within which backfills may be rolled back."
            )
        columns = tuple(table.metadata().partition_columns)
        schema_before = None
        if previous is not None and published is not None:
            old_schema = table_schema(previous)[0]
            schema_before = old_schema if diff_schemas(old_schema, table_schema(published)[0]) else None
        return cls(
            table_uri, backfill_id, published_version, table, None, partitions, restored, after, columns, schema_before
        )

    def check_unchanged(self, current: DeltaTable, force: bool) -> None:
        """RollbackError unless `force` when a commit after the publish changed its partitions;
        SchemaRollbackError, even with `force`, when the publish changed the schema and a commit
        after it wrote a partition outside the publish (see `_check_no_later_partitions`)."""
        now = files_by_partition(current)
        if self.schema_before is not None:
            self._check_no_later_partitions(now)
        changed = sorted(row for row in self.partitions if paths(now.get(row)) != paths(self.after.get(row)))
        if changed and not force:
            raise RollbackError(
                f"partitions {PartitionScope(self.columns, frozenset(changed)).describe()} of "
                f"{self.table_uri} changed after backfill {self.backfill_id} published them at version "
                f"{self.published_version}; nothing was committed. Roll back with force "
                f"(`partition-assets backfill rollback {self.backfill_id} --force`) to discard those later "
                "changes too."
            )

    def _check_no_later_partitions(self, now: dict[PartitionRow, list[LoggedFile]]) -> None:
        """SchemaRollbackError when a partition the publish did not change was written since (its
        files differ from those at the publish): its files hold the schema written then, and a
        Delta table has one schema, so restoring the old one would leave them read wrong (a
        split column read as null, a retyped one failing Spark's read). `force` cannot help:
        the rollback has no old files of such a partition to restore."""
        later = sorted(
            row
            for row in now.keys() | self.after.keys()
            if row not in self.partitions and paths(now.get(row)) != paths(self.after.get(row))
        )
        if not later:
            return
        shown = PartitionScope(self.columns, frozenset(later)).describe() if self.columns else "the table"
        raise SchemaRollbackError(
            f"backfill {self.backfill_id} changed the schema of {self.table_uri} at version "
            f"{self.published_version}, and partitions {shown} outside it were written since, in the new "
            "schema: restoring the old schema would leave their files read wrong (a changed column "
            "read as null or failing to read). Nothing was committed, with or without --force. Roll "
            f"back those writes first (delete a partition the table did not have at version {self.published_version}, "
            "restore the files it had then to one it had), or change the schema forward with a new "
            "backfill over every partition."
        )
