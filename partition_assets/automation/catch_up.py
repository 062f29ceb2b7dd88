"""Sensor (b): fill historical gaps through the sparse engine, one backfill at a time.

Dagster's AutomationConditions only look at the newest time window; a partition
missing or failed further back stays so. This sensor finds those gaps — partitions
older than their asset's newest window whose status (the UI's) is missing or failed —
and launches the engine job with `catch_up` over the range that spans them, so the
engine runs exactly the partitions of that range that are not current. It launches
nothing while its previous backfill is still queued or running, and leaves out the
assets a backfill has frozen (they are being rewritten: partition_assets.backfill.publishing.freeze).
"""

import time
import uuid
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

import dagster as dg

from partition_assets.automation.repository import AssetGraph, sensor_asset_graph
from partition_assets.backfill.planning.run_config import backfill_run_config
from partition_assets.backfill.publishing.freeze import frozen_assets
from partition_assets.dagster_betas import asset_selection
from partition_assets.run_tags import BACKFILL_ID_TAG, IN_FLIGHT_STATUSES

CATCH_UP_TAG = "partition_assets/catch_up_sensor"
_NOT_GAPS = {dg.AssetPartitionStatus.MATERIALIZED, dg.AssetPartitionStatus.IN_PROGRESS}


@dataclass(frozen=True)
class Gap:
    asset: dg.AssetKey
    partition: str
    window: dg.TimeWindow


def catch_up_sensor(
    job: dg.JobDefinition,
    selection: str,
    name: str = "catch_up",
    horizon: timedelta | None = None,
    max_parallel: int = 2,
    minimum_interval_seconds: int = 60,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """Launches `job` (a `sparse_backfill_job`) over the gaps of `selection`.

    Args:
        selection: The assets to fill, in Dagster's selection syntax.
        name: The sensor's name; its runs carry it (CATCH_UP_TAG), and it launches nothing while
            one of them is in flight.
        horizon: Limits the search to partitions starting within that time before now; None: all history.
        max_parallel: Bounds the node runs of each backfill.
    """

    @dg.sensor(
        name=name,
        job=job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description=f"Fills missing or failed partitions of {selection} older than the newest window.",
    )
    def _sensor(context: dg.SensorEvaluationContext):
        running = context.instance.get_runs(
            dg.RunsFilter(job_name=job.name, statuses=IN_FLIGHT_STATUSES, tags={CATCH_UP_TAG: name}), limit=1
        )
        if running:
            return dg.SkipReason(f"backfill {running[0].tags.get(BACKFILL_ID_TAG)} is still running")
        asset_graph = sensor_asset_graph(context)
        keys = asset_selection(selection).resolve(asset_graph)
        frozen = {key: backfill for key, backfill in frozen_assets(context.instance).items() if key in keys}
        # Sensor bookkeeping, not asset logic: the horizon is relative to the evaluation.
        since = datetime.fromtimestamp(time.time(), UTC) - horizon if horizon else None
        gaps = historical_gaps(context.instance, asset_graph, keys - frozen.keys(), since)
        named = sorted(f"{key.to_user_string()} ({backfill})" for key, backfill in frozen.items())
        held = f" (left out, frozen by a backfill: {', '.join(named)})" if named else ""
        if not gaps:
            return dg.SkipReason(f"no gaps in {selection}{held}")
        start = min(g.window.start for g in gaps)
        end = max(g.window.end for g in gaps) - timedelta(microseconds=1)  # the engine's end is inclusive
        backfill_id = uuid.uuid4().hex[:12]
        context.log.info(f"{len(gaps)} gaps in {selection} between {start} and {end}: backfill {backfill_id}{held}")
        return dg.RunRequest(
            run_config=backfill_run_config(
                selection=_without(selection, frozen),
                start=start.isoformat(),
                end=end.isoformat(),
                catch_up=True,
                max_parallel=max_parallel,
            ),
            tags={BACKFILL_ID_TAG: backfill_id, CATCH_UP_TAG: name},
        )

    return _sensor


def _without(selection: str, keys: Iterable[dg.AssetKey]) -> str:
    """`selection` minus `keys`, in Dagster's selection syntax."""
    excluded = sorted(f'key:"{key.to_user_string()}"' for key in keys)
    return f"({selection}) and not ({' or '.join(excluded)})" if excluded else selection


def historical_gaps(
    instance: dg.DagsterInstance, asset_graph: AssetGraph, keys: AbstractSet[dg.AssetKey], since: datetime | None = None
) -> list[Gap]:
    """Missing or failed partitions of time-partitioned `keys` (multi included), except each
    asset's newest window (AutomationConditions' domain) and windows starting before `since`."""
    gaps: list[Gap] = []
    for key in sorted(keys, key=lambda k: k.to_user_string()):
        partitions_def = asset_graph.get(key).partitions_def
        windows = _historical_windows(partitions_def)
        if since is not None:
            windows = {k: w for k, w in windows.items() if w.start >= since}
        if not windows or partitions_def is None:
            continue
        status = instance.get_status_by_partition(key, list(windows), partitions_def) or {}
        gaps.extend(Gap(key, k, w) for k, w in windows.items() if status.get(k) not in _NOT_GAPS)
    return gaps


def _historical_windows(partitions_def: dg.PartitionsDefinition | None) -> dict[str, dg.TimeWindow]:
    """Each partition's time window, without the newest window; {} without a time dimension."""
    if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        keys = list(partitions_def.get_partition_keys())[:-1]
        return dict(
            zip(keys, partitions_def.time_windows_for_partition_keys(frozenset(keys), validate=False), strict=True)
        )
    if isinstance(partitions_def, dg.MultiPartitionsDefinition) and partitions_def.has_time_window_dimension:
        dimension = partitions_def.time_window_dimension
        time_def = cast(dg.TimeWindowPartitionsDefinition, dimension.partitions_def)
        time_keys = list(time_def.get_partition_keys())[:-1]
        window_of = {k: time_def.time_window_for_partition_key(k) for k in time_keys}
        return {
            key: window_of[key.keys_by_dimension[dimension.name]]
            for key in partitions_def.get_partition_keys()
            if key.keys_by_dimension[dimension.name] in window_of
        }
    return {}
