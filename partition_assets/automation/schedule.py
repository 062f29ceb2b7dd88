"""Scheduled runs with a rolling lookback and the partitions a cron skips: `partitioned_schedule`.

A tick is evaluated at its scheduled time (`context.scheduled_execution_time`), never
at the wall clock, so the same tick always requests the same partitions. It requests,
of the time partitions of its selection:

- the newest partition: the newest one the partitions definition has at the tick
  (Dagster's `get_last_partition_window` as of the tick). With the default end offset
  that is the newest window that has ended by then, in the definition's `tz`; `data_lag=N`
  (Dagster's `end_offset=-N`) moves it N windows back; a definition with `end_offset=1`
  includes the window still in progress (the reference reading's "the key of the day the
  job runs", e.g. a day's file that lands that morning). Example: daily partitions in
  Europe/Berlin and a tick at 2024-03-05 02:00 Berlin time request 2024-03-04; with
  `data_lag=1`, 2024-03-03. A tick at 00:30 Berlin (23:30 UTC the day before) is still
  read in Berlin: the day that ended 30 minutes earlier is the newest;
- with `lookback=N`, the N partitions before the newest, of the definition's grain
  (N hours for hourly assets, N days for daily ones), never before the first partition;
- with `collect_gaps`, every partition newer than the newest partition at the previous
  cron fire: those that became available while the cron did not fire (a Monday–Friday
  cron collects Saturday and Sunday on Monday). Stateless: computed from the cron and the
  tick alone, as in the reference reading; an hourly asset on a daily cron collects the
  day's hours.

Both extensions end at the newest partition, so the union is one contiguous range. For
multi-partitioned assets these are keys of the time dimension, each run with every key
of the other dimension (a dynamic one: its keys on the instance at the tick).

Runs. Every run holds all the selected assets (Dagster orders them inside the run). The
range is cut into chunks of the selection's smallest backfill batch (the sparse engine's
`max_batch_of`: `BackfillPolicy.single_run()` takes the whole range, `multi_run(n)` n
partitions, no policy or a multi-partitioned asset one): a chunk of one partition is a
partition run, a longer one a range run (run tags `dagster/asset_partition_range_start`
/ `_end`). Run keys name the tick, so a tick evaluated twice launches its runs once.

Overlapping ticks are serialized. Every write outside a backfill holds a run lease on
its partitions (partition_assets.storage.leases), so two concurrent writes of the same
partition cannot interleave: the later one fails with PartitionLeasedError, nothing
written. That alone is not enough for a lookback: the lease covers one write, not the
run, so a slow run of an earlier tick could write its (older) restatement after a later
tick's run wrote a newer one, or the later run could fail on the lease and leave its new
partition unwritten. So a tick skips while a run of the same schedule is queued or
running, and the next tick that launches also requests every partition of the ticks
skipped that way (the cron fires after the last launched tick and before its runs
ended, read from the instance by the run tags `SCHEDULE_TAG` and `TICK_TAG`).

Not guaranteed: a failed run is not retried (the next ticks' lookback, or the catch-up
sensor, restates it); fires missed while the schedule was stopped or the daemon was down
are not collected (only `collect_gaps` extends a tick, from the cron); the selection is
resolved and checked at each tick, against the code location that serves the schedule.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, cast

import dagster as dg

from partition_assets.automation.switch import default_schedule_status
from partition_assets.backfill.planning.graph import max_batch_of
from partition_assets.dagster_betas import asset_selection

# Dagster's own cron arithmetic (the schedule daemon's), so ticks and fires agree with it.
from partition_assets.dagster_internals import is_valid_cron_string, reverse_cron_string_iterator
from partition_assets.errors import PartitionScheduleError
from partition_assets.partitions.definitions import check_timezone
from partition_assets.run_tags import IN_FLIGHT_STATUSES, range_tags

if TYPE_CHECKING:
    from partition_assets.dagster_internals import AssetGraph, BaseAssetNode

SCHEDULE_TAG = "partition_assets/schedule"  # the schedule's name, on each run it requests
TICK_TAG = "partition_assets/schedule_tick"  # the tick (ISO time) that requested the run
# On a run that was in flight at later ticks: those ticks (ISO times, comma-separated), which skipped.
SKIPPED_TICKS_TAG = "partition_assets/schedule_skipped_ticks"


def partitioned_schedule(
    selection: str | dg.AssetSelection,
    cron: str,
    *,
    lookback: int = 0,
    collect_gaps: bool = False,
    name: str = "partitioned_schedule",
    execution_timezone: str = "UTC",
    default_status: dg.DefaultScheduleStatus | None = None,
) -> dg.ScheduleDefinition:
    """A schedule that runs `selection`'s newest partition, the `lookback` partitions before it
    and, with `collect_gaps`, those the `cron` skipped (see the module docstring).

    `cron` fires in `execution_timezone`; partitions are read in their definition's `tz`.
    A selection without one common time partitions definition fails its ticks with
    PartitionScheduleError.

    Args:
        default_status: STOPPED unless `PARTITION_ASSETS_SENSORS` names the schedule
            (partition_assets.automation.switch).

    Raises:
        PartitionScheduleError: `cron` is not a valid cron string, or `lookback` is not a whole
            number >= 0; nothing was scheduled.
        PartitionDefinitionError: `execution_timezone` is no IANA timezone name.
    """
    if not isinstance(cron, str) or not is_valid_cron_string(cron):
        raise PartitionScheduleError(
            f"schedule {name}: cron {cron!r} is not a valid cron string: use five fields, "
            "minute hour day-of-month month day-of-week, e.g. '0 6 * * 1-5'. Nothing was scheduled."
        )
    if isinstance(lookback, bool) or not isinstance(lookback, int) or lookback < 0:
        raise PartitionScheduleError(
            f"schedule {name}: lookback {lookback!r} must be a whole number of partitions >= 0 "
            "(how many partitions before the newest each tick re-runs), e.g. lookback=3. Nothing was scheduled."
        )
    check_timezone(execution_timezone)
    target = asset_selection(selection) if isinstance(selection, str) else selection
    plan = TickPlan(cron, execution_timezone, lookback, collect_gaps)

    @dg.schedule(
        cron_schedule=cron,
        target=target,
        name=name,
        execution_timezone=execution_timezone,
        default_status=default_status or default_schedule_status(name),
        description=(
            f"Runs the newest partition of {selection}, the {lookback} before it"
            f"{' and the partitions the cron skipped' if collect_gaps else ''}; "
            "skips while its previous runs are in flight."
        ),
    )
    def _schedule(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest] | dg.SkipReason:
        # Dagster refuses to evaluate without one: the wall clock is never read.
        tick = context.scheduled_execution_time
        repository = context.repository_def
        assert repository is not None, "a schedule is evaluated inside its code location"
        selected = SelectedAssets.resolve(target, repository.asset_graph, name)
        in_flight = context.instance.get_runs(
            dg.RunsFilter(tags={SCHEDULE_TAG: name}, statuses=IN_FLIGHT_STATUSES), limit=1
        )
        if in_flight:
            run = in_flight[0]
            # Recorded on the run that blocked it, where the next launching tick looks.
            skipped = sorted({*_skipped_ticks(run), tick})
            context.instance.add_run_tags(run.run_id, {SKIPPED_TICKS_TAG: ",".join(t.isoformat() for t in skipped)})
            return dg.SkipReason(
                f"run {run.run_id} of tick {run.tags.get(TICK_TAG)} is still {run.status.value.lower()}: "
                f"the next tick that launches also requests this tick's partitions ({tick.isoformat()})"
            )
        ticks = [*_skipped_since_last_launch(context.instance, name, tick), tick]
        windows = plan.windows_of_ticks(selected.time_def, ticks)
        if not windows:
            return dg.SkipReason(f"no partition of {selection} is complete at {tick.isoformat()}")
        tags = {SCHEDULE_TAG: name, TICK_TAG: tick.isoformat()}
        return selected.run_requests(windows, tags, context.instance)

    return _schedule


@dataclass(frozen=True)
class TickPlan:
    """Which time windows a tick requests: the pure part of a schedule, from the cron and the tick."""

    cron: str
    timezone: str
    lookback: int
    collect_gaps: bool

    def previous_fire(self, tick: datetime) -> datetime:
        """The latest fire of the cron strictly before `tick`."""
        return next(f for f in reverse_cron_string_iterator(tick.timestamp(), self.cron, self.timezone) if f < tick)

    def windows(self, time_def: dg.TimeWindowPartitionsDefinition, tick: datetime) -> list[dg.TimeWindow]:
        """The windows one tick requests, oldest first; [] before the first partition is complete."""
        newest = _last_window(time_def, tick)
        if newest is None:
            return []
        before = _last_window(time_def, self.previous_fire(tick)) if self.collect_gaps else None
        found = [newest]
        for count, window in enumerate(_earlier_windows(time_def, newest)):
            in_lookback = count < self.lookback
            in_gap = self.collect_gaps and (before is None or window.start > before.start)
            if not (in_lookback or in_gap):
                break
            found.append(window)
        return found[::-1]

    def windows_of_ticks(
        self, time_def: dg.TimeWindowPartitionsDefinition, ticks: Sequence[datetime]
    ) -> list[dg.TimeWindow]:
        """The union of what each tick requests, oldest first."""
        union = {w.start: w for tick in ticks for w in self.windows(time_def, tick)}
        return [union[start] for start in sorted(union)]


def _skipped_ticks(run: dg.DagsterRun) -> set[datetime]:
    """The ticks that skipped while `run` was in flight."""
    text = run.tags.get(SKIPPED_TICKS_TAG, "")
    return {datetime.fromisoformat(t) for t in text.split(",") if t}


def _skipped_since_last_launch(instance: dg.DagsterInstance, name: str, tick: datetime) -> list[datetime]:
    """The ticks before `tick` that skipped while the runs of the schedule's last launched
    tick were in flight; [] when it launched nothing yet."""
    last = instance.get_runs(dg.RunsFilter(tags={SCHEDULE_TAG: name}), limit=1)
    if not last or TICK_TAG not in last[0].tags:
        return []
    runs = instance.get_runs(dg.RunsFilter(tags={SCHEDULE_TAG: name, TICK_TAG: last[0].tags[TICK_TAG]}))
    return sorted(t for run in runs for t in _skipped_ticks(run) if t < tick)


def _last_window(time_def: dg.TimeWindowPartitionsDefinition, at: datetime) -> dg.TimeWindow | None:
    """The definition's newest window as of `at` (its end offset, i.e. data_lag, applied)."""
    with dg.partition_loading_context(at):
        return time_def.get_last_partition_window()


def _earlier_windows(time_def: dg.TimeWindowPartitionsDefinition, window: dg.TimeWindow) -> Iterator[dg.TimeWindow]:
    """The windows before `window`, newest first, down to the first partition."""
    previous = time_def.get_prev_partition_window(window.start)
    while previous is not None:
        yield previous
        previous = time_def.get_prev_partition_window(previous.start)


@dataclass(frozen=True)
class SelectedAssets:
    """The assets a tick runs, sharing one partitions definition with a time dimension."""

    keys: list[dg.AssetKey]
    partitions_def: dg.PartitionsDefinition
    nodes: dict[dg.AssetKey, BaseAssetNode]  # for their backfill policies

    @property
    def time_def(self) -> dg.TimeWindowPartitionsDefinition:
        if isinstance(self.partitions_def, dg.MultiPartitionsDefinition):
            return cast(dg.TimeWindowPartitionsDefinition, self.partitions_def.time_window_dimension.partitions_def)
        return cast(dg.TimeWindowPartitionsDefinition, self.partitions_def)

    @classmethod
    def resolve(cls, target: dg.AssetSelection, asset_graph: AssetGraph, name: str) -> SelectedAssets:
        """Raises PartitionScheduleError unless `target` selects materializable assets that all
        share one partitions definition with a time dimension.

        Args:
            name: The schedule's name, for the message.

        Raises:
            PartitionScheduleError: `target` selects no materializable asset, an asset without a
                time dimension, or assets of several partitions definitions; nothing was requested.
        """
        keys = sorted(
            (k for k in target.resolve(asset_graph) if asset_graph.get(k).is_materializable),
            key=lambda k: k.to_user_string(),
        )
        if not keys:
            raise PartitionScheduleError(
                f"schedule {name}: its selection selects no materializable asset: "
                "select at least one time-partitioned asset. Nothing was requested."
            )
        untimed = [k.to_user_string() for k in keys if not _has_time_dimension(asset_graph.get(k).partitions_def)]
        if untimed:
            raise PartitionScheduleError(
                f"schedule {name}: assets {untimed} have no time partitions, and a partitioned schedule "
                "requests time partitions: leave them out of the selection (a sensor or a plain schedule "
                "runs them). Nothing was requested."
            )
        by_definition: dict[dg.PartitionsDefinition, list[str]] = {}
        for key in keys:
            partitions_def = cast(dg.PartitionsDefinition, asset_graph.get(key).partitions_def)  # has time: not None
            by_definition.setdefault(partitions_def, []).append(key.to_user_string())
        if len(by_definition) > 1:
            groups = "; ".join(f"{assets}: {_describe(d)}" for d, assets in by_definition.items())
            raise PartitionScheduleError(
                f"schedule {name}: its assets have {len(by_definition)} different partitions definitions "
                f"({groups}), and each run covers one: make one schedule per partitions definition. "
                "Nothing was requested."
            )
        return cls(keys, next(iter(by_definition)), {key: asset_graph.get(key) for key in keys})

    def run_requests(
        self, windows: list[dg.TimeWindow], tags: dict[str, str], instance: dg.DagsterInstance
    ) -> list[dg.RunRequest]:
        """Runs covering `windows`: range runs as the backfill policies allow, else one per partition.

        Args:
            tags: The tags of every run; they must hold TICK_TAG, which the run keys name.
        """
        tick = tags[TICK_TAG]
        if isinstance(self.partitions_def, dg.MultiPartitionsDefinition):
            time_dimension = self.partitions_def.time_window_dimension.name
            other = next(d for d in self.partitions_def.partitions_defs if d.name != time_dimension)
            other_keys = other.partitions_def.get_partition_keys(dynamic_partitions_store=instance)
            return [
                self._request([dg.MultiPartitionKey({time_dimension: t, other.name: o})], tick, tags)
                for t in self._time_keys(windows)
                for o in other_keys
            ]
        requests: list[dg.RunRequest] = []
        for segment in _contiguous(windows):
            keys = self._time_keys(segment)
            batch = min(max_batch_of(self.nodes[key], len(keys)) for key in self.keys)
            requests.extend(self._request(keys[i : i + batch], tick, tags) for i in range(0, len(keys), batch))
        return requests

    def _time_keys(self, windows: list[dg.TimeWindow]) -> list[str]:
        return [self.time_def.get_partition_key_for_timestamp(w.start.timestamp()) for w in windows]

    def _request(self, keys: list[str], tick: str, tags: dict[str, str]) -> dg.RunRequest:
        if len(keys) == 1:
            return dg.RunRequest(
                run_key=f"{tick}:{keys[0]}", asset_selection=self.keys, partition_key=keys[0], tags=tags
            )
        first, last = keys[0], keys[-1]
        return dg.RunRequest(
            run_key=f"{tick}:{first}...{last}", asset_selection=self.keys, tags={**tags, **range_tags(first, last)}
        )


def _contiguous(windows: list[dg.TimeWindow]) -> list[list[dg.TimeWindow]]:
    """`windows` (oldest first) cut where one does not end where the next starts: a range run
    covers every partition between its ends."""
    segments: list[list[dg.TimeWindow]] = []
    for window in windows:
        if segments and segments[-1][-1].end == window.start:
            segments[-1].append(window)
        else:
            segments.append([window])
    return segments


def _describe(partitions_def: dg.PartitionsDefinition) -> str:
    """Dagster's description of a partitions definition, on one line."""
    return " ".join(str(partitions_def).split()).rstrip(".")


def _has_time_dimension(partitions_def: dg.PartitionsDefinition | None) -> bool:
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        return partitions_def.has_time_window_dimension
    return isinstance(partitions_def, dg.TimeWindowPartitionsDefinition)
