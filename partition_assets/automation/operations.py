"""The commands on a recorded backfill as Dagster jobs, launched from the Launchpad with
the backfill id in their config: the safe-backfill workflow without a shell.

| job | its config | the command it runs |
| --- | --- | --- |
| `backfill_approve` | backfill_id, approver, force | `backfill approve <id> --by NAME [--force]` |
| `backfill_publish` | backfill_id, force | `backfill publish <id> [--force]` |
| `backfill_discard` | backfill_id | `backfill discard <id>` |
| `backfill_rollback` | backfill_id, force | `backfill rollback <id> [--force]` |
| `backfill_resume` | backfill_id | `backfill resume <id>` |
| `backfill_retry` | backfill_id | `backfill retry <id>` |
| `backfill_extend` | backfill_id, start, end | `backfill extend <id> [--start DATE] [--end DATE]` |

Each op calls the command's own function (backfill/commands/) in the run's process on the
run's instance, so it writes the same records, ledger rows and status transitions, and
refuses the same inputs with the same message: the run fails with it (shown in its log and
as its failure), nothing written. What the command reports goes to the run's log, line by
line. A run whose backfill id is valid is tagged with it, so the backfill's runs list it.

Not guaranteed: the run's process must reach the backfill's lake and Spark, as any run of
the code location does; `backfill_resume` and `backfill_retry` run the remaining nodes in
that process's workers (as the command does), for as long as they take.
"""

from collections.abc import Callable
from typing import Any, cast

import dagster as dg
from pydantic import Field

from partition_assets.backfill.commands import (
    Console,
    Discarded,
    Extended,
    Published,
    RollbackRequested,
    RunOutcome,
    approve_backfill,
    discard_backfill,
    extend_backfill,
    publish_backfill,
    resume_backfill,
    retry_backfill,
    rollback_backfill,
)
from partition_assets.backfill.model import BackfillCommand
from partition_assets.backfill.running.progress import Tally
from partition_assets.backfill.state.approval import DAGSTER_USER_TAG
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.errors import PartitionAssetsError
from partition_assets.ids import checked_backfill_id
from partition_assets.run_tags import BACKFILL_ID_TAG


class BackfillIdConfig(dg.Config):
    backfill_id: str = Field(description="the backfill's id, as `partition-assets backfill status` and its runs show")


class ForceConfig(BackfillIdConfig):
    force: bool = Field(default=False, description="as the command's --force")


class ExtendConfig(BackfillIdConfig):
    start: str | None = Field(default=None, description="the new first day or time (the command's --start)")
    end: str | None = Field(default=None, description="the new last day or time (the command's --end)")


class ApproveConfig(ForceConfig):
    approver: str = Field(description="who approves: the ledger records the name (the command's --by)")


# What an operation returns: the result of the command it calls.
OperationResult = Published | Discarded | RunOutcome | RollbackRequested | Extended
# A command called with the run's context, its config and the console of the run's log.
Operation = Callable[[dg.OpExecutionContext, Any, Console], OperationResult]

# job name -> (the command, its config class, the call of its function with the config)
_OPERATIONS: dict[str, tuple[BackfillCommand, type[BackfillIdConfig], Operation]] = {
    "backfill_approve": (
        BackfillCommand.APPROVE,
        ApproveConfig,
        lambda context, c, console: approve_backfill(
            # The Dagster user the run carries, where the instance knows one: an approval is theirs.
            context.instance,
            c.backfill_id,
            c.approver,
            c.force,
            context.run.tags.get(DAGSTER_USER_TAG),
        ),
    ),
    "backfill_publish": (
        BackfillCommand.PUBLISH,
        ForceConfig,
        lambda context, c, console: publish_backfill(context.instance, c.backfill_id, c.force),
    ),
    "backfill_discard": (
        BackfillCommand.DISCARD,
        BackfillIdConfig,
        lambda context, c, console: discard_backfill(context.instance, c.backfill_id),
    ),
    "backfill_rollback": (
        BackfillCommand.ROLLBACK,
        ForceConfig,
        lambda context, c, console: rollback_backfill(
            context.instance, c.backfill_id, c.force, requested_by=context.run.tags.get(DAGSTER_USER_TAG)
        ),
    ),
    "backfill_resume": (
        BackfillCommand.RESUME,
        BackfillIdConfig,
        lambda context, c, console: resume_backfill(context.instance, c.backfill_id, console),
    ),
    "backfill_retry": (
        BackfillCommand.RETRY,
        BackfillIdConfig,
        lambda context, c, console: retry_backfill(context.instance, c.backfill_id, console),
    ),
    "backfill_extend": (
        BackfillCommand.EXTEND,
        ExtendConfig,
        lambda context, c, console: extend_backfill(context.instance, c.backfill_id, c.start, c.end),
    ),
}
OPERATION_JOBS = tuple(_OPERATIONS)


def backfill_operation_jobs() -> list[dg.JobDefinition]:
    """One job per command on a recorded backfill (see the module docstring); add them to
    the code location's Definitions' jobs."""
    return [_operation_job(name, *how) for name, how in _OPERATIONS.items()]


def _operation_job(
    name: str, action: BackfillCommand, config_class: type[BackfillIdConfig], operation: Operation
) -> dg.JobDefinition:
    @dg.op(name=f"{name}_op")
    # Dagster reads the config schema from the annotation; mypy cannot see a class chosen at run time.
    def operation_op(context: dg.OpExecutionContext, config: config_class) -> None:  # type: ignore[valid-type]
        run_operation(context, cast(BackfillIdConfig, config), operation)

    @dg.job(
        name=name,
        executor_def=dg.in_process_executor,
        description=f"`partition-assets backfill {action} <id>` from the Launchpad: give the backfill id in config.",
    )
    def operation_job():
        operation_op()

    return operation_job


def run_operation(context: dg.OpExecutionContext, config: BackfillIdConfig, operation: Operation) -> None:
    """Calls `operation` on the backfill `config` names, on the run's instance; what it
    reports and its result's message go to the run's log.

    Raises:
        dg.Failure: The command refused or did not succeed; its message is the failure's description.
    """
    backfill_id = config.backfill_id
    console = RunLogConsole(context.log.info)
    try:
        checked_backfill_id(backfill_id, "the config's backfill_id")
        BackfillStore(context.instance).load(backfill_id)  # an unknown id is refused before the run is tagged
        context.instance.add_run_tags(context.run_id, {BACKFILL_ID_TAG: backfill_id})
        result = operation(context, config, console)
    except PartitionAssetsError as error:
        raise dg.Failure(description=str(error), metadata={"backfill_id": backfill_id}) from None
    console.line(result.message)
    if isinstance(result, RunOutcome) and not result.succeeded:
        raise dg.Failure(description=result.message, metadata={"backfill_id": backfill_id})


class RunLogConsole:
    """A console that sends each non-blank line of what it is shown to a run's `log`."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self._log = log

    def line(self, text: str) -> None:
        for line in text.splitlines():
            if line.strip():
                self._log(line)

    def node(self, text: str, tally: Tally) -> None:
        self.line(text)
