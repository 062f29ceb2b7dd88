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

Each op runs the command line's own function (`act_on_record` in cli/backfill.py) in the
run's process on the run's instance, so it writes the same records, ledger rows and status
transitions, and refuses the same inputs with the same message: the run fails with it
(shown in its log and as its failure), nothing written. What the command prints goes to
the run's log, line by line. A run whose backfill id is valid is tagged with it, so the
backfill's runs list it.

Not guaranteed: the run's process must reach the backfill's lake and Spark, as any run of
the code location does; `backfill_resume` and `backfill_retry` run the remaining nodes in
that process's workers (as the command does), for as long as they take.
"""

import argparse
import io
from collections.abc import Callable
from contextlib import redirect_stdout
from typing import Any, cast

import dagster as dg
from pydantic import Field

from partition_assets.backfill.state.approval import DAGSTER_USER_TAG
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.cli.backfill import act_on_record
from partition_assets.errors import PartitionAssetsError
from partition_assets.ids import checked_backfill_id
from partition_assets.run_tags import BACKFILL_ID_TAG


class BackfillIdConfig(dg.Config):
    backfill_id: str = Field(description="the backfill's id, as `partition-assets backfill status` and its runs show")


class ForceConfig(BackfillIdConfig):
    force: bool = Field(default=False, description="as the command's --force")


class ApproveConfig(ForceConfig):
    approver: str = Field(description="who approves: the ledger records the name (the command's --by)")


# job name -> (the command, its config class, the command's options from the config)
_OPERATIONS: dict[str, tuple[str, type[BackfillIdConfig], Callable[[Any], dict[str, object]]]] = {
    "backfill_approve": ("approve", ApproveConfig, lambda c: {"by": c.approver, "force": c.force}),
    "backfill_publish": ("publish", ForceConfig, lambda c: {"force": c.force}),
    "backfill_discard": ("discard", BackfillIdConfig, lambda c: {}),
    "backfill_rollback": ("rollback", ForceConfig, lambda c: {"force": c.force}),
    "backfill_resume": ("resume", BackfillIdConfig, lambda c: {}),
    "backfill_retry": ("retry", BackfillIdConfig, lambda c: {}),
}
OPERATION_JOBS = tuple(_OPERATIONS)


def backfill_operation_jobs() -> list[dg.JobDefinition]:
    """One job per command on a recorded backfill (see the module docstring); add them to
    the code location's Definitions' jobs."""
    return [_operation_job(name, *how) for name, how in _OPERATIONS.items()]


def _operation_job(
    name: str, action: str, config_class: type[BackfillIdConfig], options: Callable[[Any], dict[str, object]]
) -> dg.JobDefinition:
    @dg.op(name=f"{name}_op")
    # Dagster reads the config schema from the annotation; mypy cannot see a class chosen at run time.
    def operation(context: dg.OpExecutionContext, config: config_class) -> None:  # type: ignore[valid-type]
        given = cast(BackfillIdConfig, config)
        run_command(context, action, given.backfill_id, options(given))

    @dg.job(
        name=name,
        executor_def=dg.in_process_executor,
        description=f"`partition-assets backfill {action} <id>` from the Launchpad: give the backfill id in config.",
    )
    def operation_job():
        operation()

    return operation_job


def run_command(context: dg.OpExecutionContext, action: str, backfill_id: str, options: dict[str, object]) -> None:
    """Runs `partition-assets backfill <action> <backfill_id>` with `options` (the command's
    flags, by name) on the run's instance; its output goes to the run's log.

    Raises:
        dg.Failure: The command refused or failed; its message is the failure's description.
    """
    lines = _LogLines(context.log.info)
    try:
        checked_backfill_id(backfill_id, "the config's backfill_id")
        record = BackfillStore(context.instance).load(backfill_id)
        context.instance.add_run_tags(context.run_id, {BACKFILL_ID_TAG: backfill_id})
        with redirect_stdout(lines):
            # The Dagster user the run carries, where the instance knows one: an approval is theirs.
            user = context.run.tags.get(DAGSTER_USER_TAG)
            code = act_on_record(
                argparse.Namespace(action=action, backfill_id=backfill_id, dagster_user=user, **options),
                record,
                context.instance,
            )
    except PartitionAssetsError as error:
        raise dg.Failure(description=str(error), metadata={"backfill_id": backfill_id}) from None
    finally:
        lines.flush()
    if code != 0:
        raise dg.Failure(
            description=lines.last or f"backfill {action} {backfill_id} failed", metadata={"backfill_id": backfill_id}
        )


class _LogLines(io.TextIOBase):
    """A text stream that sends each whole line written to it to `log`; `last` is the last one."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self._log = log
        self._pending = ""
        self.last = ""

    def write(self, text: str) -> int:
        self._pending += text
        *complete, self._pending = self._pending.split("\n")
        for line in complete:
            self._emit(line)
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._emit(self._pending)
            self._pending = ""

    def _emit(self, line: str) -> None:
        if line.strip():
            self._log(line)
            self.last = line
