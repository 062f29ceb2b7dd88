"""The format versions of the state that one process writes and another reads, possibly a
process of another release of partition_assets (a deployment upgraded host by host, a
backfill that meets a deploy of the product, a downgrade): one table of every such kind
(`VERSIONED_STATE`) and one check (`checked_format`).

Each kind carries its format: a JSON document as an integer field (`format`), a Delta table as
the table property `partition_assets.format`, a database table as its own version row. One
without it was written before formats were versioned and is format 1, read as it always was.
A release writes its own format and reads every older one; a newer one (written by a newer
release: a host not yet upgraded, or a downgrade) is refused with StateFormatError naming what
it is, the format found and those this release reads, the fix, and that nothing was written;
it is never misread: a newer announcement is never taken for "no coordinator", a newer lease
never for no lease.

State outside the table is no format of ours or holds no structure to change: Dagster's own
runs and events; a backfill's lease secret and its node runs' bindings (dagster_instance/
lease_proof.py: one text value per key), the freeze lists (backfill/publishing/freeze.py: a
JSON list of names), the tables' data and Delta logs. A change of one of these takes a new key
or a new kind, not a new shape under the old key: an older release would misread it.

Not guaranteed: releases before formats were versioned do not check the field: they read a
newer document's fields as they know them (docs/guide/upgrading.md says what each does).
"""

from __future__ import annotations

from collections.abc import Mapping

from partition_assets.errors import StateFormatError

FORMAT_FIELD = "format"
# The Delta table property holding the format of a table of ours (the ledger, the release log).
TABLE_FORMAT_PROPERTY = "partition_assets.format"

# The format this release writes of each kind (and the newest it reads). Format 2 of a kind
# that was unversioned is its format 1 with the format added.
# A kind whose fields gain a meaning that an older release would ignore (and so act wrongly
# on) takes the next format, so that the older release refuses it: a downgrade is refused.
# Record format 3 adds `publish_stage` (where a publish is): a release of format 2 would
# publish again from the first stage (partition_assets_tests/e2e/test_upgrade_mid_backfill.py).
# Record format 4 stores `skipped` (--catch-up's current partitions) as runs of the stored plan's
# partitions (backfill/state/skipped_ranges.py): a release of format 3 would read the runs as keys.
RECORD_FORMAT = 4  # a backfill's record body (backfill/state/record.py)
PRESENCE_FORMAT = 2  # a coordinator's announcement (backfill/state/presence.py)
LEASE_FORMAT = 2  # a lease file (storage/leases.py)
LEDGER_FORMAT = 2  # the ledger, a Delta table (backfill/state/ledger.py)
RELEASE_LOG_FORMAT = 2  # the release log, a Delta table (storage/release_log.py)
MANIFEST_FORMAT = 2  # a staging manifest (storage/backfill_staging.py)
FINGERPRINT_FORMAT = 2  # a staging's fingerprint the gate recorded (storage/backfill_staging.py)
STORED_PLAN_FORMAT = 1  # a record's stored plan (backfill/state/stored_plan.py): versioned from the start
PROVENANCE_INDEX_FORMAT = 1  # the provenance index (dagster_instance/provenance_index.py): from the start
BACKFILL_TABLES_FORMAT = 1  # the instance's backfill tables' schema (backfill/state/store.py): from the start
SPARK_PID_FORMAT = 2  # the pid file of a local Spark Connect server (spark/connect_server.py)
SPARK_IDENTITY_FORMAT = 2  # the identity file of a local Spark Connect server (spark/connect_server.py)
DEPLOY_RECORD_FORMAT = 2  # a deploy's record, .deploys/<sha12>.json (deploy/deployments.py)

# Every kind of state other processes read, and where it lives: each carries its format.
VERSIONED_STATE: Mapping[str, int] = {
    "backfill record": RECORD_FORMAT,
    "coordinator announcement": PRESENCE_FORMAT,
    "lease": LEASE_FORMAT,
    "ledger": LEDGER_FORMAT,
    "release log": RELEASE_LOG_FORMAT,
    "staging manifest": MANIFEST_FORMAT,
    "staging fingerprint": FINGERPRINT_FORMAT,
    "stored plan": STORED_PLAN_FORMAT,
    "provenance index": PROVENANCE_INDEX_FORMAT,
    "backfill tables": BACKFILL_TABLES_FORMAT,
    "spark server pid file": SPARK_PID_FORMAT,
    "spark server identity": SPARK_IDENTITY_FORMAT,
    "deploy record": DEPLOY_RECORD_FORMAT,
}


def checked_format(saved: Mapping, reads: int, what: str) -> int:
    """The format `saved` was written in (1 when it names none), when this release reads it.

    Args:
        reads: The newest format of `saved`'s kind this release reads.
        what: What `saved` is, as the refusal names it (e.g. "the record of backfill b1").

    Raises:
        StateFormatError: `saved` is in a format newer than `reads` (or not a format at all); nothing was written.
    """
    return checked_version(saved.get(FORMAT_FIELD, 1), reads, what)


def checked_table_format(properties: Mapping[str, str | None], reads: int, what: str) -> int:
    """`checked_format` of a Delta table of ours, from its table `properties` (its configuration).

    Raises:
        StateFormatError: The table is in a format newer than `reads`; nothing was written.
    """
    found = properties.get(TABLE_FORMAT_PROPERTY)
    return checked_version(1 if found is None else int(found) if found.isdigit() else found, reads, what)


def table_format_properties(format_: int) -> dict[str, str]:
    """The table properties that give a Delta table of ours its format, set as it is created."""
    return {TABLE_FORMAT_PROPERTY: str(format_)}


def checked_version(
    found: object, reads: int, what: str, error: type[StateFormatError] = StateFormatError, otherwise: str = ""
) -> int:
    """`found`, a format of `what` this release reads (1 to `reads`); else `error`, saying so.

    Args:
        otherwise: Another way out, after the upgrade the refusal names (", or ...").

    Raises:
        StateFormatError: `found` is newer than `reads`, or not a format at all; nothing was written.
    """
    if isinstance(found, int) and not isinstance(found, bool) and 1 <= found <= reads:
        return found
    readable = "format 1" if reads == 1 else f"formats 1 to {reads}"
    raise error(
        f"{what} is in format {found!r}, which this release of partition_assets cannot read (it reads {readable}): "
        f"a newer release wrote it. Upgrade partition_assets on this host to the release the deployment runs"
        f"{otherwise}, then run the command again. Nothing was written."
    )
