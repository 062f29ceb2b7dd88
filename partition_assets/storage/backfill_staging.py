"""A backfill's staged data: what it staged for a table, files written but not published,
and the manifests listing them. Each staging starts as a per-write staging
(write_staging.py) that `record_staging` moves here. Format-agnostic; a format publishes
them (DeltaFormat.publish_staged).

Layout under the table's folder, hidden from table readers and from Delta's vacuum
(both skip `_`-prefixed folders):

    _backfills/<backfill_id>/incoming/<uuid>/        Spark writes one staging here
    _backfills/<backfill_id>/data/<col=value>/<file>  staged files, in the table's layout
    _backfills/<backfill_id>/manifest/<seq>-<uuid>.json  one per staged write, written atomically

A manifest carries its format (state_formats.py), and so does the fingerprint of a staging
the gate records (`StagingFingerprint`): one a newer release wrote is refused, not misread.
A manifest lists the partitions its write replaces (all of its scope, also those the
frame left empty) and their files. The latest manifest naming a partition wins: a
retried node's staging supersedes the earlier one, whose files stay on disk until the
backfill's folder is deleted (discard, or cleanup after publish).

Not guaranteed: two stagings of the same partition of one backfill running at once
(a backfill runs one node per partition) end in an unspecified winner; a manifest is
atomic only where the filesystem's rename is (local disks; object stores copy).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import threading
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from partition_assets.errors import CommitError
from partition_assets.ids import checked_backfill_id, is_backfill_id
from partition_assets.state_formats import FINGERPRINT_FORMAT, FORMAT_FIELD, MANIFEST_FORMAT, checked_format
from partition_assets.storage.failpoints import failpoint
from partition_assets.storage.partition_scope import PartitionScope
from partition_assets.storage.schema_change import schema_after
from partition_assets.storage.write_staging import (
    StagedFile,
    StagedWrite,
    delete_dir,
    move_file,
    stale_folders,
    table_filesystem,
)

BACKFILLS_DIR = "_backfills"

PartitionRow = tuple[str, ...]  # partition-column values; () for an unpartitioned table


@dataclass(frozen=True)
class StagedTable:
    """What one backfill staged for one table: the latest staged files of each partition."""

    table_uri: str
    backfill_id: str
    partition_columns: tuple[str, ...]
    schema: pa.Schema  # the schema the table has once this publishes (schema_change.schema_after)
    files_by_partition: Mapping[PartitionRow, tuple[StagedFile, ...]]  # () holds none: cleared
    # the commit metadata of the staging each partition holds (its run id, input versions, ...)
    metadata_by_partition: Mapping[PartitionRow, Mapping[str, str]]
    # the published schema the backfill's first staging was checked against: what its own
    # changes are measured from (None: there was no table, or it was staged before this was kept)
    started_from: pa.Schema | None = None
    # the table's published schema `schema` extends, as it was when this was read (None: no table)
    read_over: pa.Schema | None = None

    @property
    def files(self) -> tuple[StagedFile, ...]:
        return tuple(file for files in self.files_by_partition.values() for file in files)

    @property
    def rows_by_partition(self) -> dict[PartitionRow, int]:
        return {row: sum(file.num_records for file in files) for row, files in self.files_by_partition.items()}

    @property
    def scope(self) -> PartitionScope | None:
        """The staged partitions; None for an unpartitioned table (the whole table)."""
        if not self.partition_columns:
            return None
        return PartitionScope(self.partition_columns, frozenset(self.files_by_partition))

    def as_write(self) -> StagedWrite:
        """The staged data as one staged write, its files in the backfill's data folder."""
        _, data = data_folder(self.table_uri, self.backfill_id)
        return StagedWrite(self.table_uri, data, self.schema, self.partition_columns, self.files)


@dataclass(frozen=True)
class StagingFingerprint:
    """What a backfill's staging of one table holds, as two digests: `content`, of the files its
    manifests list now (path, size on disk and in the manifest, records, partition) with the
    partition columns, schema and each partition's commit metadata; and `times`, of the files'
    modification times. A publish compares the staging it commits with the fingerprint its gate
    recorded (backfill/publishing/publish_step.py).

    Not guaranteed: a file rewritten in place to the same size with its modification time set
    back is not told apart; once a publish killed part-way moved files into the table's layout
    (a move on an object store is a copy, with a new time), only `content` is compared.
    """

    content: str
    times: str
    moved: bool = False  # some file is in the table's layout (a publish killed part-way moved it)

    def holds_as(self, gated: StagingFingerprint) -> bool:
        """Whether the staging holds what it held when `gated` was taken (the times compared
        only while no file has moved since)."""
        return self.content == gated.content and (self.moved or self.times == gated.times)

    def to_json(self) -> dict[str, str | int]:
        return {FORMAT_FIELD: FINGERPRINT_FORMAT, "content": self.content, "times": self.times}

    @classmethod
    def from_json(cls, saved: Mapping[str, str | int], what: str) -> StagingFingerprint:
        """The fingerprint `to_json` saved, in this release's format or an older one (`what`
        names it in a refusal). A release that computes fingerprints another way writes a new
        format, and computes the older ones' way to compare with them.

        Raises:
            StateFormatError: A newer release took it, in a format this one does not read; nothing was written.
        """
        checked_format(saved, FINGERPRINT_FORMAT, what)
        return cls(str(saved["content"]), str(saved["times"]))


@dataclass(frozen=True)
class ListedStaging:
    """A staging and where each of its files is now: what a publish reads of a table's staging,
    once (`list_staging`), and passes through its checks (the gate's fingerprint, commits outside
    the backfill) and its commit (the file moves), which read nothing of it again.

    Not guaranteed: it is what the folder held when listed; a file moved or deleted since (by
    hand: the backfill holds its leases) is found by the move that needs it (`move_into_table_layout`);
    a file added since to a folder of `whole_folders` moves with it, into the table's layout, where
    the commit does not reference it (vacuum deletes it).
    """

    staged: StagedTable
    # each staged file's path -> its info where it was found (type NotFound: in neither place)
    found: Mapping[str, pafs.FileInfo]
    # the paths not in the backfill's data folder: in the table's layout (moved there by a publish
    # killed part-way), or nowhere
    outside_data: frozenset[str]
    # the folders of the data folder (relative to it) that hold files of the staging and nothing
    # else (no file a retried node's staging superseded): a publish may move each one whole
    whole_folders: frozenset[str]

    @functools.cached_property
    def fingerprint(self) -> StagingFingerprint:
        """The fingerprint of the staging as listed (computed once)."""
        staged = self.staged
        content, times = hashlib.sha256(), hashlib.sha256()
        schema = base64.b64encode(staged.schema.serialize().to_pybytes()).decode()
        metadata = sorted([list(row), dict(values)] for row, values in staged.metadata_by_partition.items())
        content.update(json.dumps([list(staged.partition_columns), schema, metadata], sort_keys=True).encode())
        for row, files in sorted(staged.files_by_partition.items()):
            for file in sorted(files, key=lambda file: file.path):
                info = self.found[file.path]
                size = info.size if info.type == pafs.FileType.File else None
                content.update(json.dumps([list(row), file.path, file.size, size, file.num_records]).encode())
                times.update(f"{file.path}:{info.mtime_ns}\n".encode())
        return StagingFingerprint(content.hexdigest(), times.hexdigest(), bool(self.outside_data))


def list_staging(staged: StagedTable) -> ListedStaging:
    """Where each file of `staged` is now: one listing of the backfill's data folder, and a look
    in the table's layout for each file not found there.

    Raises:
        BackfillIdError: The staging's backfill id cannot name a folder.
    """
    fs, data = data_folder(staged.table_uri, staged.backfill_id)
    listed = {
        info.path: info
        for info in fs.get_file_info(pafs.FileSelector(data, recursive=True, allow_not_found=True))
        if info.type == pafs.FileType.File
    }
    _, root = table_filesystem(staged.table_uri)
    found, outside = {}, set()
    for file in staged.files:
        info = listed.get(f"{data}/{file.path}")
        if info is None:
            info = fs.get_file_info(f"{root}/{file.path}")
            outside.add(file.path)
        found[file.path] = info
    inside = [path for path in found if path not in outside]
    return ListedStaging(staged, found, frozenset(outside), _folders_holding_only(inside, listed, data))


def _folders_holding_only(files: Iterable[str], listed: Iterable[str], data: str) -> frozenset[str]:
    """The folders (relative to `data`) of `files` (paths relative to it, each one of `listed`,
    the full paths of every file under `data`) under which no other file of `listed` is."""
    wanted = Counter(folder for path in files if (folder := _folder(path)))
    under: Counter[str] = Counter()
    for path in listed:
        folder = _folder(path.removeprefix(f"{data}/"))
        while folder:
            under[folder] += 1
            folder = _folder(folder)
    return frozenset(folder for folder, count in wanted.items() if under[folder] == count)


def _folder(path: str) -> str:
    """The folder of a relative path ("" at the top)."""
    return path.rpartition("/")[0]


def staging_fingerprint(staged: StagedTable) -> StagingFingerprint:
    """The fingerprint of `staged` as its files are now (`list_staging`). A file found in
    neither place counts as empty, so its absence changes the fingerprint.

    Raises:
        BackfillIdError: The staging's backfill id cannot name a folder.
    """
    return list_staging(staged).fingerprint


def incoming_folder(backfill_id: str) -> str:
    """Where Spark stages a backfill's frame, relative to its table (for stage_dataframe).

    Raises:
        BackfillIdError: `backfill_id` cannot name a folder; nothing was written.
    """
    return f"{BACKFILLS_DIR}/{checked_backfill_id(backfill_id)}/incoming"


def backfill_folder(table_uri: str, backfill_id: str) -> tuple[pafs.FileSystem, str]:
    """The table's filesystem and the backfill's folder in it.

    Raises:
        BackfillIdError: `backfill_id` cannot name a folder.
    """
    fs, root = table_filesystem(table_uri)
    return fs, f"{root}/{BACKFILLS_DIR}/{checked_backfill_id(backfill_id)}"


def data_folder(table_uri: str, backfill_id: str) -> tuple[pafs.FileSystem, str]:
    """The table's filesystem and the folder of the backfill's staged files in it.

    Raises:
        BackfillIdError: `backfill_id` cannot name a folder.
    """
    fs, folder = backfill_folder(table_uri, backfill_id)
    return fs, f"{folder}/data"


def record_staging(
    write: StagedWrite,
    backfill_id: str,
    partitions: Iterable[PartitionRow],
    metadata: Mapping[str, str],
    published_schema: pa.Schema | None,
) -> None:
    """Moves `write`'s files into the backfill's data folder, then records them in a new
    manifest as the content of `partitions`, with the write's commit `metadata` (who
    staged it, from what) and the table's `published_schema` it was checked against (None:
    no table yet). A crash before the manifest's rename leaves files no manifest lists: the
    staging did not happen (discard deletes them).

    Raises:
        BackfillIdError: `backfill_id` cannot name a folder; nothing was written.
    """
    fs, data = data_folder(write.table_uri, backfill_id)
    for file in write.files:
        move_file(fs, f"{write.staging_dir}/{file.path}", f"{data}/{file.path}")
    _, folder = backfill_folder(write.table_uri, backfill_id)
    manifests = f"{folder}/manifest"
    fs.create_dir(manifests, recursive=True)
    staging_id = uuid.uuid4().hex
    sequence = 1 + max((_sequence(name) for name in _manifest_names(fs, manifests)), default=0)
    entry = {
        FORMAT_FIELD: MANIFEST_FORMAT,
        "sequence": sequence,
        "partition_columns": list(write.partition_columns),
        "partitions": sorted(list(row) for row in partitions),
        "schema": _encoded(write.schema),
        "published_schema": None if published_schema is None else _encoded(published_schema),
        "metadata": dict(metadata),
        "files": [
            {
                "path": f.path,
                "size": f.size,
                "partition_values": f.partition_values,
                "num_records": f.num_records,
            }
            for f in write.files
        ],
    }
    temporary = f"{manifests}/.{staging_id}.json.tmp"
    with fs.open_output_stream(temporary) as out:
        out.write(json.dumps(entry).encode())
    fs.move(temporary, f"{manifests}/{sequence:010d}-{staging_id}.json")
    delete_dir(fs, write.staging_dir)


def read_staged(table_uri: str, backfill_id: str, published_schema: pa.Schema | None) -> StagedTable | None:
    """The backfill's current staging of the table, None when it staged nothing there.

    The schema is the one the table has once it publishes (schema_change.schema_after):
    `published_schema` (the first staging's when None) extended by the columns the
    current stagings add, or the stagings' own when they drop or retype a column. Dropped
    and retyped are judged against the published schema the backfill's first staging was
    checked against (`StagedTable.started_from`): a column a commit outside the backfill
    added since is no column the backfill dropped.

    Raises:
        BackfillIdError: `backfill_id` cannot name a folder.
    """
    fs, folder = backfill_folder(table_uri, backfill_id)
    manifests = f"{folder}/manifest"
    entries = [_read_entry(fs, f"{manifests}/{name}") for name in sorted(_manifest_names(fs, manifests))]
    if not entries:
        return None
    columns = tuple(entries[-1]["partition_columns"])
    owner: dict[PartitionRow, int] = {}
    for index, entry in enumerate(entries):
        for row in entry["partitions"]:
            owner[tuple(row)] = index
    files_by_partition: dict[PartitionRow, list[StagedFile]] = {row: [] for row in owner}
    for index, entry in enumerate(entries):
        for raw in entry["files"]:
            file = StagedFile(raw["path"], raw["size"], raw["partition_values"], raw["num_records"])
            row = tuple(file.partition_values[c] for c in columns)
            if owner.get(row) == index:
                files_by_partition[row].append(file)
    current = [entries[index] for index in sorted(set(owner.values()))]
    schemas = [_decoded(entry["schema"]) for entry in current]
    started_from = _decoded(entries[0]["published_schema"]) if entries[0].get("published_schema") else None
    return StagedTable(
        table_uri,
        backfill_id,
        columns,
        schema_after(published_schema if published_schema is not None else schemas[0], schemas, started_from),
        {row: tuple(files) for row, files in files_by_partition.items()},
        {row: entries[index].get("metadata", {}) for row, index in owner.items()},
        started_from,
        published_schema,
    )


def _encoded(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def _decoded(encoded: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(encoded)))


def staged_file_location(staged: StagedTable, file: StagedFile) -> tuple[str, bool]:
    """Where a staged file is now, and whether that is the table's layout (moved there
    by a publish that did not finish) rather than the backfill's data folder."""
    fs, data = data_folder(staged.table_uri, staged.backfill_id)
    if fs.get_file_info(f"{data}/{file.path}").type == pafs.FileType.File:
        return f"{data}/{file.path}", False
    _, root = table_filesystem(staged.table_uri)
    return f"{root}/{file.path}", True


def move_into_table_layout(listed: ListedStaging) -> None:
    """Moves the staged files into the table's layout, still unreferenced by its log, from
    where `listed` found them (no look at each file first). On a local disk, a partition's
    folder the table lacks is moved whole when it holds the staging's files and nothing else
    (`ListedStaging.whole_folders`): one rename instead of a folder made and a rename per file
    (making a folder costs a block, 0.1 ms or more on a disk mounted with `discard`). An object
    store has no folders to rename: its files move one by one.

    Resumable: a file an earlier, killed attempt moved is left where it is; a file in
    neither place (deleted by hand), or missing from a folder moved whole, is a CommitError once
    the others moved, and nothing is committed.

    Raises:
        CommitError: A staged file is in neither the backfill's data folder nor the table's layout.
    """
    staged = listed.staged
    fs, data = data_folder(staged.table_uri, staged.backfill_id)
    _, root = table_filesystem(staged.table_uri)
    moved = _move_whole_folders(fs, listed, data, root) if isinstance(fs, pafs.LocalFileSystem) else frozenset()
    looked_for = []  # files to find in the table's layout: moved with their folder, or not found to move
    for file in staged.files:
        if _folder(file.path) not in moved and file.path not in listed.outside_data:
            try:
                move_file(fs, f"{data}/{file.path}", f"{root}/{file.path}")
            except FileNotFoundError:
                pass  # gone since the listing: moved meanwhile, or deleted (told apart below)
            else:
                failpoint("publish_moving")
                continue
        looked_for.append(file.path)
    found = fs.get_file_info([f"{root}/{path}" for path in looked_for])  # one call: a stat each
    missing = [path for path, info in zip(looked_for, found, strict=True) if info.type != pafs.FileType.File]
    if missing:
        raise CommitError(
            f"staged file {missing[0]} of backfill {staged.backfill_id} is missing from "
            f"{data} and from table {staged.table_uri} (deleted by hand, or by a vacuum after a "
            "publish killed before its commit); nothing was committed. Discard the backfill "
            f"(`partition-assets backfill discard {staged.backfill_id}`) and run it again."
        )


def _move_whole_folders(fs: pafs.FileSystem, listed: ListedStaging, data: str, root: str) -> frozenset[str]:
    """Moves each of `listed.whole_folders` from `data` into the table's layout at `root` where the
    table has no such folder (a rename fails on a folder with files: those are moved file by file);
    returns the folders moved."""
    moved = set()
    parents = {""}  # the folders of the layout made (or found) so far, relative to `root`
    for folder in sorted(listed.whole_folders):
        if (parent := _folder(folder)) not in parents:
            fs.create_dir(f"{root}/{parent}", recursive=True)
            parents.add(parent)
        try:
            fs.move(f"{data}/{folder}", f"{root}/{folder}")
        except OSError:
            continue  # the table has the folder (or it is gone since the listing): file by file
        moved.add(folder)
        failpoint("publish_moving")
    return frozenset(moved)


def delete_backfill(table_uri: str, backfill_id: str) -> int:
    """Deletes the backfill's folder (staged files and manifests); returns the number of
    data files deleted. Idempotent.

    Raises:
        BackfillIdError: `backfill_id` cannot name a folder; nothing was deleted.
    """
    fs, folder = backfill_folder(table_uri, backfill_id)
    if fs.get_file_info(folder).type == pafs.FileType.NotFound:
        return 0
    deleted = sum(
        1
        for info in fs.get_file_info(pafs.FileSelector(folder, recursive=True))
        if info.type == pafs.FileType.File and info.base_name.endswith(".parquet")
    )
    delete_dir(fs, folder)
    return deleted


def delete_published_backfill(table_uri: str, backfill_id: str) -> None:
    """After the backfill's publish commit: its manifests deleted now, so that nothing reads
    the table's staging from here on, then the rest of its folder (its partitions' folders,
    which the publish emptied, and files a retried node's staging superseded) by a thread of
    this process. Each partition's folder costs a `rmdir`, which frees a block and, on a disk
    mounted with `discard`, waits for it: 1.4-2.2 ms each on this project's machine, 15-17 s
    for the 8,765 folders of a year of hourly partitions, which readers and the publish need
    not wait for.

    Not guaranteed: the folder is gone when this returns (a process that exits first leaves
    the rest of it; vacuum deletes a backfill folder without manifests once it is older than
    the retention: `stale_backfill_folders`).

    Raises:
        BackfillIdError: `backfill_id` cannot name a folder; nothing was deleted.
    """
    fs, folder = backfill_folder(table_uri, backfill_id)
    delete_dir(fs, f"{folder}/manifest")
    threading.Thread(target=delete_dir, args=(fs, folder), name=f"delete {folder}", daemon=True).start()


def backfill_ids(table_uri: str) -> list[str]:
    """The backfills with a folder under the table (a folder whose name no backfill id can
    have, made by hand, is not one: it is left alone)."""
    fs, root = table_filesystem(table_uri)
    parent = f"{root}/{BACKFILLS_DIR}"
    if fs.get_file_info(parent).type != pafs.FileType.Directory:
        return []
    return sorted(
        info.base_name
        for info in fs.get_file_info(pafs.FileSelector(parent))
        if info.type == pafs.FileType.Directory and is_backfill_id(info.base_name)
    )


def has_manifest(table_uri: str, backfill_id: str) -> bool:
    """Whether the backfill recorded a staging of the table (a manifest).

    Raises:
        BackfillIdError: `backfill_id` cannot name a folder.
    """
    fs, folder = backfill_folder(table_uri, backfill_id)
    return bool(_manifest_names(fs, f"{folder}/manifest"))


def listed_layout_paths(table_uri: str) -> set[str]:
    """The table-relative paths of every file any backfill's manifest lists: where a
    publish moves them, so a vacuum must spare them while the manifest lives."""
    paths: set[str] = set()
    for backfill_id in backfill_ids(table_uri):
        fs, folder = backfill_folder(table_uri, backfill_id)
        manifests = f"{folder}/manifest"
        for name in _manifest_names(fs, manifests):
            paths.update(raw["path"] for raw in _read_entry(fs, f"{manifests}/{name}")["files"])
    return paths


def stale_backfill_folders(table_uri: str, retention_hours: float) -> list[str]:
    """Backfill folders without a manifest, older than the retention: stagings killed
    before recording one, or discards killed part-way. Younger ones may be in flight; a
    folder no backfill id can name (made by hand) is no backfill's and is left alone."""
    fs, root = table_filesystem(table_uri)
    return [
        folder
        for folder in stale_folders(fs, f"{root}/{BACKFILLS_DIR}", retention_hours)
        if (name := folder.rsplit("/", 1)[1]) and is_backfill_id(name) and not has_manifest(table_uri, name)
    ]


def _manifest_names(fs: pafs.FileSystem, manifests: str) -> list[str]:
    if fs.get_file_info(manifests).type != pafs.FileType.Directory:
        return []
    return [
        info.base_name
        for info in fs.get_file_info(pafs.FileSelector(manifests))
        if info.type == pafs.FileType.File and info.base_name.endswith(".json") and not info.base_name.startswith(".")
    ]


def _sequence(manifest_name: str) -> int:
    return int(manifest_name.split("-", 1)[0])


def _read_entry(fs: pafs.FileSystem, path: str) -> dict:
    """The manifest at `path`, when in a format this release reads: a vacuum never misreads
    the files a newer one lists, nor a publish what it staged.

    Raises:
        StateFormatError: A newer release wrote the manifest, in a format this one does not read.
    """
    with fs.open_input_stream(path) as handle:
        entry = json.loads(handle.read())
    checked_format(entry, MANIFEST_FORMAT, f"the staging manifest {path}")
    return entry
