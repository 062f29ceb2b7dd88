"""The engine's commands as typed Python functions: the service layer under every surface.

One function per operation, taking a spec or a backfill id and the Dagster instance, and
returning a result; those that run nodes report progress to a `Console`. The command line
(`partition-assets backfill ...`, cli/backfill.py) and the Launchpad's jobs
(automation/operations.py) only parse their input, call these and render the result.

    from partition_assets.backfill.commands import run_backfill, publish_backfill

The commands that run nodes (run, resume, retry, adopt) start worker processes, which import
the caller's main script again as Python's multiprocessing does: a script calls them under
`if __name__ == "__main__":`, and run, resume and retry called outside it raise
UnguardedScriptError before anything is recorded (processes/main_guard.py).

Modules: launching.py (plan, run, detach, adopt, stand by), recorded.py (the commands on a
recorded backfill, and list), retracting.py (retract), extending.py (extend), detaching.py (the
run handed to the run launcher), results.py (what each returns), console.py (where progress goes).
"""

from partition_assets.backfill.commands.console import Console, PrintingConsole, SilentConsole
from partition_assets.backfill.commands.engine_run import EngineRunPlan, plan_engine_run, run_engine_plan
from partition_assets.backfill.commands.extending import extend_backfill
from partition_assets.backfill.commands.launching import (
    adopt_backfill,
    detach_backfill,
    execute_backfill,
    plan_backfill,
    run_backfill,
    stand_by,
    warm_workers,
)
from partition_assets.backfill.commands.recorded import (
    approve_backfill,
    approve_record,
    backfill_ledger,
    backfill_status,
    cancel_backfill,
    claim_silent_backfills,
    diff_backfill,
    discard_backfill,
    list_backfills,
    pause_backfill,
    publish_backfill,
    resume_backfill,
    retry_backfill,
    rollback_backfill,
    unpause_backfill,
)
from partition_assets.backfill.commands.results import (
    BackfillPlan,
    Canceled,
    Committed,
    DetachedRun,
    DiffReport,
    Discarded,
    Extended,
    LedgerReport,
    Lineup,
    PauseChanged,
    Published,
    RemovedPartition,
    Retracted,
    RollbackRequested,
    RunOutcome,
    StatusReport,
    TableDiff,
    TakeoverClaim,
)
from partition_assets.backfill.commands.retracting import retract_partitions

__all__ = [
    "BackfillPlan",
    "Canceled",
    "Committed",
    "Console",
    "DetachedRun",
    "DiffReport",
    "Discarded",
    "EngineRunPlan",
    "Extended",
    "LedgerReport",
    "Lineup",
    "PauseChanged",
    "PrintingConsole",
    "Published",
    "RemovedPartition",
    "Retracted",
    "RollbackRequested",
    "RunOutcome",
    "SilentConsole",
    "StatusReport",
    "TableDiff",
    "TakeoverClaim",
    "adopt_backfill",
    "approve_backfill",
    "approve_record",
    "backfill_ledger",
    "backfill_status",
    "cancel_backfill",
    "claim_silent_backfills",
    "detach_backfill",
    "diff_backfill",
    "discard_backfill",
    "execute_backfill",
    "extend_backfill",
    "list_backfills",
    "pause_backfill",
    "plan_backfill",
    "plan_engine_run",
    "publish_backfill",
    "resume_backfill",
    "retract_partitions",
    "retry_backfill",
    "rollback_backfill",
    "run_backfill",
    "run_engine_plan",
    "stand_by",
    "unpause_backfill",
    "warm_workers",
]
