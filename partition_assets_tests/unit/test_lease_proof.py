"""The lease proof of a backfill's node runs (dagster_instance/lease_proof.py) and the staging
fingerprint a publish compares with its gate's (storage/backfill_staging.py), as pure logic:
the secrets in an ephemeral instance's key-value store."""

import dagster as dg

from partition_assets.dagster_instance.lease_proof import lease_secret_key, proof_of, proven_backfill, proven_backfills
from partition_assets.run_tags import BACKFILL_ID_TAG, LEASE_PROOF_TAG, STAGED_TAG
from partition_assets.storage.backfill_staging import StagingFingerprint


def run_of(instance: dg.DagsterInstance, run_id: str, tags: dict[str, str]) -> str:
    """A run record of id `run_id` tagged `tags` in `instance`, as Dagster creates one; its id."""
    return instance.add_run(dg.DagsterRun(job_name="nodes", run_id=run_id, tags=tags)).run_id


def test_a_proof_holds_for_the_run_id_it_was_made_for_only():
    instance = dg.DagsterInstance.ephemeral()
    instance.run_storage.set_cursor_values({lease_secret_key("proofa"): "secret-a"})
    node_run = {BACKFILL_ID_TAG: "proofa", STAGED_TAG: "true", LEASE_PROOF_TAG: proof_of("secret-a", "run-1")}
    for run_id in ("run-1", "run-2"):
        run_of(instance, run_id, node_run)
    assert proven_backfill(instance, "run-1", node_run) == "proofa"
    assert proven_backfill(instance, "run-2", node_run) is None  # re-executed: its tags copied to a new run id
    assert proven_backfill(instance, "run-1", {BACKFILL_ID_TAG: "proofa"}) is None  # the id tag alone
    assert proven_backfill(instance, "run-1", {**node_run, LEASE_PROOF_TAG: "0" * 64}) is None  # typed in
    assert proven_backfill(instance, "run-1", {**node_run, BACKFILL_ID_TAG: "proofb"}) is None  # no such secret
    assert proven_backfill(instance, "run-1", {LEASE_PROOF_TAG: node_run[LEASE_PROOF_TAG]}) is None  # no backfill
    signed_without_a_run = {**node_run, LEASE_PROOF_TAG: proof_of("secret-a", "run-3")}
    assert proven_backfill(instance, "run-3", signed_without_a_run) is None  # no run of that id


def test_a_node_run_deleted_and_created_again_under_its_id_and_tags_proves_nothing():
    """Issue 50 hole 5: the proof bound only the run id, and Dagster's GraphQL deletes a run
    (`deleteRun`) and launches one under a chosen id: the node run re-created with its tags
    proved itself the backfill's. The id is bound to the record that first proved it; every
    process, its batch reads of runs included, sees the re-created run as no node run."""
    instance = dg.DagsterInstance.ephemeral()
    instance.run_storage.set_cursor_values({lease_secret_key("proofa"): "secret-a"})
    node_run = {BACKFILL_ID_TAG: "proofa", LEASE_PROOF_TAG: proof_of("secret-a", "run-1")}
    run_of(instance, "run-1", node_run)
    assert proven_backfill(instance, "run-1", node_run) == "proofa"  # its IO manager's check binds it
    assert proven_backfill(instance, "run-1", node_run) == "proofa"  # and it stays proven
    instance.delete_run("run-1")
    run_of(instance, "run-1", node_run)  # the same id and tags, another run
    assert proven_backfill(instance, "run-1", node_run) is None
    assert proven_backfills(instance, instance.get_run_records()) == {}


def test_a_staging_holds_as_gated_while_its_content_and_times_are_the_gate_s():
    gated = StagingFingerprint("content", "times")
    assert StagingFingerprint.from_json(gated.to_json(), "the fingerprint") == gated  # as the record keeps it
    assert StagingFingerprint("content", "times").holds_as(gated)
    assert not StagingFingerprint("other", "times").holds_as(gated)
    assert not StagingFingerprint("content", "touched").holds_as(gated)
    # Files a killed publish moved into the table's layout (a copy, on an object store): content only.
    assert StagingFingerprint("content", "copied", moved=True).holds_as(gated)
    assert not StagingFingerprint("other", "times", moved=True).holds_as(gated)
