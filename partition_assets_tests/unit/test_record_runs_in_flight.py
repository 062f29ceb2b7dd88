"""`cancel_in_flight` (backfill/state/record.py) with other runs in flight beside the backfill's:
it now reads the instance's runs in flight by status, not the backfill's by tag (issue 55, seed
23), so it must still end only the backfill's own node runs, as their lease proofs show."""

import dagster as dg

from partition_assets.backfill.state.record import cancel_in_flight
from partition_assets.dagster_instance.lease_proof import lease_secret_key, proof_of
from partition_assets.run_tags import BACKFILL_ID_TAG, LEASE_PROOF_TAG

ASSET = frozenset({dg.AssetKey("orders")})


def run_of(
    instance: dg.DagsterInstance,
    run_id: str,
    tags: dict[str, str],
    status: dg.DagsterRunStatus = dg.DagsterRunStatus.NOT_STARTED,
    asset_selection: frozenset[dg.AssetKey] | None = ASSET,
) -> str:
    """A run record of id `run_id` in `instance`, as Dagster creates one; its id."""
    run = dg.DagsterRun(job_name="nodes", run_id=run_id, tags=tags, status=status, asset_selection=asset_selection)
    return instance.add_run(run).run_id


def node_run_tags(backfill: str, run_id: str) -> dict[str, str]:
    return {BACKFILL_ID_TAG: backfill, LEASE_PROOF_TAG: proof_of(f"secret-{backfill}", run_id)}


def test_only_the_backfill_s_own_unfinished_node_runs_are_canceled_beside_another_backfill_and_production():
    instance = dg.DagsterInstance.ephemeral()
    instance.run_storage.set_cursor_values({lease_secret_key(b): f"secret-{b}" for b in ("bfa", "bfb")})
    own = [
        run_of(instance, "a-1", node_run_tags("bfa", "a-1")),
        run_of(instance, "a-2", node_run_tags("bfa", "a-2"), dg.DagsterRunStatus.STARTED),
    ]
    untouched = {
        run_of(instance, "a-3", node_run_tags("bfa", "a-3"), dg.DagsterRunStatus.SUCCESS): "SUCCESS",
        run_of(instance, "b-1", node_run_tags("bfb", "b-1")): "NOT_STARTED",  # the other backfill's
        run_of(instance, "claim", {BACKFILL_ID_TAG: "bfa"}): "NOT_STARTED",  # its id typed in: production's
        run_of(instance, "prod", {}, dg.DagsterRunStatus.STARTED): "STARTED",
        # The backfill's coordinator run (a Dagster job) materializes nothing.
        run_of(instance, "a-job", node_run_tags("bfa", "a-job"), asset_selection=None): "NOT_STARTED",
    }

    assert cancel_in_flight(instance, "bfa") == 2

    assert {run_id: instance.get_run_by_id(run_id).status.value for run_id in own} == dict.fromkeys(own, "CANCELED")
    assert {run_id: instance.get_run_by_id(run_id).status.value for run_id in untouched} == untouched
