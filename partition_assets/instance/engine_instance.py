"""The Dagster instance class that puts the webserver's range backfills on the sparse engine.

Set in dagster.yaml (the repo's is the `make dev` setup):

    instance_class:
      module: partition_assets.instance
      class: EngineBackfillInstance
    partition_assets:
      engine_modules: [partition_assets.example]   # code locations whose UI backfills the engine runs
      # (each as -m names it: MODULE[:ATTRIBUTE] or FILE.py[:ATTRIBUTE])
      backfills: {max_runs: 4, max_runs_under_production: 1}   # what backfills may take
                                                     # (backfill/running/capacity.py)

Contract:
- `add_backfill` (what the webserver's `launchPartitionBackfill` calls) marks an asset
  backfill `partition_assets/engine=sparse` and hands it to a coordinator process
  (processes/coordinators.py: the webserver's warm standby, else a new detached
  `partition-assets backfill adopt <id>`), unless `engine_modules` is empty or the
  backfill already carries `partition_assets/engine` (`=dagster` keeps Dagster's daemon;
  `=sparse` copied from its parent by the UI's *Re-execute* is adopted too).
  The coordinator hands a backfill it cannot run exactly back to the daemon
  (`partition_assets/engine=dagster`).
- In the webserver, an instance with `engine_modules` keeps a standby coordinator waiting.
- Under an approval policy that requires approval (`approval: {required: true}`:
  backfill/state/approval.py), an asset backfill that Dagster's daemon would run (the tag
  `partition_assets/engine=dagster`, or no `engine_modules`) is refused: the daemon
  publishes without a gate or an approval.
- `get_backfills` hides the engine's backfills from Dagster's backfill daemon, and only
  from it (dagster_instance/daemon_filter.py).
- `get_backfill` of an engine backfill in progress whose coordinator died carries an error
  text saying so (backfill/dagster_ui/silence.py): the webserver's backfill page shows it.

Not guaranteed: the UI's *Re-execute* is told from a copied engine backfill by Dagster's
`dagster/parent_backfill_id` tag; `partition_assets_tests/integration/test_dagster_internals.py` pins it
against the installed Dagster. This module imports only Dagster, the instance's storage
and the light process helpers of processes/coordinators.py: every process of the instance
(webserver, daemon, run workers) loads it.
"""

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from partition_assets.dagster_instance.daemon_filter import ENGINE_TAG, SPARSE, shown_to
from partition_assets.dagster_instance.storage import instance_storage_defaults
from partition_assets.dagster_internals import BulkActionsFilter, BulkActionStatus, PartitionBackfill
from partition_assets.processes.coordinators import keep_standby, start_coordinator

# On a backfill the UI's "Re-execute" created: the one it re-executes.
PARENT_BACKFILL_TAG = "dagster/parent_backfill_id"


class EngineBackfillInstance(dg.DagsterInstance):
    """A DagsterInstance whose UI asset backfills of `engine_modules` run on the sparse engine."""

    def __init__(self, *args: Any, partition_assets: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The `partition_assets:` section as written; its `backfills:` capacity is checked
        # where a backfill starts (backfill/running/claims.py), so a bad one refuses backfills
        # with its own message and leaves the webserver and daemon running.
        self.partition_assets_settings: Mapping[str, Any] = dict(partition_assets or {})
        self.engine_modules: list[str] = list(self.partition_assets_settings.get("engine_modules", []))
        if self.engine_modules:
            keep_standby(self.root_directory, self.engine_modules)

    @classmethod
    def config_schema(cls) -> dict[str, dg.Field]:
        return {
            "partition_assets": dg.Field(
                {
                    "engine_modules": dg.Field([str], is_required=False, default_value=[]),
                    "backfills": dg.Field(dg.Permissive(), is_required=False),
                    # Checked where it is read (backfill/state/approval.py), like `backfills:`.
                    "approval": dg.Field(dg.Permissive(), is_required=False),
                },
                is_required=False,
            )
        }

    @staticmethod
    def config_defaults(base_dir: str) -> Mapping[str, Any]:
        """Dagster's defaults with lighter storage for many small runs (dagster_instance/storage.py)."""
        return instance_storage_defaults(base_dir)

    def add_backfill(self, partition_backfill: PartitionBackfill) -> None:
        if not self._adopts(partition_backfill):
            if partition_backfill.is_asset_backfill and partition_backfill.tags.get(ENGINE_TAG) != SPARSE:
                self._refuse_if_approval_required(partition_backfill)
            super().add_backfill(partition_backfill)
            return
        super().add_backfill(partition_backfill._replace(tags={**partition_backfill.tags, ENGINE_TAG: SPARSE}))
        start_coordinator(self.root_directory, self.engine_modules, partition_backfill.backfill_id)

    def _refuse_if_approval_required(self, backfill: PartitionBackfill) -> None:
        """ApprovalError (nothing recorded) when this deployment requires approval: Dagster's
        daemon, which would run `backfill`, writes its partitions without a gate or an approval."""
        # Imported here: the engine's modules load pyarrow (see get_backfill).
        from partition_assets.backfill.state.approval import SETTINGS_KEY, approval_policy
        from partition_assets.errors import ApprovalError

        policy = approval_policy(self)
        if policy is None or not policy.required:
            return
        raise ApprovalError(
            f"backfill {backfill.backfill_id} would run on Dagster's daemon ({ENGINE_TAG}="
            f"{backfill.tags.get(ENGINE_TAG, 'unset')}, engine_modules {self.engine_modules or 'none'}), which "
            "publishes without the approval this deployment requires (dagster.yaml "
            f"`partition_assets: {SETTINGS_KEY}:`): "
            f"launch it without the tag {ENGINE_TAG}=dagster from a code location of engine_modules, or with "
            "`partition-assets backfill run`. Nothing was recorded."
        )

    def _adopts(self, backfill: PartitionBackfill) -> bool:
        """An asset backfill not marked yet, or the UI's re-execution of an engine backfill
        (it copies its parent's tags); not the record of an engine backfill started elsewhere."""
        if not self.engine_modules or not backfill.is_asset_backfill:
            return False
        engine = backfill.tags.get(ENGINE_TAG)
        return engine is None or (engine == SPARSE and PARENT_BACKFILL_TAG in backfill.tags)

    def get_backfill(self, backfill_id: str) -> PartitionBackfill | None:
        """Dagster's, with the error text that an engine backfill in progress lost its
        coordinator, when it did (backfill/dagster_ui/silence.py)."""
        backfill = super().get_backfill(backfill_id)
        if backfill is None or backfill.tags.get(ENGINE_TAG) != SPARSE or backfill.status != BulkActionStatus.REQUESTED:
            return backfill
        # Imported here: the engine's state modules load pyarrow, which the instance's other
        # processes (the daemon, code servers) need not load until an engine backfill is read.
        from partition_assets.backfill.dagster_ui.silence import shown_with_silence

        return shown_with_silence(self, backfill)

    def get_backfills(
        self,
        filters: BulkActionsFilter | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        status: BulkActionStatus | None = None,
    ) -> Sequence[PartitionBackfill]:
        backfills = super().get_backfills(filters=filters, cursor=cursor, limit=limit, status=status)
        return shown_to(backfills, sys._getframe(1))  # the frame of whoever called get_backfills
