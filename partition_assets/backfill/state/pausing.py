"""Pausing a backfill: `pause` stops its launches, `unpause` restarts them.

Both are guarded status changes (backfill/state/status.py: the `pause` and `unpause`
commands), made by one compare-and-set in the instance's storage, from any process or
host: the CLI, the Launchpad job (automation/pause_job.py). A paused backfill's
coordinator keeps running and launches nothing; its runs in flight finish
(backfill/running/claims.py reads the status at least every second).

Not guaranteed: a paused backfill whose coordinator dies is not taken over
(automation/takeover_sensor.py takes over running ones); `backfill resume` runs it on, unpaused.
"""

from partition_assets.backfill.model import BackfillCommand, BackfillStatus
from partition_assets.backfill.state.status import check_command
from partition_assets.backfill.state.store import BackfillStore


def pause(store: BackfillStore, backfill_id: str) -> None:
    """Pauses backfill `backfill_id` (pausing a paused one does nothing more).

    Raises:
        IllegalTransitionError: It is not running (finished, canceled, publishing, ...); nothing was written.
        UnknownBackfillError: No record of `backfill_id`.
    """
    _command(store, backfill_id, BackfillCommand.PAUSE, BackfillStatus.PAUSED)


def unpause(store: BackfillStore, backfill_id: str) -> None:
    """Lets the paused backfill `backfill_id` launch its nodes again.

    Raises:
        IllegalTransitionError: It is not paused; nothing was written.
        UnknownBackfillError: No record of `backfill_id`.
    """
    _command(store, backfill_id, BackfillCommand.UNPAUSE, BackfillStatus.RUNNING)


def _command(store: BackfillStore, backfill_id: str, command: BackfillCommand, target: BackfillStatus) -> None:
    check_command(backfill_id, store.status(backfill_id), command)
    store.transition(backfill_id, target, command)
