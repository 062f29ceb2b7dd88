"""Sensor (a): request a downstream partition as soon as all of its inputs are materialized.

Latency. Dagster's sensor daemon evaluates sensors in a loop that waits until 5 s have
passed since the loop began (`MIN_INTERVAL_LOOP_TIME` in dagster/_daemon/sensor.py),
whatever a sensor's `minimum_interval_seconds` (default 30 s). A tick of this sensor
therefore watches the event log for up to those 5 s, polling every 0.25 s: a tick that
used its 5 s is followed at once by the next. A tick that finds work returns it once
the work's first event is `hold_seconds` (2 s) old, or the tick is: returning at once
would leave the daemon idle for the rest of its 5 s loop, and an event landing then
would wait that long; holding caps both waits near 2 s (plus the daemon's creation of
the runs), and events arriving meanwhile join the same tick.

A partition is requested when, for every parent, each partition its mapping names is
materialized, and it is not current: its own latest materialization is older than one
of those inputs' (or missing), no run in flight targets it, and neither its asset nor
a parent is frozen by a backfill (being rewritten: see partition_assets.backfill.publishing.freeze).
A partition held by a run in flight or a freeze waits in the cursor and is decided
again on later ticks, so it runs once the run is done or the backfill unfreezes, if it
is still not current then. Each request's run key
names the input version, so the same inputs never request it twice. Ready partitions
with the same key and partitions definition share one run.

Events that show up out of storage id order are still read, once. PostgreSQL numbers a
row before its transaction commits, so an event may commit after a higher-numbered one
was read; and Dagster records an asset's latest materialization (by which this sensor
picks the assets to query) in a second transaction after the event's own, so on any
instance an event may show up to the sensor after higher-numbered ones. So the cursor
keeps the highest storage id read (`after`) and, for the `rescan_ids` ids below it
(1000 by default), the ids of the materializations read there (`seen`): each read
queries that window again and acts only on the materializations not seen. A cursor
written before the window existed still parses: it counts as having read every id up
to its `after`.

Not guaranteed: an event that shows up only after the sensor read an id `rescan_ids`
or more above its own (a writer stalled that long between numbering the event and
committing it or its asset row) is skipped. The partitions it would have requested wait
for a later event that names them; the catch-up sensor fills only missing or failed
partitions, so a partition left stale by it is not refreshed.
"""

import json
import time
from collections.abc import Collection, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import dagster as dg

from partition_assets.automation.repository import AssetGraph, sensor_asset_graph
from partition_assets.backfill.publishing.freeze import frozen_assets
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.dagster_betas import asset_selection
from partition_assets.dagster_instance.lease_proof import proven_backfills
from partition_assets.errors import PartitionAssetsError, SensorConfigError
from partition_assets.run_tags import IN_FLIGHT_STATUSES, dagster_backfill_of, partitions_of_run

WATCH_SECONDS = 5.0
HOLD_SECONDS = 2.0
POLL_SECONDS = 0.25
RESCAN_IDS = 1000
TRIGGER_TAG = "partition_assets/triggered_by"

Target = tuple[dg.AssetKey, str | None]  # (asset, partition); None when unpartitioned


def eager_partitions_sensor(
    selection: str | dg.AssetSelection,
    name: str = "eager_partitions",
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
    watch_seconds: float = WATCH_SECONDS,
    hold_seconds: float = HOLD_SECONDS,
    rescan_ids: int = RESCAN_IDS,
) -> dg.SensorDefinition:
    """Requests partitions of `selection` whose upstream partitions just completed their inputs.

    Args:
        watch_seconds: How long one tick watches the event log for new materializations.
        hold_seconds: A tick that finds work returns it once the work's first event, or the tick
            itself, is this old (see the module docstring).
        rescan_ids: How many storage ids below the highest one read are read again for events
            that show up late (see the module docstring).

    Raises:
        SensorConfigError: `rescan_ids` is not a whole number of at least 1.
    """
    if isinstance(rescan_ids, bool) or not isinstance(rescan_ids, int) or rescan_ids < 1:
        raise SensorConfigError(
            f"rescan_ids={rescan_ids!r} is not a whole number of at least 1: it is how many storage ids below the "
            f"highest one read each tick reads again for late events; pass e.g. {RESCAN_IDS}. No sensor was defined."
        )
    target = asset_selection(selection) if isinstance(selection, str) else selection

    @dg.sensor(
        name=name,
        # `asset_selection`, not `target`: each run goes to the implicit job of its asset, so
        # the selection may mix partitions definitions.
        asset_selection=target,
        minimum_interval_seconds=1,
        default_status=default_status,
        description="Requests each downstream partition once all its upstream partitions are materialized.",
    )
    def _sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        started = time.time()
        asset_graph = sensor_asset_graph(context)
        watcher = _Watcher(context.instance, asset_graph, target.resolve(asset_graph), rescan_ids)
        read, pending = _parse_cursor(context.cursor, watcher)
        requests, pending = watcher.decide(pending)  # these waited for a run: no hold
        candidates: set[Target] = set()
        release = None  # when to return the work found so far
        while not requests:
            events, read = watcher.materializations_after(read)
            if events:
                candidates |= watcher.children_of(events)
                if release is None and watcher.decide(candidates | pending)[0]:
                    release = min(started, *(e.timestamp for e in events)) + hold_seconds
            now = time.time()
            if (release is not None and now >= release) or now >= started + watch_seconds:
                if candidates:
                    requests, pending = watcher.decide(candidates | pending)
                break
            time.sleep(POLL_SECONDS)
        waiting = [[key.to_user_string(), partition] for key, partition in sorted(pending, key=_order)]
        cursor = json.dumps({"after": read.top, "floor": read.floor, "seen": sorted(read.seen), "pending": waiting})
        if not requests:
            reason = "no partition gained all its inputs"
            if watcher.held_by_freeze:
                held = sorted(f"{key.to_user_string()}[{partition or ''}]" for key, partition in watcher.held_by_freeze)
                backfills = sorted(set(watcher.held_by_freeze.values()))
                reason += f"; {len(held)} wait for frozen assets of backfill {', '.join(backfills)}: {held[:5]}"
            return dg.SensorResult(skip_reason=reason, cursor=cursor)
        return dg.SensorResult(run_requests=requests, cursor=cursor)

    return _sensor


def _order(target: Target) -> tuple[str, str]:
    return target[0].to_user_string(), target[1] or ""


@dataclass(frozen=True)
class ReadIds:
    """The storage ids a sensor has read: every id up to `floor`, and the ids in `seen`
    above it, up to `top`. The other ids in (floor, top] may still show up (see the module
    docstring), so the next read starts above `floor`."""

    floor: int
    top: int
    seen: frozenset[int] = frozenset()

    def take(self, found: Collection[int], top: int, width: int) -> tuple[set[int], "ReadIds"]:
        """Of the ids `found` above `floor` up to `top`, those not read before; and what is
        read once they are. Ids `width` or more below `top` are given up on, so the window
        (and `seen`) stays bounded."""
        floor = max(self.floor, top - width)
        return set(found) - self.seen, ReadIds(floor, top, frozenset(i for i in (*self.seen, *found) if i > floor))


def _parse_cursor(cursor: str | None, watcher: "_Watcher") -> tuple[ReadIds, set[Target]]:
    if not cursor:  # first tick: react from now on; history is the catch-up sensor's job
        latest = watcher.latest_storage_id()
        return ReadIds(latest, latest), set()
    parsed = json.loads(cursor)
    # A cursor without "floor" predates the window: it read every id up to "after".
    read = ReadIds(parsed.get("floor", parsed["after"]), parsed["after"], frozenset(parsed.get("seen", ())))
    return read, {(dg.AssetKey.from_user_string(k), p) for k, p in parsed["pending"]}


class _Watcher:
    """One tick's view of the instance: new upstream events, readiness, runs in flight."""

    def __init__(
        self,
        instance: dg.DagsterInstance,
        asset_graph: AssetGraph,
        targets: AbstractSet[dg.AssetKey],
        rescan_ids: int,
    ) -> None:
        self.instance = instance
        self.rescan_ids = rescan_ids
        self.graph = asset_graph
        self.targets = targets
        self.watched = sorted({p for key in targets for p in self._parents(key)}, key=lambda k: k.to_user_string())
        self._backfill_selections: dict[str, AbstractSet[dg.AssetKey]] = {}
        self._left_by_run: dict[str, AbstractSet[dg.AssetKey]] = {}
        self.held_by_freeze: dict[Target, str] = {}  # by the last `decide`: the backfill freezing it

    def _parents(self, key: dg.AssetKey) -> list[dg.AssetKey]:
        parents = self.graph.get(key).parent_keys
        return [p for p in parents if self.graph.has(p) and self.graph.get(p).is_materializable]

    def latest_storage_id(self) -> int:
        return self.instance.event_log_storage.get_maximum_record_id() or 0

    def materializations_after(self, read: ReadIds) -> tuple[list[dg.EventLogRecord], ReadIds]:
        """Materializations of watched assets not read yet, and what is read after them."""
        # Up to a ceiling read first: an event stored while we read is the next call's.
        ceiling = self.latest_storage_id()
        if ceiling <= read.floor:
            return [], read
        moved = [  # one query for all watched assets; events only for those that moved
            r.asset_entry.asset_key
            for r in self.instance.get_asset_records(self.watched)
            if (r.asset_entry.last_materialization_storage_id or 0) > read.floor
        ]
        records: list[dg.EventLogRecord] = []
        for key in moved:
            cursor, has_more = None, True
            while has_more:
                page = self.instance.fetch_materializations(
                    dg.AssetRecordsFilter(asset_key=key, after_storage_id=read.floor, before_storage_id=ceiling + 1),
                    limit=10_000,
                    cursor=cursor,
                    ascending=True,
                )
                records.extend(page.records)
                cursor, has_more = page.cursor, page.has_more
        unread, read = read.take([r.storage_id for r in records], ceiling, self.rescan_ids)
        return [r for r in records if r.storage_id in unread], read

    def children_of(self, events: Iterable[dg.EventLogRecord]) -> set[Target]:
        """Target partitions that read a partition these events materialized."""
        found: set[Target] = set()
        for record in events:
            parent, partition = record.asset_key, record.partition_key
            if parent is None:  # not an asset event
                continue
            if record.run_id not in self._left_by_run:
                self._left_by_run[record.run_id] = self._selection_of_backfill(record.run_id)
            left_to_backfill = self._left_by_run[record.run_id]
            for child in self.graph.get(parent).child_keys & (self.targets - left_to_backfill):
                for key in self._child_partitions(parent, partition, child):
                    found.add((child, key))
        return found

    def _child_partitions(self, parent: dg.AssetKey, partition: str | None, child: dg.AssetKey) -> list[str | None]:
        child_def = self.graph.get(child).partitions_def
        if child_def is None:
            return [None]
        if partition is None and isinstance(child_def, dg.TimeWindowPartitionsDefinition):
            # An unpartitioned input changed: refresh the newest window, not all of history.
            last = child_def.get_last_partition_key()
            return [last] if last else []
        return list(self.graph.get_child_partition_keys_of_parent(partition, parent, child))

    def _selection_of_backfill(self, run_id: str) -> AbstractSet[dg.AssetKey]:
        """Assets a backfill that produced this run will run itself (its downstream included)."""
        record = self.instance.get_run_record_by_id(run_id)
        tags = record.dagster_run.tags if record else {}
        # The proof, not the id tag: a run only tagged with a backfill's id is production's.
        backfill_id = proven_backfills(self.instance, [record], bind=False).get(run_id) if record else None
        if backfill_id is not None:
            if backfill_id not in self._backfill_selections:
                try:
                    selection = BackfillStore(self.instance).load(backfill_id).spec.selection
                    keys = asset_selection(selection).resolve(self.graph)
                except (PartitionAssetsError, dg.DagsterError):  # no record here, or a stale selection
                    keys = set()
                self._backfill_selections[backfill_id] = keys
            return self._backfill_selections[backfill_id]
        dagster_backfill = dagster_backfill_of(tags)
        if dagster_backfill is not None:  # a run of one of Dagster's backfills
            backfill = self.instance.get_backfill(dagster_backfill)
            return set(backfill.asset_selection or ()) if backfill else set()
        return set()

    def decide(self, candidates: set[Target]) -> tuple[list[dg.RunRequest], set[Target]]:
        """Run requests for the ready, not current candidates; those waiting on a run in flight."""
        if not candidates:
            return [], set()
        found = {c: self._inputs(*c) for c in candidates}
        inputs = {c: needed for c, needed in found.items() if needed is not None}
        # One storage query per asset, for every partition any candidate needs.
        wanted: dict[dg.AssetKey, set[str | None]] = {}
        for (key, partition), needed in inputs.items():
            wanted.setdefault(key, set()).add(partition)
            for parent, keys in needed:
                wanted.setdefault(parent, set()).update(keys)
        latest = {key: self._latest_storage_ids(key, partitions) for key, partitions in wanted.items()}
        in_flight = self._in_flight()
        frozen = frozen_assets(self.instance)
        ready: dict[Target, int] = {}
        waiting: set[Target] = set()
        self.held_by_freeze = {}
        for key, partition in sorted(inputs, key=_order):
            found_ids = [latest[parent].get(k) for parent, keys in inputs[key, partition] for k in keys]
            ids = [i for i in found_ids if i is not None]
            if len(ids) < len(found_ids):
                continue  # an input is missing: its materialization will bring this back
            newest_input = max(ids, default=0)
            own = latest[key].get(partition)
            if own is not None and own > newest_input:
                continue  # current: materialized after every input
            if (key, partition) in in_flight:
                waiting.add((key, partition))  # decide again once that run is done
                continue
            # A frozen asset is being rewritten by a backfill: neither write it nor read it.
            freezing = next((frozen[k] for k in (key, *self._parents(key)) if k in frozen), None)
            if freezing is not None:
                waiting.add((key, partition))  # decide again once the backfill unfreezes
                self.held_by_freeze[key, partition] = freezing
                continue
            ready[key, partition] = newest_input
        return self._runs(ready), waiting

    def _runs(self, ready: dict[Target, int]) -> list[dg.RunRequest]:
        """One run per partition key of assets sharing a partitions definition (as Dagster's
        own automation groups them): the daemon creates runs one at a time."""
        groups: dict[tuple, list[Target]] = {}
        for key, partition in ready:
            groups.setdefault((self.graph.get(key).partitions_def, partition), []).append((key, partition))
        requests = []
        for (_, partition), targets in groups.items():
            keys = [key for key, _ in targets]
            newest_input = max(ready[t] for t in targets)
            requests.append(
                dg.RunRequest(
                    asset_selection=keys,
                    partition_key=partition,
                    # The same assets with the same inputs are never requested twice.
                    run_key=f"{','.join(k.to_user_string() for k in keys)}[{partition or ''}]@{newest_input}",
                    tags={TRIGGER_TAG: str(newest_input)},
                )
            )
        return requests

    def _inputs(self, key: dg.AssetKey, partition: str | None) -> list[tuple[dg.AssetKey, list[str | None]]] | None:
        """Each parent with the partitions this partition reads; None if one does not exist."""
        needed: list[tuple[dg.AssetKey, list[str | None]]] = []
        for parent in self._parents(key):
            if self.graph.get(parent).partitions_def is None:
                needed.append((parent, [None]))
                continue
            mapped = self.graph.get_parent_partition_keys_for_child(partition, parent, key)
            if mapped.required_but_nonexistent_subset.get_partition_keys():
                return None
            needed.append((parent, list(mapped.partitions_subset.get_partition_keys())))
        return needed

    def _latest_storage_ids(self, key: dg.AssetKey, partitions: set[str | None]) -> dict[str | None, int]:
        """The storage id of each partition's latest materialization (None: unpartitioned)."""
        if not partitions:
            return {}
        if None in partitions:
            records = self.instance.fetch_materializations(key, limit=1).records
            return {None: records[0].storage_id} if records else {}
        by_partition = self.instance.get_latest_storage_id_by_partition(
            key, dg.DagsterEventType.ASSET_MATERIALIZATION, partitions={p for p in partitions if p is not None}
        )
        return {partition: storage_id for partition, storage_id in by_partition.items()}

    def _in_flight(self) -> set[Target]:
        """(asset, partition) of every run queued or running."""
        found: set[Target] = set()
        for run in self.instance.get_runs(dg.RunsFilter(statuses=IN_FLIGHT_STATUSES)):
            for key in run.asset_selection or ():
                if self.graph.has(key):
                    keys: list[str | None] = [*partitions_of_run(run, self.graph.get(key).partitions_def)] or [None]
                    found.update((key, k) for k in keys)
        return found
