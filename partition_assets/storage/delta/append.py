"""Appending rows to a small append-only Delta table that several processes write (the
backfill ledger, the release log): one commit per append, created by the first; and
compacting such a table's files into one, in one guarded commit.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import AddAction, RemoveAction

from partition_assets.errors import CommitError
from partition_assets.storage.delta.log import files_by_partition

_COMMIT_ATTEMPTS = 20


def append_rows(
    uri: str,
    data: pa.Table,
    what: str,
    partition_by: list[str] | None = None,
    commit_metadata: Mapping[str, str] | None = None,
    properties: Mapping[str, str] | None = None,
) -> None:
    """Adds `data` to the table at `uri` in one Delta commit (the table, `delta.appendOnly`,
    is created by the first, which then gives it the table `properties`: delta-rs creates a
    table with Delta's own properties only); concurrent appends (other threads or processes)
    all land. A process killed between the two commits leaves a table without `properties`.

    Raises:
        CommitError: The append lost to concurrent writers 20 times, or the storage refused it
            (a full disk, a folder that cannot be written); nothing of `data` was recorded
            (`what` names the table in the message).
    """
    commit = CommitProperties(custom_metadata=dict(commit_metadata)) if commit_metadata else None
    for attempt in range(1, _COMMIT_ATTEMPTS + 1):
        existed = DeltaTable.is_deltatable(uri)
        try:
            write_deltalake(
                uri,
                data,
                mode="append",
                partition_by=partition_by,
                configuration=None if existed else {"delta.appendOnly": "true"},
                # Tables written before a column was added take it on (older rows read null).
                schema_mode="merge" if existed else None,
                commit_properties=commit,
            )
        except CommitFailedError:
            pass  # delta-rs retried appends on top of concurrent ones and still lost
        except DeltaError as error:
            # Two first appends race to create the table; the loser appends to it next.
            if existed or not DeltaTable.is_deltatable(uri):
                raise CommitError(
                    f"the append to {what} {uri} failed ({' '.join(str(error).split())}); nothing of these "
                    "entries was recorded. Fix what the error names (a full disk, a folder that cannot be "
                    "written), then run the command again."
                ) from None
        else:
            if properties and not existed:
                _give_properties(uri, properties)
            return
        time.sleep(random.uniform(0.01, 0.05) * attempt)
    raise CommitError(
        f"{_COMMIT_ATTEMPTS} appends to {what} {uri} lost to concurrent writers; nothing of "
        "these entries was recorded. Record them again."
    )


def compact_when_fragmented(uri: str, max_files: int, key: Sequence[str]) -> bool:
    """Compacts the append-only table at `uri` (`compact_once`) once it holds more than
    `max_files` files; whether this call committed a compaction."""
    table = DeltaTable(uri)
    return len(table.file_uris()) > max_files and compact_once(table, key)


def _give_properties(uri: str, properties: Mapping[str, str]) -> None:
    """Sets the table properties of the table at `uri`, in a commit of its own that concurrent
    appends may make it retry (never appending again: the data landed)."""
    for attempt in range(1, _COMMIT_ATTEMPTS + 1):
        try:
            DeltaTable(uri).alter.set_table_properties(dict(properties), raise_if_not_exists=False)
            return
        except CommitFailedError:
            time.sleep(random.uniform(0.01, 0.05) * attempt)


def compact_once(table: DeltaTable, key: Sequence[str]) -> bool:
    """Rewrites the files of the unpartitioned append-only `table`, as opened, into one holding
    its rows, one per value of the columns `key` (a record written twice keeps one row): one
    commit that lands only on the version `table` is at, so of concurrent compactions (or a
    compaction and an append) exactly one commits and the others change nothing. Returns
    whether this one committed; a losing one deletes the file it wrote.

    delta-rs's own `optimize.compact` does not guard this way: concurrent compactions all commit,
    each adding a copy of every row (measured: 120 rows for 30 records with 4 processes)."""
    # One thread: a threaded delta-rs scan aborts the process at exit (see backfill/state/ledger.py).
    rows = table.to_pyarrow_dataset().to_table(use_threads=False)
    unique = {tuple(row[column] for column in key): row for row in rows.to_pylist()}
    data = pa.Table.from_pylist(list(unique.values()), schema=rows.schema)
    fs, root = pafs.FileSystem.from_uri(table.table_uri.rstrip("/"))
    path = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    pq.write_table(data, f"{root}/{path}", filesystem=fs)
    now_ms = int(time.time() * 1000)  # file metadata Delta requires, not asset logic
    add = AddAction(
        path=path,
        size=fs.get_file_info(f"{root}/{path}").size,
        partition_values={},
        modification_time=now_ms,
        data_change=False,  # the same rows: allowed on an append-only table
        stats=json.dumps({"numRecords": data.num_rows}),
    )
    removes = [
        RemoveAction(path=file.path, data_change=False, deletion_timestamp=now_ms, size=file.size, partition_values={})
        for files in files_by_partition(table).values()
        for file in files
    ]
    try:
        table.create_write_transaction(
            [add, *removes],
            mode="append",
            schema=table.schema(),
            # No retry on top of a concurrent commit: its rows are not in `data`, or it compacted too.
            commit_properties=CommitProperties(max_commit_retries=0),
        )
    except CommitFailedError:
        fs.delete_file(f"{root}/{path}")
        return False
    return True
