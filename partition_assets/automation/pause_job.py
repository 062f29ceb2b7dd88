"""Pausing and unpausing a backfill from the Launchpad: the job `pause_backfill`.

Its one op takes `{backfill_id, action: pause | unpause}` and calls the same command as
`partition-assets backfill pause|unpause <id>` (backfill/commands/: `pause_backfill`,
`unpause_backfill`), in the instance the run executes in. A refused change (pausing a finished backfill,
unpausing a running one, an unknown id) fails the run with the refusal's message, and
nothing is written.

Not guaranteed: the backfill's coordinator sees the change at its next decision (within a
second or so); a run launched after the backfill finished finds it final and fails.
"""

from enum import StrEnum

import dagster as dg

from partition_assets.backfill.commands import pause_backfill, unpause_backfill
from partition_assets.errors import PartitionAssetsError
from partition_assets.ids import checked_backfill_id

PAUSE_OP = "pause_or_unpause_backfill"


class PauseAction(StrEnum):
    """What the job does to the backfill: its config's `action`. Members are named as their
    words, which Dagster's config takes (a run config written as `action: pause` loads)."""

    pause = "pause"
    unpause = "unpause"


_COMMANDS = {PauseAction.pause: pause_backfill, PauseAction.unpause: unpause_backfill}


class PauseBackfillConfig(dg.Config):
    """Which backfill, and whether to pause or unpause it."""

    backfill_id: str
    action: PauseAction = PauseAction.pause


def pause_backfill_job(name: str = "pause_backfill") -> dg.JobDefinition:
    """A job whose run pauses or unpauses one recorded backfill of the instance."""

    @dg.op(name=PAUSE_OP)
    def pause_or_unpause(context: dg.OpExecutionContext, config: PauseBackfillConfig) -> None:
        try:
            backfill_id = checked_backfill_id(config.backfill_id, "the backfill_id config")
            _COMMANDS[config.action](context.instance, backfill_id)
        except PartitionAssetsError as error:
            raise dg.Failure(description=str(error)) from None
        context.log.info(f"backfill {backfill_id} {config.action}d")

    @dg.job(
        name=name,
        executor_def=dg.in_process_executor,
        description="Pause (stop launching; runs in flight finish) or unpause an engine backfill: "
        "config {backfill_id, action: pause | unpause}.",
    )
    def pause_job():
        pause_or_unpause()

    return pause_job


def pause_run_config(backfill_id: str, action: PauseAction = PauseAction.pause) -> dict:
    """Run config for the job: pause or unpause `backfill_id`."""
    return {"ops": {PAUSE_OP: {"config": {"backfill_id": backfill_id, "action": PauseAction(action).value}}}}
