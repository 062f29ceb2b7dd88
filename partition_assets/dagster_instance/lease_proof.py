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

A run id alone is not one run: Dagster's GraphQL deletes a run (`deleteRun`) and launches one
under a chosen id, its tags (the proof among them) copied. So the proof holds for the first run
record of that id only: the first process that checks the proof of a run (its own IO manager,
or the coordinator reading its backfill's runs) binds the run id to that record's identity, its
storage id and creation time (microseconds, set by the database when the run is created), in
the key-value store, by compare-and-set; every later check compares. A run re-created under the
id has another creation time, and proves nothing. Readers that only steer (duration
estimates, capacity, the eager sensor over many past runs; the Spark resource picking its
run's scheduler pool) check bindings without making any.

Not guaranteed: the secret protects against tags, not against code: whoever can read the
instance's database (any code running against the instance) can read it and sign a run. A node
run deleted and re-created before anything checked its proof (before its first read or write,
and before its coordinator read its backfill's runs) binds the id to the re-created run; node
runs made before bindings existed are bound at their next check.
"""

from __future__ import annotations

import hashlib
import hmac
import weakref
from collections.abc import Iterable, Mapping

import dagster as dg

from partition_assets.dagster_instance.key_values import insert_absent, value_of
from partition_assets.run_tags import BACKFILL_ID_TAG, LEASE_PROOF_TAG

_SECRET_KEY_PREFIX = "partition_assets/lease_secret/"
# The identity of the run record each node run's id is bound to (see the module docstring).
_BINDING_KEY_PREFIX = "partition_assets/node_run_record/"

# The secrets this process read, by instance, then backfill id: a backfill's secret never changes.
_known_secrets: weakref.WeakKeyDictionary[dg.DagsterInstance, dict[str, str]] = weakref.WeakKeyDictionary()
# The bindings this process read or made, by instance, then run id: a binding never changes.
_known_bindings: weakref.WeakKeyDictionary[dg.DagsterInstance, dict[str, str]] = weakref.WeakKeyDictionary()


def lease_secret_key(backfill_id: str) -> str:
    """The key of backfill `backfill_id`'s secret in the instance's key-value store."""
    return f"{_SECRET_KEY_PREFIX}{backfill_id}"


def proof_of(secret: str, run_id: str) -> str:
    """The proof that run `run_id` is a node run of the backfill whose secret is `secret`."""
    return hmac.new(secret.encode(), run_id.encode(), hashlib.sha256).hexdigest()


def proven_backfill(
    instance: dg.DagsterInstance, run_id: str, tags: Mapping[str, str], bind: bool = True
) -> str | None:
    """The backfill run `run_id` (tagged `tags`) is a node run of, as its lease proof shows;
    None for every other run, whatever backfill its tags name: without a proof, with a proof
    made for another run id (a re-execution), of a backfill that has no secret, or a run
    re-created under the id of one that proved itself (see the module docstring). `bind`: as
    `proven_backfills` has it."""
    if _signed_backfill(instance, run_id, tags) is None:  # most runs: no record read
        return None
    record = instance.get_run_record_by_id(run_id)
    return None if record is None else proven_backfills(instance, [record], bind).get(run_id)


def proven_backfills(
    instance: dg.DagsterInstance, records: Iterable[dg.RunRecord], bind: bool = True
) -> dict[str, str]:
    """The backfill each of `records` is a node run of, by run id, as `proven_backfill` says;
    runs that prove none are left out. One read of the key-value store for all of them.

    Args:
        bind: Bind each signed run no check bound yet to its record (one write each), as a check
            that lets a run write or counts its node must. Without it nothing is written and
            such a run counts as proven: for readers of many past runs that only steer
            (estimates, capacity, the eager sensor), whose answer moves no data.
    """
    signed = {
        record.dagster_run.run_id: (record, backfill_id)
        for record in records
        if (backfill_id := _signed_backfill(instance, record.dagster_run.run_id, record.dagster_run.tags))
    }
    bound = _bindings(instance, signed)
    identities = {run_id: _identity(record) for run_id, (record, _) in signed.items()}
    if bind:
        bound.update(_bind(instance, {run_id: identities[run_id] for run_id in signed if bound[run_id] is None}))
    return {
        run_id: backfill_id
        for run_id, (_, backfill_id) in signed.items()
        if bound[run_id] in (None, identities[run_id])  # None: left unbound, as asked
    }


def _signed_backfill(instance: dg.DagsterInstance, run_id: str, tags: Mapping[str, str]) -> str | None:
    """The backfill whose secret signed `run_id` in `tags`; None when none did."""
    backfill_id, proof = tags.get(BACKFILL_ID_TAG), tags.get(LEASE_PROOF_TAG)
    if backfill_id is None or proof is None:
        return None
    known = _known_secrets.setdefault(instance, {})
    if backfill_id not in known:
        secret = value_of(instance, lease_secret_key(backfill_id))
        if secret is None:
            return None
        known[backfill_id] = secret
    return backfill_id if hmac.compare_digest(proof, proof_of(known[backfill_id], run_id)) else None


def _bindings(instance: dg.DagsterInstance, run_ids: Iterable[str]) -> dict[str, str | None]:
    """The identity each run id is bound to (None: not yet), in one read for the ids this
    process has not seen bound (a binding never changes once made)."""
    seen = _known_bindings.setdefault(instance, {})
    unseen = {_binding_key(run_id): run_id for run_id in run_ids if run_id not in seen}
    if unseen:
        for key, value in instance.run_storage.get_cursor_values(set(unseen)).items():
            seen[unseen[key]] = value
    return {run_id: seen.get(run_id) for run_id in run_ids}


def _bind(instance: dg.DagsterInstance, identities: Mapping[str, str]) -> dict[str, str | None]:
    """Binds each run id of `identities` to its identity unless another check bound it first
    (one binding stands), in two statements however many; the identity each is bound to."""
    if not identities:
        return {}
    keys = {_binding_key(run_id): run_id for run_id in identities}
    insert_absent(instance, {key: identities[run_id] for key, run_id in keys.items()})
    stored = instance.run_storage.get_cursor_values(set(keys))
    bound = {run_id: stored.get(key) for key, run_id in keys.items()}
    _known_bindings.setdefault(instance, {}).update({run_id: value for run_id, value in bound.items() if value})
    return bound


def _binding_key(run_id: str) -> str:
    return f"{_BINDING_KEY_PREFIX}{run_id}"


def _identity(record: dg.RunRecord) -> str:
    """What tells this run record apart from any other ever made under its run id."""
    return f"{record.storage_id}@{record.create_timestamp.isoformat()}"
