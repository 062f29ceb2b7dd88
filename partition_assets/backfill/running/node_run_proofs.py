"""The lease proof of each node run a backfill's runners launch (dagster_instance/lease_proof.py):
the runner picks the run's id and tags the run with its proof, made with the backfill's
secret, which the first runner of the backfill creates in the instance's key-value store
(a compare-and-set: of two first runners, one secret stands) and every later one, a resumed
or taken-over coordinator's included, reads back.
"""

import secrets
import uuid
from collections.abc import Mapping

import dagster as dg

from partition_assets.dagster_instance.key_values import swap, value_of
from partition_assets.dagster_instance.lease_proof import lease_secret_key, proof_of
from partition_assets.run_tags import BACKFILL_ID_TAG, LEASE_PROOF_TAG


class NodeRunProofs:
    """Ids and lease proofs for the node runs launched into `instance`; each backfill's
    secret is read (or created) once."""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self._instance = instance
        self._secrets: dict[str, str] = {}

    def proved(self, tags: Mapping[str, str]) -> tuple[str, dict[str, str]]:
        """A new run id, and `tags` with the proof that the run of that id is a node run of the
        backfill they name (any proof they held replaced); `tags` as they are when they name none.

        Raises:
            EnvironmentSetupError: The instance's run storage is not a SQL storage.
        """
        run_id = str(uuid.uuid4())  # as Dagster makes a run id
        backfill_id = tags.get(BACKFILL_ID_TAG)
        if backfill_id is None:
            return run_id, dict(tags)
        return run_id, {**tags, LEASE_PROOF_TAG: proof_of(self._secret(backfill_id), run_id)}

    def _secret(self, backfill_id: str) -> str:
        if backfill_id not in self._secrets:
            key = lease_secret_key(backfill_id)
            secret = value_of(self._instance, key)
            if secret is None:
                swap(self._instance, key, None, secrets.token_hex(32))  # a concurrent first runner's may win
                secret = value_of(self._instance, key)
            assert secret is not None  # inserted above, by this runner or another; never deleted
            self._secrets[backfill_id] = secret
        return self._secrets[backfill_id]
