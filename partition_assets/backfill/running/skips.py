"""Skipped outputs, as Dagster has them: an asset whose output is not required
(`output_required=False`) may yield nothing; Dagster then records no materialization for it
and skips every step that reads it (`ActiveExecution._should_skip_step`: a step is skipped
when any of its inputs' upstream outputs was not yielded; a blocking check's missing result
skips nothing), whatever the partition mapping; across runs, Dagster's asset backfill never
requests a partition whose targeted parent partition was not materialized
(`_should_backfill_atomic_asset_subset_unit`). A node run that succeeded without the asset's
output is *skipped*, its run tagged SKIPPED_TAG so that the backfill's record
(state/record.py `node_states`) and its publish (publishing/dagster_events.py) see it; the
scheduling core skips its downstream nodes (running/scheduling.py).

Not guaranteed: a worker killed between its run's end and the tag leaves that run counted
as succeeded; a resumed backfill's skipped nodes run again (they may yield output now).
"""

from collections.abc import Iterable

import dagster as dg

from partition_assets.run_tags import SKIPPED_TAG


def yielded_output(job: dg.JobDefinition, key: dg.AssetKey, events: Iterable[dg.DagsterEvent]) -> bool:
    """Whether `events` (of a run of `job` that selected asset `key`) hold the asset's output:
    the STEP_OUTPUT event of the op output that Dagster stores as `key`."""
    handle = job.asset_layer.get_op_output_handle(key)
    step_key, output_name = str(handle.node_handle), handle.output_name
    return any(
        event.event_type == dg.DagsterEventType.STEP_OUTPUT
        and event.step_key == step_key
        and event.step_output_data.step_output_handle.output_name == output_name
        for event in events
    )


def record_skip(instance: dg.DagsterInstance, run_id: str) -> None:
    """Tags the run `run_id`, which succeeded without its asset's output, as skipped."""
    instance.add_run_tags(run_id, {SKIPPED_TAG: "true"})
