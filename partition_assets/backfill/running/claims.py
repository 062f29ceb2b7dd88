"""What one backfill's coordinator may launch now: the capacity core (capacity.py) fed from
the instance, with the backfill's pause and launch window.

`LaunchGate.allowance()` is what the loop (loop.py) asks before launching: nothing while
the backfill is paused (its stored status) or outside its window; else what the
deployment's capacity (dagster.yaml `partition_assets: backfills:`) leaves it, counted
from the instance's runs queued or in progress:
- a run is a backfill's when its lease proof shows it is an engine backfill's node run
  (dagster_instance/lease_proof.py), or it is a run of Dagster's own backfills (tagged `dagster/backfill`
  without an engine backfill's id); any other run but an engine coordinator run, or one
  recording a backfill's events, is production's, whatever backfill id its tags carry;
- a run's pools are those of the assets it materializes (`pool=` on the asset);
- the running backfills claiming capacity are the records in the running status whose
  coordinator is live (backfill/state/presence.py), and the asking one: a backfill whose
  coordinator died (or has not announced itself yet) launches nothing, so it holds no share.
Local and launched node runs alike are counted, as both are runs in the instance.

Not guaranteed: the allowance is decided again at most once a second (`REFRESH_SECONDS`),
not before every launch; see capacity.py for what a snapshot allows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.planning.run_config import ENGINE_JOB
from partition_assets.backfill.publishing.dagster_events import REPORTING_JOB_PREFIX
from partition_assets.backfill.running.capacity import (
    STOPPED,
    UNLIMITED,
    Allowance,
    BackfillCapacity,
    Claimant,
    Load,
    allowance,
    fewer_runs_reason,
)
from partition_assets.backfill.state.presence import live_coordinators
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.code_location import load_definitions
from partition_assets.dagster_instance.lease_proof import proven_backfills
from partition_assets.dagster_internals import BaseAssetGraph
from partition_assets.errors import CapacityConfigError
from partition_assets.run_tags import IN_FLIGHT_STATUSES, is_backfill_run

# How long an allowance is reused before the instance is read again.
REFRESH_SECONDS = 1.0
# The dagster.yaml section of the capacity, under `partition_assets:`.
SETTINGS_KEY = "backfills"


def capacity_of(instance: dg.DagsterInstance) -> BackfillCapacity:
    """The backfill capacity `instance`'s dagster.yaml declares (no caps when it declares none).

    Raises:
        CapacityConfigError: The declaration is invalid; nothing was launched.
    """
    settings: Mapping[str, Any] = getattr(instance, "partition_assets_settings", {}) or {}
    return BackfillCapacity.from_settings(settings.get(SETTINGS_KEY))


def asset_pools(asset_graph: BaseAssetGraph) -> dict[dg.AssetKey, str]:
    """The Dagster pool of each asset of `asset_graph` whose op names one (`pool=`); an
    asset whose ops name several counts in the first by name."""
    return {node.key: min(node.pools) for node in asset_graph.asset_nodes if node.pools}


def is_production(run: dg.DagsterRun, node_run_of: str | None) -> bool:
    """Whether `run` is production's: not a node run of an engine backfill (`node_run_of`: the
    backfill its lease proof proves, dagster_instance/lease_proof.py `proven_backfills`), not a run of a
    Dagster backfill, not an engine coordinator run nor one recording a backfill's events. A
    run that only carries an engine backfill's id tag (typed, copied by a re-execution, left
    from a finished backfill) is production's: the tag claims a backfill, only the proof shows one."""
    if run.job_name == ENGINE_JOB or run.job_name.startswith(REPORTING_JOB_PREFIX):
        return False
    return not is_backfill_run(run.tags, node_run_of)


def instance_load(
    instance: dg.DagsterInstance, pools: Mapping[dg.AssetKey, str], backfill_id: str, pool_names: set[str]
) -> Load:
    """What runs in `instance` now (see the module docstring), `backfill_id`'s own runs not
    counted in the pools (its coordinator counts those as it launches them)."""
    production = 0
    production_pools: dict[str, int] = {}
    other_pools: dict[str, int] = {}
    records = instance.get_run_records(dg.RunsFilter(statuses=IN_FLIGHT_STATUSES))
    node_runs = proven_backfills(instance, records, bind=False)
    for record in records:
        run, node_run_of = record.dagster_run, node_runs.get(record.dagster_run.run_id)
        run_pools = {pools[key] for key in run.asset_selection or () if key in pools}
        if is_production(run, node_run_of):
            production += 1
            counted = production_pools
        elif node_run_of != backfill_id:  # another backfill's (a coordinator run materializes nothing)
            counted = other_pools
        else:
            continue
        for pool in run_pools:
            counted[pool] = counted.get(pool, 0) + 1
    return Load(
        production_runs=production,
        production_pool_runs=production_pools,
        other_backfill_pool_runs=other_pools,
        pool_limits=pool_limits(instance, pool_names),
        max_concurrent_runs=max_concurrent_runs(instance),
    )


def pool_limits(instance: dg.DagsterInstance, names: set[str]) -> dict[str, int]:
    """The slot limit of each pool of `names` that has one in `instance` (set with
    `dagster instance concurrency set`, or the instance's default pool limit)."""
    limits = {}
    for name in names:
        limit = instance.event_log_storage.get_concurrency_info(name).limit
        if limit is not None:
            limits[name] = limit
    return limits


def max_concurrent_runs(instance: dg.DagsterInstance) -> int | None:
    """The instance's run queue limit (a QueuedRunCoordinator's `max_concurrent_runs`); None without one."""
    if not isinstance(instance.run_coordinator, dg.QueuedRunCoordinator):
        return None
    queue = instance.get_concurrency_config().run_queue_config
    limit = queue.max_concurrent_runs if queue is not None else None
    return limit if limit is not None and limit >= 0 else None


def claimants(instance: dg.DagsterInstance, store: BackfillStore, asking: BackfillRecord | None) -> list[Claimant]:
    """The backfills claiming capacity, oldest first: those running whose coordinator is
    live, and `asking` (the caller's own backfill, if any) whatever its status.

    Raises:
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
    """
    live = live_coordinators(instance, store.versions_in({BackfillStatus.RUNNING}))
    found = []
    for backfill_id in store.ids():
        if asking is not None and backfill_id == asking.id:
            found.append(Claimant(asking.id, asking.spec.priority, asking.spec.max_parallel))
        elif backfill_id in live:
            spec = store.load(backfill_id).spec
            found.append(Claimant(backfill_id, spec.priority, spec.max_parallel))
    return found


def fewer_runs_note(instance: dg.DagsterInstance, record: BackfillRecord) -> str | None:
    """Why `record`'s backfill may run fewer runs now than its --max-parallel
    (capacity.fewer_runs_reason, from the instance's runs and capacity as they are now, its
    own claim counted even before it is saved); None when it gets them all, or when the
    capacity is invalid (its coordinator refuses it before launching anything)."""
    try:
        capacity = capacity_of(instance)
    except CapacityConfigError:
        return None
    pools = asset_pools(load_definitions(record.spec.module).resolve_asset_graph())
    load = instance_load(instance, pools, record.id, set(pools.values()))
    claiming = claimants(instance, record.store, record)
    if all(claimant.backfill_id != record.id for claimant in claiming):  # not saved yet: the newest
        claiming.append(Claimant(record.id, record.spec.priority, record.spec.max_parallel))
    return fewer_runs_reason(capacity, load, claiming, record.id)


class LaunchGate:
    """What the backfill `record` may launch now (see the module docstring), decided again
    at most every REFRESH_SECONDS; `now` is the clock windows are read on."""

    def __init__(
        self,
        instance: dg.DagsterInstance,
        record: BackfillRecord,
        capacity: BackfillCapacity,
        pools: Mapping[dg.AssetKey, str],
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._instance = instance
        self._record = record
        self._capacity = capacity
        self._pools = dict(pools)
        self._window = record.spec.launch_window()
        self._now = now
        self._decided: Allowance = UNLIMITED
        self._decided_at: float | None = None

    @property
    def pools(self) -> dict[dg.AssetKey, str]:
        """The Dagster pool of each asset that names one."""
        return self._pools

    def allowance(self) -> Allowance:
        """What the backfill may run now."""
        if self._decided_at is not None and time.monotonic() - self._decided_at < REFRESH_SECONDS:
            return self._decided
        self._decided = self._decide()
        self._decided_at = time.monotonic()
        return self._decided

    def _decide(self) -> Allowance:
        if self._record.stored_status() == BackfillStatus.PAUSED:
            return STOPPED
        if self._window is not None and not self._window.is_open(self._now()):
            return STOPPED
        names = set(self._pools.values())
        if not (self._capacity.caps_runs() or names or max_concurrent_runs(self._instance) is not None):
            return UNLIMITED  # nothing could limit it: the instance's runs need not be read
        load = instance_load(self._instance, self._pools, self._record.id, names)
        claiming = claimants(self._instance, self._record.store, self._record)
        return allowance(self._capacity, load, claiming, self._record.id, sorted(names))
