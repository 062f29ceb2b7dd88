"""The commits of a staged backfill's publish: one per table, upstream first, after every
table still to publish was checked to hold the staging its gate evaluated, and for
commits made outside the backfill; a publish stopped part-way by such a commit says
what was and was not published. What follows the commits (the release, Dagster's records,
the ledger, the status `published`) are the next publishing stages (stages.py).

The release log (release_steps.py) records the publish's begin before its first table
commit, and its release stage the release after the last: readers through the library (storage/release_reads.py,
the IO managers' inputs) read every table as before until the release, then every table as after.

Not guaranteed: between the first and the last table commit a reader of the tables' raw
latest versions joining two tables can see one published and the other not (each table on
its own is old or new, never a mix); after a foreign commit stops a publish part-way, until
it is finished or rolled back. Each table's staging is read once per publish (`PendingTable`), and
committed as read: a staging changed between that read (an approval's checks, else the table
commits' start) and its table's commit (moments apart, while the backfill holds its leases) is not
seen, but for a file deleted since, which fails its move (CommitError).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import cast

from partition_assets.backfill.model import BackfillCommand, BackfillStatus
from partition_assets.backfill.publishing import release_steps
from partition_assets.backfill.publishing.backfill_stats import table_stats
from partition_assets.backfill.publishing.tables import BackfillTable, Tables
from partition_assets.backfill.state.ledger import Ledger, LedgerStatus, ledger_uri
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.status import is_allowed
from partition_assets.errors import (
    ForeignCommitError,
    PartiallyPublishedError,
    PartitionAssetsError,
    StagingChangedError,
    StagingMissingError,
)
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets.storage.backfill_staging import (
    ListedStaging,
    PartitionRow,
    StagedTable,
    StagingFingerprint,
    list_staging,
)
from partition_assets.storage.failpoints import failpoint
from partition_assets.storage.table_format import PreviousKeepingFormat

# The statuses past a gate, before a publish; the ledger rows a gate writes (and an approval copies).
_GATED_STATUSES = frozenset(
    {
        BackfillStatus.GATE_FAILED,
        BackfillStatus.AWAITING_APPROVAL,
        BackfillStatus.PUBLISH_REFUSED,
        BackfillStatus.PUBLISHING,
    }
)
_GATED_ROWS = frozenset({LedgerStatus.STAGED, LedgerStatus.GATE_FAILED, LedgerStatus.APPROVED})


def commit_tables(
    record: BackfillRecord,
    tables: Tables,
    lake: str | None,
    force: bool = False,
    read: Sequence[PendingTable] | None = None,
) -> dict[str, int | None]:
    """Commits the staged partitions of each of `tables`, upstream first, each in one commit,
    saving each table's version in `record` as it is committed, after the publish's begin
    in the release log of `lake` (the lake's root; None: no log; its release is the next
    stage's: stages.py); returns every
    table's published version. `record` ends in status `publishing`.

    Before the first commit, every table still to publish is checked to hold the staging its
    gate evaluated (`check_staging`, `force` or not: a StagingChangedError, status
    `publish_refused` when nothing was published yet and the status allows it), and for commits made
    outside the backfill to its partitions since it started (unless `force`): any is a
    ForeignCommitError naming them all, status `publish_refused`, nothing committed.
    A foreign commit landing after that check stops the publish at its table:
    PartiallyPublishedError names the tables published and those not (status stays
    `publishing`; `rollback` undoes the published ones, `publish --force` finishes).
    A backfill canceled meanwhile is refused (IllegalTransitionError) before any commit.
    Idempotent: tables already committed are not committed again. With --keep-previous,
    each table's version before its commit stays readable as `<table>__previous`.

    Each table's staging is read once (`unpublished_tables`, or `read`: what an approval just
    read and checked): its checks and its commit take that read, and list none again.

    Raises:
        StagingMissingError: A table holds neither the backfill's staging nor its publish
            commit (its staging was deleted); nothing was committed to any table."""
    pending = unpublished_tables(record, tables) if read is None else read
    try:
        check_staging(record, tables, pending, Ledger(ledger_uri(lake)) if lake else None)
    except StagingChangedError:
        if not published_versions(record) and is_allowed(record.status, BackfillStatus.PUBLISH_REFUSED):
            record.move_to(BackfillStatus.PUBLISH_REFUSED, BackfillCommand.PUBLISH)
        raise
    if not force:
        _check_unchanged(record, tables, pending)
    record.move_to(BackfillStatus.PUBLISHING, BackfillCommand.PUBLISH)
    release_steps.begin(lake, release_steps.ReleaseOperation.PUBLISH, record.id, [p.table for p in pending])
    for table, listed, expected in ((p.table, p.listed, p.expected) for p in pending):
        try:
            result = table.staging_format.publish_staged(
                table.uri, record.id, None if force else expected, {BACKFILL_ID_TAG: record.id}, listed
            )
        except ForeignCommitError as error:
            raise _partially_published(record, tables, table, error) from None
        record.published_versions[table.asset.to_user_string()] = result.version
        record.save()
        if result.version is not None:
            table.staging_format.check_one_schema(table.spark_session, table.uri, result.version)
        _keep_previous(record, table, result.version)
        failpoint("between_table_commits")
    return dict(record.published_versions)


def _keep_previous(record: BackfillRecord, table: BackfillTable, version: int | None) -> None:
    """With --keep-previous, the table's version before the publish kept as `<table>__previous`
    until the expiry (PreviousKeepingFormat); nothing when the publish created the table."""
    keep_for = record.spec.keep_previous_for()
    if keep_for is None or not version:
        return
    expires_at = datetime.now(UTC) + keep_for  # bookkeeping time of the copy, not asset logic
    keeping = cast(PreviousKeepingFormat, table.table_format)  # checked at launch: BackfillTable.check_stageable
    keeping.keep_previous(table.uri, version - 1, record.id, expires_at)


@dataclass(frozen=True)
class PendingTable:
    """A table still to publish and its staging as read once for this publish (its manifests);
    where its files are is listed on first use (`listed`), once. The checks and the commit of
    the publish take this read, and read the staging no more. `expected`: the published files of
    each of its partitions when the backfill started (`fingerprint_of`), what commits outside the
    backfill are checked against."""

    table: BackfillTable
    staged: StagedTable
    expected: Mapping[PartitionRow, frozenset[str]]

    @cached_property
    def listed(self) -> ListedStaging:
        """The staging with where each of its files is (one listing of its data folder)."""
        return list_staging(self.staged)


def unpublished_tables(record: BackfillRecord, tables: Tables) -> list[PendingTable]:
    """The tables whose publish commit is not in their log, with staged data (read here, once);
    the record's published versions are set from the tables' logs, those published getting their
    version and the others none (a coordinator may die between a commit and saving the record, and
    a record may be saved over by another process: the log, not the record, is the truth)."""
    pending = []
    versions = record.published_versions
    for table in tables.values():
        version = table.staging_format.published_version(table.uri, record.id)
        if version is not None:
            versions[table.asset.to_user_string()] = version
        else:
            versions.pop(table.asset.to_user_string(), None)
            if (staged := table.staging_format.staged(table.uri, record.id)) is not None:
                pending.append(PendingTable(table, staged, fingerprint_of(record, table)))
    return pending


def _check_staged(record: BackfillRecord, tables: Tables, pending: Sequence[PendingTable]) -> None:
    """StagingMissingError, before any commit, naming the tables the gate saw staged that are
    neither published nor staged now: leaving one out would publish the others and record it
    as published, unchanged. A table the backfill staged nothing in (an asset whose body
    returns a MaterializeResult writes no table) is not one."""
    gated = record.gated_staging
    staged = {p.table.asset for p in pending}
    missing = [
        table
        for table in tables.values()
        if table.asset not in staged
        and table.asset.to_user_string() in gated
        and table.asset.to_user_string() not in published_versions(record)
    ]
    if missing:
        bid = record.id
        raise StagingMissingError(
            f"backfill {bid}: the staged data of {', '.join(f'{t.asset.to_user_string()} ({t.uri})' for t in missing)} "
            f"is gone (its folder under _backfills/{bid}/ was deleted) and the backfill has not published it: "
            "nothing was committed to any table. Discard the backfill "
            f"(`partition-assets backfill discard {bid}`) and run it again."
        )


def check_staging(
    record: BackfillRecord, tables: Tables, pending: Sequence[PendingTable], ledger: Ledger | None
) -> None:
    """Refuses, writing nothing, a publish of `pending` (the tables still to publish) whose
    staging is gone (StagingMissingError) or not the one its gate evaluated (StagingChangedError).
    A backfill gated by a release before staging fingerprints is fingerprinted first when its
    staging holds what the gate recorded in `ledger` (`_fingerprint_as_ledgered`).

    Raises:
        StagingMissingError: A table holds neither its staging nor its publish commit.
        StagingChangedError: A table's staging differs from the one its gate evaluated.
    """
    _check_staged(record, tables, pending)
    _fingerprint_as_ledgered(record, pending, ledger)
    _check_as_gated(record, tables, pending)


def _fingerprint_as_ledgered(record: BackfillRecord, pending: Sequence[PendingTable], ledger: Ledger | None) -> None:
    """Records the fingerprint of each staging of `pending` in a record gated by a release before
    staging fingerprints (it holds none, past its gate) when the staging holds what that gate
    evaluated, as the gate's ledger rows recorded it: the same partitions, each with the same rows
    and checksum. The publish then checks them as any gate's; else `_check_as_gated` refuses it.
    One read of each table's staging (a Spark job), once.

    Not guaranteed: the content is compared by the ledger's checksum (an order-free sum of row
    hashes), not byte for byte."""
    if record.gated_staging or ledger is None or not pending or record.status not in _GATED_STATUSES:
        return
    gated = {
        (entry.asset, entry.partition): (entry.rows, entry.checksum)
        for entry in ledger.latest(record.id)
        if entry.status in _GATED_ROWS
    }
    fingerprints: dict[str, dict[str, str | int]] = {}
    for table in (p.table for p in pending):
        stats = table_stats(record, table)
        asset = table.asset.to_user_string()
        if stats is None:
            return
        staged = {
            (asset, table.partition_key(row)): (new.rows, new.checksum) if new else (0, None)
            for row in stats.partitions
            for new in [stats.new.get(row)]
        }
        if staged != {key: content for key, content in gated.items() if key[0] == asset}:
            return
        fingerprints[asset] = stats.staging.to_json()
    record.gated_staging = fingerprints
    record.save()


def check_schema_changes(record: BackfillRecord, pending: Sequence[PendingTable]) -> None:
    """Refuses, writing nothing, a publish of `pending` (the tables still to publish) whose
    staged schema change needs a partition the backfill did not stage: what `commit_tables`
    would refuse whatever commits were made outside the backfill (those it refuses itself,
    moving the backfill to `publish_refused`).

    Raises:
        SchemaChangeError: A table's staged schema change needs a partition the backfill did not stage.
    """
    for table, staged in ((p.table, p.staged) for p in pending):
        table.staging_format.check_publish(table.uri, record.id, None, staged)


def _check_as_gated(record: BackfillRecord, tables: Tables, pending: Sequence[PendingTable]) -> None:
    """StagingChangedError, writing nothing, when a table of `pending` (the tables still to
    publish) holds a staging other than the one the gate evaluated (gate_step.gate recorded its
    fingerprint): a file added, replaced, removed or touched since, or a staging of a table the
    gate saw none of. (A table the gate saw staged that is neither pending nor published is
    `_check_staged`'s, which runs first.)

    Raises:
        StagingChangedError: A table's staging differs from the one its gate evaluated.
    """
    changed = [p.table.asset.to_user_string() for p in pending if not _holds_as_gated(record, p)]
    if not changed:
        return
    uris = [table.uri for asset, table in tables.items() if asset.to_user_string() in changed]
    staged = f"the staged data of {', '.join(changed)} ({', '.join(uris)})"
    if not record.gated_staging:
        cause = (
            f"{staged} has no fingerprint of what its validation gate evaluated (it was gated by a release of "
            "partition_assets before staging fingerprints), and does not hold what the gate recorded in the ledger "
            "(the rows and checksum of each partition)"
        )
    else:
        cause = (
            f"{staged} is not what its validation gate evaluated (files were staged, replaced, removed or touched "
            "after the gate, e.g. by a run that is not one of the backfill's node runs, or by hand)"
        )
    raise StagingChangedError(
        f"backfill {record.id}: {cause}; nothing was published and the staging is kept. "
        + ("Find what changed it; then " if record.gated_staging else "")
        + f"`partition-assets backfill resume {record.id}` gates the staging as it is now (a backfill whose "
        f"publish was refused), or `partition-assets backfill discard {record.id}` drops it."
    )


def _holds_as_gated(record: BackfillRecord, pending: PendingTable) -> bool:
    table = pending.table
    gated = record.gated_staging.get(table.asset.to_user_string())
    if gated is None:
        return False
    fingerprint = StagingFingerprint.from_json(gated, f"the gate's fingerprint of {table.uri} in backfill {record.id}")
    return pending.listed.fingerprint.holds_as(fingerprint)


def fingerprint_of(record: BackfillRecord, table: BackfillTable) -> dict[tuple[str, ...], frozenset[str]]:
    return as_files(record.fingerprints.get(table.asset.to_user_string())) or {}


def _check_unchanged(record: BackfillRecord, tables: Tables, pending: Sequence[PendingTable]) -> None:
    refusals = []
    for table, staged, expected in ((p.table, p.staged, p.expected) for p in pending):
        try:
            table.staging_format.check_publish(table.uri, record.id, expected, staged)
        except ForeignCommitError as error:
            refusals.append(str(error))
    if not refusals:
        return
    if not published_versions(record):
        record.move_to(BackfillStatus.PUBLISH_REFUSED, BackfillCommand.PUBLISH)
        raise ForeignCommitError(
            f"backfill {record.id}: nothing was published, as commits outside the backfill changed "
            f"partitions it rewrites: {' '.join(refusals)}"
        )
    raise _partially_published(record, tables, pending[0].table, ForeignCommitError(" ".join(refusals)))


def published_versions(record: BackfillRecord) -> dict[str, int | None]:
    return {asset: version for asset, version in record.published_versions.items() if version is not None}


def _partially_published(
    record: BackfillRecord, tables: Tables, stopped_at: BackfillTable, cause: ForeignCommitError
) -> PartitionAssetsError:
    """What a publish stopped by a foreign commit at `stopped_at` left: nothing (a
    ForeignCommitError), or some tables published (PartiallyPublishedError)."""
    published = published_versions(record)
    if not published:
        return cause
    names = list(tables)
    left = [
        asset.to_user_string()
        for asset in names[names.index(stopped_at.asset) :]
        if asset.to_user_string() not in published
    ]
    bid = record.id
    return PartiallyPublishedError(
        f"backfill {bid} stopped publishing part-way: published {describe_versions(published)}; not published: "
        f"{', '.join(left)}. {cause} Readers see the new content of the published tables beside the old "
        f"content of the others until you either finish with `partition-assets backfill publish {bid} "
        f"--force` (overwrites the commit made outside the backfill) or undo with `partition-assets backfill "
        f"rollback {bid}` (restores the published tables and deletes the rest of the staged data)."
    )


def describe_versions(versions: Mapping[str, int | None]) -> str:
    """Table versions as text: `a v3, b v7` ("no tables" when none)."""
    return ", ".join(f"{asset} v{version}" for asset, version in versions.items()) or "no tables"


def published_files(table: BackfillTable) -> dict[str, list[str]]:
    """The published files of each partition the backfill writes, keyed by the JSON
    list of the partition's column values (a JSON object needs text keys)."""
    files = table.staging_format.partition_files(table.uri, table.scope)
    return {json.dumps(list(row)): sorted(paths) for row, paths in files.items()}


def as_files(fingerprint: Mapping[str, list[str]] | None) -> dict[tuple[str, ...], frozenset[str]] | None:
    if fingerprint is None:
        return None
    return {tuple(json.loads(key)): frozenset(paths) for key, paths in fingerprint.items()}
