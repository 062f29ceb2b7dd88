"""The Dagster instance class that puts the webserver's range backfills on the sparse engine.

Set in dagster.yaml (the repo's is the `make dev` setup):

    instance_class:
      module: partition_assets.instance
      class: EngineBackfillInstance
    partition_assets:
      engine_modules: [partition_assets.example]   # code locations whose UI backfills the engine runs

Contract:
- `add_backfill` (what the webserver's `launchPartitionBackfill` calls) marks an asset
  backfill `partition_assets/engine=sparse` and hands it to a coordinator process: the
  webserver's standby (`partition-assets backfill standby`, started with the webserver and
  after each hand-over: it has imported Dagster, the engine and the code locations and
  started its workers' fork server, so the backfill starts at once), else a new detached
  one (`partition-assets backfill adopt <id>`), unless `engine_modules` is empty or the
  backfill already carries `partition_assets/engine` (`=dagster` keeps Dagster's daemon;
  `=sparse` copied from its parent by the UI's *Re-execute* is adopted too).
  The coordinator hands a backfill it cannot run exactly back to the daemon
  (`partition_assets/engine=dagster`).
- `get_backfills` leaves backfills marked `sparse` out of what Dagster's backfill daemon
  (`dagster._daemon.backfill`) reads, so the daemon never executes or cancels them; every
  other caller (the webserver's Backfills page, sensors) sees them all.

Not guaranteed: which caller is the daemon is read from the calling module's name, and
which process is the webserver from its main module (`python -m dagster_webserver`, as
`dagster dev` starts it, or the `dagster-webserver` script);
`tests/unit/test_dagster_internals.py` pins it against the installed Dagster.
This module imports only Dagster (and instance_storage, which does too): every process of
the instance (webserver, daemon, run workers) loads it.
"""

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from partition_assets.dagster_internals import BulkActionsFilter, BulkActionStatus, PartitionBackfill
from partition_assets.ids import checked_backfill_id
from partition_assets.instance.storage import instance_storage_defaults

# On a Dagster backfill: who executes it. Set `dagster` at launch (a tag in the dialog) to
# keep Dagster's own daemon for one backfill.
ENGINE_TAG = "partition_assets/engine"
SPARSE, DAGSTER = "sparse", "dagster"
# On a backfill the UI's "Re-execute" created: the one it re-executes.
PARENT_BACKFILL_TAG = "dagster/parent_backfill_id"
# The module whose `get_backfills` calls are Dagster's backfill daemon.
BACKFILL_DAEMON_MODULE = "dagster._daemon.backfill"


# The standby coordinator of this (webserver) process, per (DAGSTER_HOME, engine modules).
_standbys: dict[tuple[str, tuple[str, ...]], subprocess.Popen] = {}


def _in_webserver() -> bool:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return (spec is not None and spec.name.startswith("dagster_webserver")) or Path(sys.argv[0]).name == (
        "dagster-webserver"
    )


def runs_on_engine(backfill: PartitionBackfill) -> bool:
    """Whether the sparse engine (not Dagster's daemon) executes `backfill`."""
    return backfill.tags.get(ENGINE_TAG) == SPARSE


def coordinator_log(home: str, log_name: str) -> Path:
    """Where the detached coordinator of a UI-launched backfill (named by its id) or the
    standby writes its output."""
    return Path(home) / "partition_assets" / "backfills" / f"{checked_backfill_id(log_name)}.log"


class EngineBackfillInstance(dg.DagsterInstance):
    """A DagsterInstance whose UI asset backfills of `engine_modules` run on the sparse engine."""

    def __init__(self, *args: Any, partition_assets: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.engine_modules: list[str] = list((partition_assets or {}).get("engine_modules", []))
        if self.engine_modules and _in_webserver():
            self._keep_standby()

    @classmethod
    def config_schema(cls) -> dict[str, dg.Field]:
        return {
            "partition_assets": dg.Field(
                {"engine_modules": dg.Field([str], is_required=False, default_value=[])}, is_required=False
            )
        }

    @staticmethod
    def config_defaults(base_dir: str) -> Mapping[str, Any]:
        """Dagster's defaults with lighter storage for many small runs (instance/storage.py)."""
        return instance_storage_defaults(base_dir)

    def add_backfill(self, partition_backfill: PartitionBackfill) -> None:
        if not self._adopts(partition_backfill):
            super().add_backfill(partition_backfill)
            return
        super().add_backfill(partition_backfill._replace(tags={**partition_backfill.tags, ENGINE_TAG: SPARSE}))
        self._start_coordinator(partition_backfill.backfill_id)

    def _adopts(self, backfill: PartitionBackfill) -> bool:
        """An asset backfill not marked yet, or the UI's re-execution of an engine backfill
        (it copies its parent's tags); not the record of an engine backfill started elsewhere."""
        if not self.engine_modules or not backfill.is_asset_backfill:
            return False
        engine = backfill.tags.get(ENGINE_TAG)
        return engine is None or (engine == SPARSE and PARENT_BACKFILL_TAG in backfill.tags)

    def _start_coordinator(self, backfill_id: str) -> None:
        if not self._hand_to_standby(backfill_id):
            self._coordinator_process(["adopt", backfill_id], backfill_id, stdin=subprocess.DEVNULL)
        if _in_webserver():
            self._keep_standby()

    def _hand_to_standby(self, backfill_id: str) -> bool:
        """Gives `backfill_id` to this process's standby coordinator, if one is alive."""
        standby = _standbys.pop((self.root_directory, tuple(self.engine_modules)), None)
        if standby is None or standby.poll() is not None or standby.stdin is None:
            return False
        try:
            standby.stdin.write(f"{backfill_id}\n".encode())
            standby.stdin.close()
        except OSError:  # it died meanwhile: a new coordinator takes the backfill
            return False
        return True

    def _keep_standby(self) -> None:
        key = (self.root_directory, tuple(self.engine_modules))
        if key not in _standbys or _standbys[key].poll() is not None:
            # It reads one backfill id on stdin; it exits when stdin closes (this process is gone).
            _standbys[key] = self._coordinator_process(["standby"], "standby", stdin=subprocess.PIPE)

    def _coordinator_process(self, arguments: list[str], log_name: str, stdin: int) -> subprocess.Popen:
        # Detached (own session): the backfill outlives a webserver restart, like a daemon's.
        log = coordinator_log(self.root_directory, log_name)
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as output:
            return subprocess.Popen(
                [sys.executable, "-m", "partition_assets", "backfill", *arguments],
                env={**os.environ, "DAGSTER_HOME": self.root_directory},
                stdin=stdin,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def get_backfills(
        self,
        filters: BulkActionsFilter | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        status: BulkActionStatus | None = None,
    ) -> Sequence[PartitionBackfill]:
        backfills = super().get_backfills(filters=filters, cursor=cursor, limit=limit, status=status)
        if sys._getframe(1).f_globals.get("__name__") == BACKFILL_DAEMON_MODULE:
            return [backfill for backfill in backfills if not runs_on_engine(backfill)]
        return backfills
