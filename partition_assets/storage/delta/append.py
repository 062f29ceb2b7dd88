"""Appending rows to a small append-only Delta table that several processes write (the
backfill ledger, the release log): one commit per append, created by the first.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError

from partition_assets.errors import CommitError

_COMMIT_ATTEMPTS = 20


def append_rows(
    uri: str,
    data: pa.Table,
    what: str,
    partition_by: list[str] | None = None,
    commit_metadata: Mapping[str, str] | None = None,
) -> None:
    """Adds `data` to the table at `uri` in one Delta commit (the table, `delta.appendOnly`,
    is created by the first); concurrent appends (other threads or processes) all land.

    Raises:
        CommitError: The append lost to concurrent writers 20 times, or the storage refused it
            (a full disk, a folder that cannot be written); nothing of `data` was recorded
            (`what` names the table in the message).
    """
    properties = CommitProperties(custom_metadata=dict(commit_metadata)) if commit_metadata else None
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
                commit_properties=properties,
            )
            return
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
        time.sleep(random.uniform(0.01, 0.05) * attempt)
    raise CommitError(
        f"{_COMMIT_ATTEMPTS} appends to {what} {uri} lost to concurrent writers; nothing of "
        "these entries was recorded. Record them again."
    )
