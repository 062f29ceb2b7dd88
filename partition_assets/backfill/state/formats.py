"""The format versions of the backfill state other processes read: a backfill's record body
(backfill/state/record.py) and its coordinator's announcement (backfill/state/presence.py).

Each carries its format as an integer field (`format`); one without it was written before
formats were versioned and is format 1, read as it always was. A release writes its own
format and reads every older one; a newer one (written by a newer release: a host not yet
upgraded, or a downgrade) is refused with StateFormatError, never misread: a newer
announcement is never taken for "no coordinator".

Not guaranteed: releases before formats were versioned do not check the field: they read a
newer record's fields as they know them, and fail on a newer announcement with a TypeError
rather than this message (docs/guide/upgrading.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from partition_assets.errors import StateFormatError

FORMAT_FIELD = "format"
# The formats this release writes (and the newest it reads).
RECORD_FORMAT = 2
PRESENCE_FORMAT = 2


def checked_format(saved: Mapping, reads: int, what: str) -> int:
    """The format `saved` was written in (1 when it names none), when this release reads it.

    Args:
        reads: The newest format of `saved`'s kind this release reads.
        what: What `saved` is, as the refusal names it (e.g. "the record of backfill b1").

    Raises:
        StateFormatError: `saved` is in a format newer than `reads` (or not a format at all); nothing was written.
    """
    found = saved.get(FORMAT_FIELD, 1)
    if isinstance(found, int) and not isinstance(found, bool) and 1 <= found <= reads:
        return found
    raise StateFormatError(
        f"{what} is in format {found!r}, which this release of partition_assets cannot read (it reads formats 1 "
        f"to {reads}): a newer release wrote it. Upgrade partition_assets on this host to the release the "
        "deployment runs, then run the command again. Nothing was written."
    )
