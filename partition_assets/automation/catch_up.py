"""Sensor (b): fill historical gaps through the sparse engine, one backfill at a time.

Dagster's AutomationConditions only look at the newest time window; a partition
missing or failed further back stays so. This sensor finds those gaps — partitions
older than their asset's newest window whose status (the UI's) is missing or failed —
and launches the engine job with `catch_up` over the range that spans them, so the
engine runs exactly the partitions of that range that are not current. It launches
nothing while its previous backfill is still queued or running, and leaves out the
assets a backfill has frozen (they are being rewritten: partition_assets.backfill.publishing.freeze).

It also leaves out the gaps no backfill would fill, and says which in its tick's message:
- a partition that reads a parent partition that does not exist (a daily asset reading this
  month's monthly partition, not there until the month ends): the engine refuses to plan it,
  as Dagster's backfill does (planning/missing_parents.py), so the range it launches ends
  before the first such partition of any selected asset; the gaps after it wait for a later tick;
- a partition that was never materialized because its latest run yielded no output, or read
  one that was not produced (running/skips.py): run again it would skip again. Dagster's
  automation requests a missing partition once (`AutomationCondition.on_missing()` waits
  until it is handled), not at every tick. A backfill run by hand with `--catch-up` plans it
  again, as Dagster's "materialize missing" does.

Not guaranteed: a gap overlapping, in time, one that reads a missing parent (of a coarser
asset) waits as long as that one does; a partition skipped once is filled again only by a
backfill run by hand (or when a range launched for other gaps spans it), even when it was
materialized since and then wiped (a retract).
"""

import time
import uuid
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

import dagster as dg

from partition_assets.automation.repository import AssetGraph, sensor_asset_graph
from partition_assets.backfill.planning.mapping_memo import MappingMemo
from partition_assets.backfill.planning.missing_parents import missing_parents
from partition_assets.backfill.planning.run_config import backfill_run_config
from partition_assets.backfill.publishing.freeze import frozen_assets
from partition_assets.dagster_betas import asset_selection
from partition_assets.run_tags import BACKFILL_ID_TAG, IN_FLIGHT_STATUSES, SKIPPED_TAG, partitions_of_run

CATCH_UP_TAG = "partition_assets/catch_up_sensor"
_NOT_GAPS = {dg.AssetPartitionStatus.MATERIALIZED, dg.AssetPartitionStatus.IN_PROGRESS}


@dataclass(frozen=True)
class Gap:
    asset: dg.AssetKey
    partition: str
    window: dg.TimeWindow
    failed: bool = False  # its latest run failed (else it was never materialized)


@dataclass(frozen=True)
class LeftOut:
    """The gaps a catch-up leaves out (see the module), and why."""

    skipped: list[Gap]  # never materialized: their latest run yielded no output, or read one not produced
    missing_parents: list[Gap]  # they read parent partitions that do not exist
    later: list[Gap]  # after a gap that reads a missing parent: a later tick fills them

    def __str__(self) -> str:
        parts = [
            f"{len(gaps)} {what}: {_named(gaps)}"
            for gaps, what in (
                (self.skipped, "whose latest run yielded no output (run again, they would skip again)"),
                (self.missing_parents, "reading parent partitions that do not exist (the engine refuses them)"),
                (self.later, "after those, for a later tick"),
            )
            if gaps
        ]
        return f" (left out: {'; '.join(parts)})" if parts else ""


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
        all_gaps = historical_gaps(context.instance, asset_graph, keys - frozen.keys(), since)
        gaps, left_out = fillable_gaps(context.instance, asset_graph, all_gaps)
        named = sorted(f"{key.to_user_string()} ({backfill})" for key, backfill in frozen.items())
        held = f" (left out, frozen by a backfill: {', '.join(named)})" if named else ""
        held += str(left_out)
        if not gaps:
            return dg.SkipReason(f"no gaps {'to fill ' if all_gaps else ''}in {selection}{held}")
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


def fillable_gaps(
    instance: dg.DagsterInstance, asset_graph: AssetGraph, gaps: Sequence[Gap]
) -> tuple[list[Gap], LeftOut]:
    """The `gaps` one catch-up backfill fills, and those it leaves out (see the module): those
    skipped by their latest run (or behind one that was), those reading a missing parent, and
    those after the first of these in time (the engine plans every selected asset over the
    range it is given, and refuses a range holding a partition whose parent does not exist)."""
    memo = MappingMemo(instance)
    by_asset: dict[dg.AssetKey, list[Gap]] = {}
    for gap in gaps:
        by_asset.setdefault(gap.asset, []).append(gap)
    orphans = {
        (key, reader)
        for key, asset_gaps in by_asset.items()
        for readers, _ in missing_parents(asset_graph, key, [g.partition for g in asset_gaps], memo).values()
        for reader in readers
    }
    skipped = _skipped(instance, asset_graph, by_asset, memo)
    without_parents = [gap for gap in gaps if (gap.asset, gap.partition) in orphans]
    left = orphans | skipped
    runnable = [gap for gap in gaps if (gap.asset, gap.partition) not in left]
    start = min((gap.window.start for gap in runnable), default=None)
    cut = min(
        (max(gap.window.start, start) for gap in without_parents if start is not None and gap.window.end > start),
        default=None,
    )
    fillable = [gap for gap in runnable if cut is None or gap.window.end <= cut]
    left_out = LeftOut(
        skipped=[gap for gap in gaps if (gap.asset, gap.partition) in skipped],
        missing_parents=without_parents,
        later=[gap for gap in runnable if gap not in fillable],
    )
    return fillable, left_out


def _skipped(
    instance: dg.DagsterInstance, asset_graph: AssetGraph, gaps: dict[dg.AssetKey, list[Gap]], memo: MappingMemo
) -> set[tuple[dg.AssetKey, str]]:
    """The never-materialized (not failed) partitions among `gaps` that a run succeeded without
    (SKIPPED_TAG), and those reading one of these or any partition such a run skipped (the
    engine skipped them without a run, as Dagster skips the step). Only a parent with skipped
    partitions has its mapping asked."""
    runs = instance.get_runs(dg.RunsFilter(tags={SKIPPED_TAG: "true"}, statuses=[dg.DagsterRunStatus.SUCCESS]))
    skipped: dict[dg.AssetKey, set[str]] = {}
    for run in runs:
        for key in run.asset_selection or ():
            if asset_graph.has(key):
                skipped.setdefault(key, set()).update(partitions_of_run(run, asset_graph.get(key).partitions_def))
    found: set[tuple[dg.AssetKey, str]] = set()
    for key in asset_graph.toposorted_asset_keys:  # parents first: a child reads what they skipped
        node = asset_graph.get(key)
        parents = [parent for parent in node.parent_keys if parent in skipped]
        for gap in gaps.get(key, ()):
            if gap.failed:
                continue
            if gap.partition in skipped.get(key, ()) or any(
                upstream in skipped[parent]
                for parent in parents
                for upstream in memo.upstream_keys(
                    asset_graph.get_partition_mapping(key, parent),
                    node.partitions_def,
                    gap.partition,
                    asset_graph.get(parent).partitions_def,
                )
            ):
                found.add((key, gap.partition))
                skipped.setdefault(key, set()).add(gap.partition)  # its children read nothing of it
    return found


def _named(gaps: Sequence[Gap]) -> str:
    """The first few gaps, by asset and partition."""
    shown = ", ".join(f"{gap.asset.to_user_string()} {gap.partition}" for gap in gaps[:_SHOWN])
    return shown if len(gaps) <= _SHOWN else f"{shown}, ..."


_SHOWN = 5


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
        gaps.extend(
            Gap(key, k, w, failed=status.get(k) == dg.AssetPartitionStatus.FAILED)
            for k, w in windows.items()
            if status.get(k) not in _NOT_GAPS
        )
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
