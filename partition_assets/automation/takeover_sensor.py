"""Sensor (d), opt-in: resumes a backfill whose coordinator died, under a new coordinator
launched as a run of the engine job, wherever the deployment's run launcher runs runs.

Each evaluation claims the backfills whose status needs a coordinator and whose
coordinator fell silent (the command `claim_silent_backfills`, backfill/commands/recorded.py,
over backfill/state/takeover_claims.py: one claim per backfill, whichever
hosts' sensors notice it at the same moment) and requests one run of `job` (a
`sparse_backfill_job`) per claim, tagged with the backfill's id and TAKEOVER_TAG: the job
resumes the recorded backfill as `partition-assets backfill resume` would, by its kind (a
retract as a retract: backfill/commands/engine_run.py).

Not guaranteed: the run starts only when the deployment's run coordinator starts it (a
queued run waits for the daemon); a coordinator run that fails to start is claimed again
once the takeover grace has passed (backfill/state/takeover_claims.py). A rollback cut short is
not taken over: `backfill resume` finishes it.
"""

import dagster as dg

from partition_assets.backfill.commands import TakeoverClaim, claim_silent_backfills
from partition_assets.backfill.planning.run_config import spec_run_config
from partition_assets.run_tags import BACKFILL_ID_TAG, TAKEOVER_TAG


def coordinator_takeover_sensor(
    job: dg.JobDefinition,
    name: str = "coordinator_takeover",
    minimum_interval_seconds: int = 30,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """Requests a run of `job` (a `sparse_backfill_job`) to resume each backfill whose
    coordinator died, once per death (see the module docstring).

    Args:
        name: The sensor's name.
        minimum_interval_seconds: How often it looks; a dead coordinator is noticed one lease TTL
            after its last heartbeat at the earliest (PARTITION_ASSETS_LEASE_TTL).
    """

    @dg.sensor(
        name=name,
        job=job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description="Resumes backfills whose coordinator died, under a new coordinator run.",
    )
    def _sensor(context: dg.SensorEvaluationContext):
        claimed = claim_silent_backfills(context.instance)
        if not claimed:
            return dg.SkipReason("no backfill lost its coordinator")
        return [_resume_request(claim) for claim in claimed]

    return _sensor


def _resume_request(claim: TakeoverClaim) -> dg.RunRequest:
    """A run of the engine job resuming the claimed backfill; its config is the recorded spec
    (the job reads the record, so the config only shows what it resumes)."""
    return dg.RunRequest(
        run_config=spec_run_config(claim.spec), tags={BACKFILL_ID_TAG: claim.backfill_id, TAKEOVER_TAG: "true"}
    )
