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
from datetime import UTC, datetime, timedelta, tzinfo
from typing import cast

import dagster as dg
import numpy as np

from partition_assets.automation.repository import AssetGraph, sensor_asset_graph
from partition_assets.backfill.planning.mapping_memo import MappingMemo
from partition_assets.backfill.planning.missing_parents import missing_parents
from partition_assets.backfill.planning.run_config import backfill_run_config
from partition_assets.backfill.planning.windows import WindowCache, keys_in_window
from partition_assets.backfill.publishing.freeze import frozen_assets
from partition_assets.dagster_betas import asset_selection
from partition_assets.dagster_instance.partition_status import unfinished_partitions
from partition_assets.dagster_instance.provenance_index import materialized_partitions
from partition_assets.run_tags import BACKFILL_ID_TAG, IN_FLIGHT_STATUSES, SKIPPED_TAG, partitions_of_run

CATCH_UP_TAG = "partition_assets/catch_up_sensor"


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
    asset's newest window (AutomationConditions' domain) and windows starting before `since`.

    As `get_status_by_partition` tells them (neither materialized nor in progress), but read as
    sets rather than asked key by key: the materialized partitions from the provenance index,
    the failed and in-progress ones from Dagster's status subsets
    (dagster_instance/partition_status.py), and the windows by arithmetic on an even schedule
    (planning/windows.py). Over years of hours, what a tick costs beyond one pass over the keys
    grows with the gaps, not with the history.

    Raises:
        ProvenanceIndexVersionError: The index was written by a newer release; nothing was written.
    """
    historical: dict[dg.AssetKey, _Historical] = {}
    for key in keys:
        found = _historical(asset_graph.get(key).partitions_def, since)
        if found is not None:
            historical[key] = found
    made = materialized_partitions(instance, historical)
    gaps: list[Gap] = []
    for key in sorted(historical, key=lambda k: k.to_user_string()):
        partitions_def = cast(dg.PartitionsDefinition, asset_graph.get(key).partitions_def)
        failed, in_progress = unfinished_partitions(instance, key, partitions_def)
        current = (made[key] - failed) | in_progress
        partitions, starts, ends, zone = historical[key]
        gaps.extend(
            Gap(
                key,
                partition,
                dg.TimeWindow(datetime.fromtimestamp(starts[i], zone), datetime.fromtimestamp(ends[i], zone)),
                failed=partition in failed,
            )
            for i, partition in enumerate(partitions)
            if partition not in current
        )
    return gaps


_Historical = tuple[list[str], np.ndarray, np.ndarray, tzinfo | None]


def _historical(partitions_def: dg.PartitionsDefinition | None, since: datetime | None) -> _Historical | None:
    """Each partition but those of the newest window and of windows starting before `since`,
    with its window's start and end (epoch seconds) and their time zone; None without a time
    dimension or without such a partition."""
    if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        time_def, dimension = partitions_def, None
    elif isinstance(partitions_def, dg.MultiPartitionsDefinition) and partitions_def.has_time_window_dimension:
        dimension = partitions_def.time_window_dimension
        time_def = cast(dg.TimeWindowPartitionsDefinition, dimension.partitions_def)
    else:
        return None
    first, last = time_def.get_first_partition_window(), time_def.get_last_partition_window()
    if first is None or last is None:
        return None
    start = max(first.start, since, key=lambda d: d.timestamp()) if since else first.start
    if start.timestamp() >= last.start.timestamp():
        return None
    time_keys = keys_in_window(time_def, dg.TimeWindow(start, last.start))  # windows starting in it
    if not time_keys:
        return None
    starts, ends = WindowCache(padding=0).bounds(time_def, time_keys)  # arithmetic on an even schedule
    if dimension is None:
        return time_keys, starts, ends, first.start.tzinfo
    position = {time_key: i for i, time_key in enumerate(time_keys)}
    keys: list[str] = []
    at: list[int] = []
    for key in cast(dg.MultiPartitionsDefinition, partitions_def).get_partition_keys():
        i = position.get(key.keys_by_dimension[dimension.name])
        if i is not None:
            keys.append(key)
            at.append(i)
    return keys, starts[at], ends[at], first.start.tzinfo
