"""Runs of assets made as a backfill's coordinator makes its node runs (under the id and
lease proof it gives them: backfill/running/node_run_proofs.py), or as production and the
Launchpad make them, for tests that tell the two apart."""

from collections.abc import Mapping, Sequence

import dagster as dg

from partition_assets.backfill.running.node_run_proofs import NodeRunProofs
from partition_assets.run_tags import BACKFILL_ID_TAG


def materialize_as(
    assets: Sequence[dg.AssetsDefinition],
    instance: dg.DagsterInstance,
    partition: str | None,
    tags: Mapping[str, str] | None = None,
    node_run_of: str | None = None,
    resources: Mapping[str, object] | None = None,
) -> dg.ExecuteInProcessResult:
    """`assets` materialized for `partition` (None: unpartitioned) in `instance` by one run
    selecting them (as a node run selects its asset), tagged `tags`, with `resources`; with
    `node_run_of`, as a node run of that backfill: under the run id and lease proof its
    coordinator would give it."""
    run_id, run_tags = None, dict(tags or {})
    if node_run_of is not None:
        run_id, run_tags = NodeRunProofs(instance).proved({**run_tags, BACKFILL_ID_TAG: node_run_of})
    definitions = dg.Definitions(assets=assets, jobs=[dg.define_asset_job("assets")], resources=resources)
    job = definitions.resolve_job_def("assets")
    return job.execute_in_process(
        instance=instance,
        partition_key=partition,
        tags=run_tags,
        run_id=run_id,
        asset_selection=[asset.key for asset in assets],
    )
