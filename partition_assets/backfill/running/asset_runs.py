"""Executes runs of single assets of one asset job, each as `execute_in_process` would, with
each asset's in-process job built once.

`JobDefinition.execute_in_process(asset_selection=[key])` builds a new in-process job
(`as_ephemeral_job`, subset to the asset) on every call, and Dagster computes a job's
snapshot, which `create_run_for_job` stores with the run, once per job object: ~10 ms of
CPU a run on a 20-asset code location, paid again by every node a worker runs. A worker
keeps one `AssetRuns` and so builds each asset's job, and its snapshot, once.

What a run records is what `execute_in_process` records: the same steps in process, the
same run tags (the job's, the partition's, the ones given) and asset selection, the same
events in the instance.
Not guaranteed: a job given `resources` or `input_values` per call (execute_in_process
takes them; nodes run with the job's own); a change to the code location after the first
run of an asset (a worker loads its location once anyway).
"""

from collections.abc import Mapping

import dagster as dg

from partition_assets.dagster_internals import InMemoryJob, core_execute_in_process, merge_run_tags


class AssetRuns:
    """Runs single assets of `job` in process, in the instance given per run."""

    def __init__(self, job: dg.JobDefinition) -> None:
        self._job = job
        self._in_process_jobs: dict[dg.AssetKey, InMemoryJob] = {}

    def execute(
        self,
        instance: dg.DagsterInstance,
        key: dg.AssetKey,
        partition_key: str | None,
        tags: Mapping[str, str],
    ) -> dg.ExecuteInProcessResult:
        """One run of asset `key` (of partition `partition_key`, or of the partitions its
        `tags` name as a range, or unpartitioned), as `job.execute_in_process(instance=instance,
        asset_selection=[key], partition_key=partition_key, tags=tags, raise_on_error=False)`.

        Raises:
            dagster.DagsterInvalidSubsetError: `key` is not an asset of the job.
            dagster.DagsterUnknownPartitionError: `partition_key` is not a partition of the asset.
        """
        in_process_job = self._in_process_job(key)
        job_def = in_process_job.get_definition()
        run_config = (
            job_def.partitioned_config.get_run_config_for_partition_key(partition_key)
            if partition_key and job_def.partitioned_config
            else {}
        )
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
            asset_selection=frozenset([key]),
        )

    def _in_process_job(self, key: dg.AssetKey) -> InMemoryJob:
        if key not in self._in_process_jobs:
            subset = self._job.as_ephemeral_job(resource_defs={}, input_values={}, asset_selection=[key])
            self._in_process_jobs[key] = InMemoryJob(job_def=subset)
        return self._in_process_jobs[key]
