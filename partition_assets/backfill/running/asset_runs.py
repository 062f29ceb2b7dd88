"""Executes runs of single assets of one asset job, each as `execute_in_process` would, with
each asset's in-process job built once.

`JobDefinition.execute_in_process(asset_selection=[key])` builds a new in-process job
(`as_ephemeral_job`, subset to the asset) on every call, and Dagster computes a job's
snapshot, which `create_run_for_job` stores with the run, once per job object: ~10 ms of
CPU a run on a 20-asset code location, paid again by every node a worker runs. A worker
keeps one `AssetRuns` and so builds each asset's job, and its snapshot, once. Likewise
`create_run_for_job` asks that job for its subset of the run's asset selection on every run
(a new job, its snapshot built and hashed anew: ~2 of a run's ~25 ms of CPU); the job
builds each subset once (`_subsets_built_once`). And `as_ephemeral_job` builds the whole job
anew before it takes an asset's subset, so each asset's first run built the whole job's
snapshot again (the subset's parent, stored with the run): ~8 ms of CPU per asset and worker
on a 19-asset location, growing with the location. Every asset's job here is a subset of
one ephemeral whole job, whose snapshot a worker builds once.

What a run records is what `execute_in_process` records: the same steps in process, the
same run tags (the job's, the partition's, the ones given) and asset selection, the same
events in the instance.
The runs' console is quiet (run_console.py `quiet_console_config`): Dagster's DEBUG event
lines (about ten a run) and a failed step's stack trace stay in the run's event log, off the
command's output, which names each failure on one line (progress.py).
Not guaranteed: a job given `resources` or `input_values` per call (execute_in_process
takes them; nodes run with the job's own); a change to the code location after the first
run of an asset (a worker loads its location once anyway).
"""

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

import dagster as dg

from partition_assets.backfill.planning.node_run_config import merged_config
from partition_assets.dagster_internals import InMemoryJob, core_execute_in_process, merge_run_tags
from partition_assets.run_console import quiet_console_config


class AssetRuns:
    """Runs single assets of `job` in process, in the instance given per run."""

    def __init__(self, job: dg.JobDefinition) -> None:
        self._job = job
        # What `as_ephemeral_job` builds before it takes an asset's subset: the whole job.
        self._ephemeral_job = job.as_ephemeral_job(resource_defs={}, input_values={})
        self._in_process_jobs: dict[dg.AssetKey, InMemoryJob] = {}

    @property
    def job(self) -> dg.JobDefinition:
        """The asset job whose assets this runs."""
        return self._job

    def execute(
        self,
        instance: dg.DagsterInstance,
        key: dg.AssetKey,
        partition_key: str | None,
        tags: Mapping[str, str],
        run_id: str | None = None,
        run_config: Mapping[str, object] | None = None,
    ) -> dg.ExecuteInProcessResult:
        """One run of asset `key` (of partition `partition_key`, or of the partitions its
        `tags` name as a range, or unpartitioned), as `job.execute_in_process(instance=instance,
        asset_selection=[key], partition_key=partition_key, tags=tags, raise_on_error=False,
        run_config=run_config)`, as the run of id `run_id` (None: a new id). `run_config` is
        merged over the partition's own config, as a backfill's run request's is.

        Raises:
            dagster.DagsterInvalidSubsetError: `key` is not an asset of the job.
            dagster.DagsterUnknownPartitionError: `partition_key` is not a partition of the asset.
        """
        in_process_job = self._in_process_job(key)
        job_def = in_process_job.get_definition()
        partition_config = (
            job_def.partitioned_config.get_run_config_for_partition_key(partition_key)
            if partition_key and job_def.partitioned_config
            else {}
        )
        run_config = quiet_console_config(job_def, merged_config(partition_config, run_config or {}))
        return core_execute_in_process(
            run_config=run_config,
            job=in_process_job,
            instance=instance,
            output_capturing_enabled=True,
            raise_on_error=False,
            # Validates the partition key against the asset, as execute_in_process does.
            run_tags=merge_run_tags(
                job_def=self._job,
                partition_key=partition_key,
                tags=tags,
                asset_selection=[key],
                instance=instance,
                run_config=run_config,
            ),
            run_id=run_id,
            asset_selection=frozenset([key]),
        )

    def _in_process_job(self, key: dg.AssetKey) -> InMemoryJob:
        if key not in self._in_process_jobs:
            # A frozenset, as as_ephemeral_job passes it: the snapshot records its type.
            subset = self._ephemeral_job.get_subset(asset_selection=frozenset([key]))
            _subsets_built_once(subset)
            self._in_process_jobs[key] = InMemoryJob(job_def=subset)
        return self._in_process_jobs[key]


def _subsets_built_once(job: dg.JobDefinition) -> None:
    """Has `job.get_subset` build each subset once and give the same job again after: a job
    definition does not change, and Dagster caches a job's snapshot on the job object."""
    build = job.get_subset
    built: dict[tuple[frozenset, ...], dg.JobDefinition] = {}

    def get_subset(
        *,
        op_selection: Iterable[str] | None = None,
        asset_selection: AbstractSet[dg.AssetKey] | None = None,
        asset_check_selection: AbstractSet[dg.AssetCheckKey] | None = None,
    ) -> dg.JobDefinition:
        # None and empty select the same (get_subset tests each for truth).
        selections = (op_selection, asset_selection, asset_check_selection)
        question = tuple(frozenset(selection or ()) for selection in selections)
        if question not in built:
            built[question] = build(
                op_selection=op_selection, asset_selection=asset_selection, asset_check_selection=asset_check_selection
            )
        return built[question]

    job.get_subset = get_subset  # type: ignore[method-assign]  # this job object's own, no other's
