"""The sparse backfill engine as a Dagster job, launched from the Launchpad or by a sensor.

The job's one op is the backfill's coordinator: it calls the engine run's commands
(backfill/commands/engine_run.py: plan and record the backfill, run it as `partition-assets
backfill run` does) and logs why its nodes are in it (config `produced_by`, `stale`: a line per
asset) and each node's result (the results of each second in one log event). The coordinator run
carries the backfill id tag too, so filtering runs by `partition_assets/backfill_id=<id>`
in the UI shows it beside its node runs.
"""

import uuid

import dagster as dg

from partition_assets.automation.operations import RunLogConsole
from partition_assets.backfill.commands import plan_engine_run, run_engine_plan
from partition_assets.backfill.planning.reasons import reason_lines
from partition_assets.backfill.planning.run_config import COORDINATOR_OP, ENGINE_JOB, SparseBackfillConfig
from partition_assets.backfill.planning.spec import spec_from_config
from partition_assets.backfill.running.progress import GroupedLines
from partition_assets.errors import PartitionAssetsError
from partition_assets.run_tags import BACKFILL_ID_TAG


def sparse_backfill_job(module: str, name: str = ENGINE_JOB) -> dg.JobDefinition:
    """A job whose run plans and runs a sparse backfill of the code location `module`.

    `module` is what the node runs load (a module name or a .py path, `:ATTRIBUTE` naming
    one object of it: any target `code_location.load_definitions` loads, so a `@repository`
    or a `@dg.definitions` function too), normally the code location that serves this job.
    """

    @dg.op(name=COORDINATOR_OP)
    # Dagster reads the config schema from the annotation; mypy cannot see a class built at import.
    def coordinate(context: dg.OpExecutionContext, config: SparseBackfillConfig) -> None:  # type: ignore[valid-type]
        backfill_id = context.run.tags.get(BACKFILL_ID_TAG)
        if backfill_id is None:  # launched from the Launchpad: tag this run after the fact
            backfill_id = uuid.uuid4().hex[:12]
            context.instance.add_run_tags(context.run_id, {BACKFILL_ID_TAG: backfill_id})
        try:
            plan = plan_engine_run(context.instance, context.run, backfill_id, spec_from_config(config, module))
        except PartitionAssetsError as error:
            raise dg.Failure(description=f"backfill not planned: {error}") from None
        if plan is None:
            context.log.info(f"backfill {backfill_id} has nothing left to run or publish")
            return
        context.log.info(f"its runs carry the tag {BACKFILL_ID_TAG}={backfill_id}")
        for line in reason_lines(plan.graph.reasons):  # why each asset's partitions are in it
            context.log.info(f"selected {line}")
        try:
            # The gate's and publish's lines go through the group too: after the last nodes' lines.
            with GroupedLines(context.log.info) as lines:
                outcome = run_engine_plan(context.instance, plan, RunLogConsole(lines.add))
        except PartitionAssetsError as error:  # partitions leased by another writer, ...
            raise dg.Failure(description=str(error), metadata={"backfill_id": backfill_id}) from None
        if not outcome.succeeded:
            raise dg.Failure(description=outcome.message, metadata={"backfill_id": backfill_id})
        context.log.info(outcome.message)

    @dg.job(
        name=name,
        # The op only coordinates: no step subprocess; the node runs are the real work.
        executor_def=dg.in_process_executor,
        description=(
            "Sparse (asset, partition) backfill: each node starts when its own upstream nodes "
            "succeed. Launch with config {selection, start, end, ...}; filter runs by the tag "
            f"{BACKFILL_ID_TAG} to see the node runs."
        ),
    )
    def sparse_backfill():
        coordinate()

    return sparse_backfill
