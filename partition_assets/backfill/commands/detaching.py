"""`partition-assets backfill run --detach`: the backfill's coordinator handed to the
instance's run coordinator and run launcher, as one run of the code location's engine job
(`sparse_backfill_job`, named `ENGINE_JOB`: automation/job.py), so it runs wherever the deployment runs runs
(a Kubernetes pod, a Docker container, or a subprocess with Dagster's default launcher).

The run is created as `dagster job launch` creates one (against a code server this
process starts for the location, then `instance.submit_run`), tagged with a new backfill
id: the job records and runs the backfill (automation/job.py) and the command returns at
once, naming the backfill and the run.

Not guaranteed: a queued run starts only while `dagster-daemon` runs (the queued run
coordinator); the run's process must reach the same instance, lake and Spark as any run.
Until the run starts and records the backfill, `backfill status <id>` answers that no such
backfill is recorded. The spec is planned by the command first (a bad one is refused
before any run is created) and again by the job.
"""

import uuid

import dagster as dg

from partition_assets.backfill.planning.run_config import ENGINE_JOB, spec_run_config
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.running.launcher import check_loaded, load_target
from partition_assets.code_location import load_definitions
from partition_assets.dagster_internals import WorkspaceProcessContext
from partition_assets.errors import CodeLocationError
from partition_assets.run_tags import BACKFILL_ID_TAG


def submit_coordinator_run(instance: dg.DagsterInstance, spec: BackfillSpec) -> tuple[str, dg.DagsterRun]:
    """Submits one run of the engine job of `spec`'s code location that runs `spec` under a
    new backfill id; returns the id and the run.

    Raises:
        CodeLocationError: The code location does not load, or defines no `ENGINE_JOB`; no run was created.
    """
    # Checked in this process, before a code server is started for the location.
    if ENGINE_JOB not in {job.name for job in load_definitions(spec.module).resolve_all_job_defs()}:
        raise CodeLocationError(
            f"{spec.module} defines no job {ENGINE_JOB!r}: add `sparse_backfill_job({spec.module!r})` to its "
            "Definitions' jobs to hand backfills to the run launcher (--detach), or run without --detach. "
            "Nothing was recorded or launched."
        )
    backfill_id = uuid.uuid4().hex[:12]
    with WorkspaceProcessContext(instance, load_target(spec.module), version=dg.__version__) as workspace:
        check_loaded(workspace, spec.module)
        context = workspace.create_request_context()
        location = context.get_code_location(next(iter(context.code_location_names)))
        repository = next(iter(location.get_repositories().values()))
        remote_job = repository.get_full_job(ENGINE_JOB)
        run_config = spec_run_config(spec)
        plan = location.get_execution_plan(
            remote_job, run_config, step_keys_to_execute=None, known_state=None, instance=instance
        ).execution_plan_snapshot
        run = instance.create_run(
            job_name=ENGINE_JOB,
            run_id=None,
            run_config=run_config,
            status=None,
            tags={**remote_job.tags, BACKFILL_ID_TAG: backfill_id},
            root_run_id=None,
            parent_run_id=None,
            step_keys_to_execute=plan.step_keys_to_execute,
            execution_plan_snapshot=plan,
            job_snapshot=remote_job.job_snapshot,
            parent_job_snapshot=remote_job.parent_job_snapshot,
            asset_selection=None,
            asset_check_selection=None,
            resolved_op_selection=None,
            op_selection=None,
            remote_job_origin=remote_job.get_remote_origin(),
            job_code_origin=remote_job.get_python_origin(),
            asset_graph=repository.asset_graph,
        )
        return backfill_id, instance.submit_run(run.run_id, context)
