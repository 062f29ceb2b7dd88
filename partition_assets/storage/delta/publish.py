"""Publishing what a backfill staged for a Delta table: ONE commit that adds its staged
files and removes every published file of its staged partitions, carrying the
application transaction `publish_app_id(backfill_id)`, so that a repeated publish
commits nothing and a publish killed part-way is finished by the next.

Not guaranteed: the staged files are moved into the table's layout before the commit;
a publish that dies in between leaves them there, unreferenced, until it is run again
(partition-assets' vacuum spares them while the backfill's manifest lists them; a standard
Delta vacuum does not read manifests and deletes them once older than its retention: the
next publish then refuses, CommitError naming the file and `backfill discard`, which a
backfill still `publishing` with no table committed accepts).
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.transaction import Transaction

from partition_assets.errors import BackfillStateError, ForeignCommitError, SchemaChangeError
from partition_assets.storage.backfill_staging import (
    BACKFILLS_DIR,
    ListedStaging,
    PartitionRow,
    StagedTable,
    delete_published_backfill,
    list_staging,
    move_into_table_layout,
)
from partition_assets.storage.delta.commit import add_action, check_schema, commit, has_overwrite_filter
from partition_assets.storage.delta.log import (
    PUBLISH,
    backfill_commit_metadata,
    commit_effect,
    files_by_partition,
    open_table,
    partition_files,
    publish_app_id,
    published_in,
    table_schema,
)
from partition_assets.storage.delta.read import staging_of
from partition_assets.storage.failpoints import failpoint
from partition_assets.storage.partition_scope import PartitionScope
from partition_assets.storage.schema import check_partitioning
from partition_assets.storage.schema_change import SchemaChange, diff_schemas
from partition_assets.storage.table_format import PublishResult


def publish_staged(
    table_uri: str,
    backfill_id: str,
    expected: Mapping[PartitionRow, frozenset[str]] | None,
    metadata: Mapping[str, str],
    listed: ListedStaging | None = None,
) -> PublishResult:
    """Publishes what backfill `backfill_id` staged in ONE commit: its staged files in,
    every published file of its staged partitions out, carrying the application
    transaction (publish_app_id(backfill_id), 1); creates the table when missing.

    Idempotent and resumable: when the table already holds the transaction, nothing
    is committed and the result is that commit's; a call killed part-way is finished
    by the next. When the staged schema differs from the table's (new columns, or a
    backfill's declared schema change), the same commit writes it (a metaData action);
    a change other than added columns needs every partition of the table staged (columns
    added to partitions of a two-dimensional table that no one filter names are added by
    a commit of their own first). With
    `expected` (partition -> published files, as `partition_files` took them), any
    difference is a ForeignCommitError and nothing is committed; the staging is kept.
    Once published, the backfill's staging is deleted (the log keeps what rollback needs): its
    manifests at once, the rest of its folder by a thread (backfill_staging.delete_published_backfill).

    Args:
        metadata: Commit metadata to record with the publish.
        listed: The staging as the caller read it for this publish (`list_staging`), which is not
            read again unless the table's schema changed since (None: read here).

    Raises:
        ForeignCommitError: A staged partition's published files are no longer `expected`.
        BackfillStateError: The backfill staged nothing for the table and has not published to it;
            nothing was committed.
        TableSchemaError: The staged schema no longer fits the table's; nothing was committed.
        SchemaChangeError: The staged schema drops, retypes, renames or splits a column and a partition
            of the table was not staged; nothing was committed, the staging is kept.
        CommitError: A staged file is missing or the commit kept losing to concurrent writers (the
            table is unchanged), or the table holds the publish but its log no longer names its version.
        BackfillIdError: `backfill_id` cannot name a folder; nothing was committed.
    """
    table = open_table(table_uri)
    published = published_in(table, backfill_id)
    if published is not None:
        delete_published_backfill(table_uri, backfill_id)  # a killed publish may have left it
        return commit_effect(table_uri, published)
    staged = _staging(table, table_uri, backfill_id, None if listed is None else listed.staged)
    if staged is None:
        raise BackfillStateError(
            f"backfill {backfill_id} staged nothing for table {table_uri} (no manifest under "
            f"{BACKFILLS_DIR}/{backfill_id}/) and has not published to it: nothing was committed. "
            "Leave this table out of the publish, or run the backfill's nodes for it first."
        )
    write = staged.as_write()
    change = _schema_change(table, staged)

    checked: set[int] = set()  # the versions checked (-1: no table): the commit's first attempt is on `table`

    def check(current: DeltaTable | None) -> None:
        version = -1 if current is None else current.version()
        if version not in checked:
            _check_publishable(current, staged, expected, change)
            checked.add(version)

    check(table)
    if table is not None and change:
        check_partitioning(table_schema(table)[1], write)
    else:
        check_schema(table, write, allow_new_columns=True)
    # A change rewriting every partition replaces the whole table (checked on each attempt);
    # added columns over a range whose partitions no overwrite filter names take two commits.
    one_commit = bool(change) and (change.rewrites_every_partition or has_overwrite_filter(staged.scope))
    scope = None if change.rewrites_every_partition else staged.scope
    move_into_table_layout(listed if listed is not None and listed.staged is staged else list_staging(staged))
    failpoint("publish_committing")
    version, removed = commit(
        table,
        write,
        [add_action(file) for file in write.files],
        scope,
        backfill_commit_metadata(metadata, backfill_id, PUBLISH),
        True,
        check,
        Transaction(app_id=publish_app_id(backfill_id), version=1),
        new_schema=staged.schema if one_commit else None,
    )
    failpoint("publish_committed")
    delete_published_backfill(table_uri, backfill_id)
    return PublishResult.of([write], version, removed)


def check_publish(
    table_uri: str,
    backfill_id: str,
    expected: Mapping[PartitionRow, frozenset[str]] | None,
    staged: StagedTable | None = None,
) -> None:
    """Raises ForeignCommitError or SchemaChangeError, committing nothing, when `publish_staged`
    with `expected` (None: the schema change only) would refuse now; nothing when the backfill
    staged nothing here or has published already. Lets a multi-table publish refuse before
    committing any table, and an approval before it is recorded. `staged`: the staging as the
    caller read it, not read again unless the table's schema changed since (None: read here).

    Raises:
        ForeignCommitError: A staged partition's published files are no longer `expected`.
        SchemaChangeError: The staged schema change needs a partition the backfill did not stage.
        CommitError: The table holds the publish but its log no longer names its version.
        BackfillIdError: `backfill_id` cannot name a folder.
    """
    table = open_table(table_uri)
    if published_in(table, backfill_id) is not None:
        return
    current = _staging(table, table_uri, backfill_id, staged)
    if current is not None:
        _check_publishable(table, current, expected, _schema_change(table, current))


def _staging(
    table: DeltaTable | None, table_uri: str, backfill_id: str, read: StagedTable | None
) -> StagedTable | None:
    """The backfill's staging of the table over the snapshot `table`: `read` (what the caller read)
    while the table's schema is the one it was read over, else read again (a commit outside the
    backfill changed the schema since: the staged schema extends the table's as it is now)."""
    if read is not None and _same_schema(read.read_over, None if table is None else table_schema(table)[0]):
        return read
    return staging_of(table, table_uri, backfill_id)


def _same_schema(one: pa.Schema | None, other: pa.Schema | None) -> bool:
    return one is None and other is None or one is not None and other is not None and one.equals(other)


def _schema_change(table: DeltaTable | None, staged: StagedTable) -> SchemaChange:
    """What publishing `staged` changes in the table's schema (nothing when there is no table yet)."""
    return SchemaChange() if table is None else diff_schemas(table_schema(table)[0], staged.schema)


def _check_publishable(
    current: DeltaTable | None,
    staged: StagedTable,
    expected: Mapping[PartitionRow, frozenset[str]] | None,
    change: SchemaChange,
) -> None:
    """The refusals a publish checks on each snapshot it commits on: a foreign commit to a staged
    partition, a schema change that would drop columns a foreign commit added (both unless
    `expected` is None, as with --force), and a schema change that leaves a partition of the
    table out."""
    _check_unchanged(current, staged, expected)
    if change.rewrites_every_partition:
        if expected is not None:
            _check_no_foreign_columns(current, staged, change)
        _check_every_partition(current, staged, change)


def _check_no_foreign_columns(current: DeltaTable | None, staged: StagedTable, change: SchemaChange) -> None:
    """ForeignCommitError when commits outside the backfill added columns to the table since
    its first staging that its schema change would drop (columns added alongside a backfill
    that only adds columns are kept: schema_change.schema_after)."""
    if current is None or staged.started_from is None:
        return
    added = [name for name in table_schema(current)[0].names if name not in staged.started_from.names]
    dropped = [name for name in added if name not in staged.schema.names]
    if dropped:
        raise ForeignCommitError(
            f"column(s) {dropped} of table {staged.table_uri} were added by a commit outside backfill "
            f"{staged.backfill_id} since it started, and its schema change ({'; '.join(change.describe())}) "
            "would drop them: nothing was published to this table and the staged data is kept. Discard the "
            "backfill and run it again over the table as it is now, so that its rewrite covers them."
        )


def _check_every_partition(current: DeltaTable | None, staged: StagedTable, change: SchemaChange) -> None:
    """SchemaChangeError when the table holds a partition `staged` does not rewrite: a Delta
    table has one schema, so a drop, retype, rename or split must rewrite all of them."""
    left = sorted(set(files_by_partition(current)) - set(staged.files_by_partition))
    if left:
        shown = PartitionScope(staged.partition_columns, frozenset(left)).describe()
        raise SchemaChangeError(
            f"backfill {staged.backfill_id} changes the schema of table {staged.table_uri} "
            f"({'; '.join(change.describe())}) but did not rewrite partitions {shown}: a Delta table has "
            "one schema, so a dropped, retyped, renamed or split column needs every partition rewritten. "
            "Nothing was published and the staged data is kept: discard it and backfill the whole "
            "range, or pass --all-partitions."
        )


def _check_unchanged(
    current: DeltaTable | None, staged: StagedTable, expected: Mapping[PartitionRow, frozenset[str]] | None
) -> None:
    """ForeignCommitError when a staged partition's published files are no longer `expected`
    (None: anything goes, as with --force)."""
    if expected is None:
        return
    found = partition_files(current, staged.scope)
    changed = sorted(
        row for row in staged.files_by_partition if found.get(row, frozenset()) != expected.get(row, frozenset())
    )
    if changed:
        shown = PartitionScope(staged.partition_columns, frozenset(changed)).describe()
        raise ForeignCommitError(
            f"partitions {shown} of table {staged.table_uri} changed since backfill {staged.backfill_id} "
            "started (a commit outside the backfill replaced their files); nothing was published to "
            "this table and the staged data is kept. Check the table's history, then publish with "
            "--force to overwrite that commit, or discard the backfill."
        )
