"""Named points of the write path where a crash can be injected, to prove crash safety.

Setting PARTITION_ASSETS_FAILPOINT=<name> makes the writing process SIGKILL itself
when it reaches that point: no `finally`, no cleanup, like a lost machine.
PARTITION_ASSETS_FAILPOINT=<name>:raise raises `InjectedFailure` there instead: an
unexpected error (a bug, a lost connection) that every `finally` and handler sees.
PARTITION_ASSETS_FAILPOINT=<name>:hold=<path> holds the process there until the file <path>
exists (at most HOLD_LIMIT seconds, then InjectedFailure), after creating `<path>.held`: a
test sees what readers see meanwhile, and lets it go on.
"""

import os
import signal
import time
from pathlib import Path

ENV = "PARTITION_ASSETS_FAILPOINT"

# Points a plain `write` passes.
WRITE_POINTS = (
    "staged",  # Spark has written the files into the staging folder
    "publishing",  # the first staged file has moved into the table's layout
    "published",  # every file is in the layout; nothing committed
    "committing",  # the commit's actions are built; the log is untouched
    "committed",  # the commit is in the log; the run has not recorded it
)
# Points `publish_staged` of a backfill passes.
PUBLISH_POINTS = (
    "publish_moving",  # the first of a backfill's staged files has moved into the table's layout
    "publish_committing",  # every staged file is in the layout; the log is untouched
    "publish_committed",  # the publish commit is in the log; the backfill's folder is not cleaned up
)
# Points the coordinator of a staged backfill passes (backfill/publishing/gate_step.py, publish_step.py,
# undo_steps.py, publication.py, dagster_events.py).
COORDINATOR_POINTS = (
    "gating",  # every node succeeded; the gate's stats are being computed
    "between_table_commits",  # one table of the backfill is published, the next is not
    "between_rollback_commits",  # one table is rolled back, the next is not
    "retract_wiping",  # a retract's tables are committed; Dagster still shows its partitions materialized
    # The publish's Dagster run is STARTED, none of its events stored (each run dagster_events.py
    # `run_reporting` makes passes `<its job's name>_started`: the gate's, the rollback's...).
    "partition_assets_publish_started",
)
# Points at the start of each publishing stage (backfill/publishing/stages.py `PUBLISH_STAGES`,
# whose runner passes `stage_<name>`): a test kills the publish in any stage.
STAGE_POINTS = (
    "stage_gate",  # every node succeeded or was skipped; the gate is not evaluated
    "stage_approval",  # the gate passed; whether it waits for approval is not decided
    "stage_commit_tables",  # no table is committed (a resumed publish: some may be)
    "stage_release",  # every table is committed; the release log has not released them
    "stage_dagster_records",  # released; Dagster has not recorded the materializations
    "stage_ledger",  # Dagster recorded them; the ledger's `published` rows are not written
    "stage_notify",  # the ledger says published; the notification hook has not heard it
    "stage_published",  # notified; the status is not `published`, the leases held
)
POINTS = WRITE_POINTS + PUBLISH_POINTS + COORDINATOR_POINTS + STAGE_POINTS


# The suffix of PARTITION_ASSETS_FAILPOINT that raises rather than kills.
RAISE = ":raise"
# The suffix that holds the process until a file exists, and how long at most.
HOLD = ":hold="
HOLD_LIMIT = 120.0


class InjectedFailure(RuntimeError):
    """The unexpected error a failpoint set to `<name>:raise` raises: no error the code expects."""


def failpoint(name: str) -> None:
    """At the point `name` (one of POINTS): SIGKILLs this process when PARTITION_ASSETS_FAILPOINT
    names it, raises InjectedFailure when it names it followed by `:raise`, waits for a file
    when followed by `:hold=<path>`; else nothing."""
    chosen = os.environ.get(ENV)
    if chosen == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if chosen == f"{name}{RAISE}":
        raise InjectedFailure(f"failpoint {name}: an error injected by {ENV}={chosen}")
    if chosen is not None and chosen.startswith(f"{name}{HOLD}"):
        _hold(Path(chosen.removeprefix(f"{name}{HOLD}")))


def _hold(until: Path) -> None:
    Path(f"{until}.held").touch()
    deadline = time.monotonic() + HOLD_LIMIT
    while not until.exists():
        if time.monotonic() > deadline:
            raise InjectedFailure(f"failpoint held {HOLD_LIMIT} s and {until} was not created")
        time.sleep(0.02)
