"""The lease proof of a backfill's node runs (storage/lease_proof.py) and the staging
fingerprint a publish compares with its gate's (storage/backfill_staging.py), as pure logic:
the secrets in an ephemeral instance's key-value store."""

import dagster as dg

from partition_assets.run_tags import BACKFILL_ID_TAG, LEASE_PROOF_TAG, STAGED_TAG
from partition_assets.storage.backfill_staging import StagingFingerprint
from partition_assets.storage.lease_proof import lease_secret_key, proof_of, proven_backfill


def test_a_proof_holds_for_the_run_id_it_was_made_for_only():
    instance = dg.DagsterInstance.ephemeral()
    instance.run_storage.set_cursor_values({lease_secret_key("proofa"): "secret-a"})
    node_run = {BACKFILL_ID_TAG: "proofa", STAGED_TAG: "true", LEASE_PROOF_TAG: proof_of("secret-a", "run-1")}
    assert proven_backfill(instance, "run-1", node_run) == "proofa"
    assert proven_backfill(instance, "run-2", node_run) is None  # re-executed: its tags copied to a new run id
    assert proven_backfill(instance, "run-1", {BACKFILL_ID_TAG: "proofa"}) is None  # the id tag alone
    assert proven_backfill(instance, "run-1", {**node_run, LEASE_PROOF_TAG: "0" * 64}) is None  # typed in
    assert proven_backfill(instance, "run-1", {**node_run, BACKFILL_ID_TAG: "proofb"}) is None  # no such secret
    assert proven_backfill(instance, "run-1", {LEASE_PROOF_TAG: node_run[LEASE_PROOF_TAG]}) is None  # no backfill


def test_a_staging_holds_as_gated_while_its_content_and_times_are_the_gate_s():
    gated = StagingFingerprint("content", "times")
    assert StagingFingerprint.from_json(gated.to_json()) == gated  # as the record keeps it
    assert StagingFingerprint("content", "times").holds_as(gated)
    assert not StagingFingerprint("other", "times").holds_as(gated)
    assert not StagingFingerprint("content", "touched").holds_as(gated)
    # Files a killed publish moved into the table's layout (a copy, on an object store): content only.
    assert StagingFingerprint("content", "copied", moved=True).holds_as(gated)
    assert not StagingFingerprint("other", "times", moved=True).holds_as(gated)
