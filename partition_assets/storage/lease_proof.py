"""Proof that a run is one of a backfill's own node runs, which alone may write into the
backfill's staging or into the partitions it leases.

A run's tags only claim a backfill (`partition_assets/backfill_id`, `partition_assets/staged`):
Dagster's re-execution copies a run's tags to the new run, and the Launchpad lets anyone type
them. Each backfill has a secret, kept in the instance's key-value store (created once by the
first runner of its node runs, kept across resumes: backfill/running/node_run_proofs.py). Its
coordinator picks the id of each node run it launches and tags the run with
HMAC-SHA256(secret, run id) (`LEASE_PROOF_TAG`). The IO manager of the run recomputes it for
its own run id: a re-executed run carries the original's proof under a new run id, and a
typed tag cannot be computed without the secret, so neither proves anything.
The proof goes with the run's tags wherever the run executes (a local worker, the fork
server's children, a run launcher's process, container or pod, another host), and is checked
against the instance every run reaches.

Not guaranteed: the secret protects against tags, not against code: whoever can read the
instance's database (any code running against the instance) can read it and sign a run.
"""

from __future__ import annotations

import hashlib
import hmac
import weakref
from collections.abc import Mapping

import dagster as dg

from partition_assets.run_tags import BACKFILL_ID_TAG, LEASE_PROOF_TAG

_SECRET_KEY_PREFIX = "partition_assets/lease_secret/"

# The secrets this process read, by instance, then backfill id: a backfill's secret never changes.
_known_secrets: weakref.WeakKeyDictionary[dg.DagsterInstance, dict[str, str]] = weakref.WeakKeyDictionary()


def lease_secret_key(backfill_id: str) -> str:
    """The key of backfill `backfill_id`'s secret in the instance's key-value store."""
    return f"{_SECRET_KEY_PREFIX}{backfill_id}"


def proof_of(secret: str, run_id: str) -> str:
    """The proof that run `run_id` is a node run of the backfill whose secret is `secret`."""
    return hmac.new(secret.encode(), run_id.encode(), hashlib.sha256).hexdigest()


def proven_backfill(instance: dg.DagsterInstance, run_id: str, tags: Mapping[str, str]) -> str | None:
    """The backfill run `run_id` (tagged `tags`) is a node run of, as its lease proof shows;
    None for every other run, whatever backfill its tags name: without a proof, with a proof
    made for another run id (a re-execution), or of a backfill that has no secret."""
    backfill_id, proof = tags.get(BACKFILL_ID_TAG), tags.get(LEASE_PROOF_TAG)
    if backfill_id is None or proof is None:
        return None
    known = _known_secrets.setdefault(instance, {})
    if backfill_id not in known:
        key = lease_secret_key(backfill_id)
        secret = instance.run_storage.get_cursor_values({key}).get(key)
        if secret is None:
            return None
        known[backfill_id] = secret
    return backfill_id if hmac.compare_digest(proof, proof_of(known[backfill_id], run_id)) else None
