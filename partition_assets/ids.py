"""Backfill ids: the one check every id passes before it names a file or folder.

A backfill id becomes part of paths (its record, its coordinator's log, its staging
folder under each table), so an id from any surface (the CLI, a run tag set in the
Launchpad, a Dagster backfill adopted from the webserver, stdin of the standby
coordinator) is checked here, against one pattern, before anything is written.
"""

import re

from partition_assets.errors import BackfillIdError

# Letters, digits and `_ . = -`, starting with a letter or digit: no `/`, no `..` path
# component, never absolute, and the same name on every filesystem and object store.
_BACKFILL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.=-]{0,127}")


def is_backfill_id(name: str) -> bool:
    """Whether `name` can be a backfill id (see `checked_backfill_id`)."""
    return bool(_BACKFILL_ID.fullmatch(name)) and ".." not in name


def checked_backfill_id(backfill_id: str, source: str = "backfill id") -> str:
    """`backfill_id` when it is safe as a file or folder name; else BackfillIdError naming
    `source` (where the id came from, e.g. "the run tag partition_assets/backfill_id")."""
    if not isinstance(backfill_id, str) or not is_backfill_id(backfill_id):
        raise BackfillIdError(
            f"{source} {backfill_id!r} cannot name a backfill: use 1 to 128 letters, digits, '_', '.', '=' "
            "and '-', starting with a letter or digit, with no '..' (ids become file and folder names). "
            "Nothing was written."
        )
    return backfill_id
