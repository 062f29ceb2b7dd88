"""backfill/publishing/event_batches.py: the asset events a publish, rollback or failure report
stores in one batch read back as Dagster's own one-at-a-time path leaves them (the events,
each asset's record and tag index, the partition status), on the repo's SQLite instance and
on Postgres; and storing them takes as many storage calls for a thousand events per asset as
for two.

Each writes from an op of a real run in a real instance; the reference writes the same
events from another op as Dagster does when an op logs them one by one (`log_event`, and
`report_dagster_event` for a planned materialization, as Dagster's run planning does)."""

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import dagster as dg
import sqlalchemy

from partition_assets.backfill.publishing.event_batches import AssetEvent, store_asset_events
from partition_assets.dagster_internals import AssetMaterializationPlannedData
from partition_assets_tests.support.instances import also_on_postgres

ASSETS = ("a", "b")
MATERIALIZATION = dg.DagsterEventType.ASSET_MATERIALIZATION
OBSERVATION = dg.DagsterEventType.ASSET_OBSERVATION
PLANNED = dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED
LIMIT = 10_000  # Dagster's bound on records per read


def _events(prefix: str, days: int) -> list[AssetEvent]:
    """For each of ASSETS under `prefix`: every day planned, then materialized (tags indexed
    and not, metadata of several kinds), and the first day observed; a last planned day."""
    events: list[AssetEvent] = []
    for name in ASSETS:
        key = dg.AssetKey([prefix, name])
        partitions = [f"day-{day:04d}" for day in range(days)]
        events += [AssetMaterializationPlannedData(key, partition=partition) for partition in partitions]
        events += [
            dg.AssetMaterialization(
                key,
                partition=partition,
                metadata={"rows": day, "uri": f"file:///{name}", "runtime": dg.MetadataValue.json({"n": [day]})},
                tags={"dagster/code_version": f"v{day % 2}", "dagster/data_version": f"d{day}", "other": "x"},
            )
            for day, partition in enumerate(partitions)
        ]
        events.append(dg.AssetObservation(key, partition=partitions[0], metadata={"seen": True}, tags={"t": "1"}))
        events.append(AssetMaterializationPlannedData(key, partition="day-last"))
    return events


def _record(prefix: str, events: Sequence[AssetEvent], store: Callable[[Sequence[AssetEvent]], None]) -> str:
    """The run id of a run whose op stores `events` with `store`."""

    @dg.op(name=f"{prefix}_op")
    def report():
        store(events)

    @dg.job(name=f"{prefix}_job")
    def reporting():
        report()

    with dg.DagsterInstance.get() as instance:
        return reporting.execute_in_process(instance=instance).run_id


def _one_at_a_time(events: Sequence[AssetEvent]) -> None:
    """Dagster's own path: each event logged by the op as it comes."""
    context = dg.OpExecutionContext.get()
    for event in events:
        if isinstance(event, AssetMaterializationPlannedData):
            step = context.get_step_execution_context()
            planned = dg.DagsterEvent.build_asset_materialization_planned_event(context.job_name, step.step.key, event)
            context.instance.report_dagster_event(planned, context.run_id)
        else:
            context.log_event(event)


def _batched(events: Sequence[AssetEvent]) -> None:
    store_asset_events(dg.OpExecutionContext.get(), events)


def _stored(instance: dg.DagsterInstance, prefix: str, run_id: str) -> dict:
    """What `instance` holds of the events of `run_id`, asset keys without `prefix`, storage
    ids as positions among the run's asset events, the run as "this run"."""
    records = [
        record
        for kind in (MATERIALIZATION, OBSERVATION, PLANNED)
        for record in instance.get_records_for_run(run_id, of_type=kind, limit=LIMIT).records
    ]
    records.sort(key=lambda record: record.storage_id)
    position = {record.storage_id: i for i, record in enumerate(records)}

    def described(record: dg.EventLogRecord | None) -> tuple | None:
        if record is None:
            return None
        event = record.event_log_entry.get_dagster_event()
        data = event.event_specific_data
        inner = getattr(data, "materialization", None) or getattr(data, "asset_observation", None)
        return (
            position[record.storage_id],
            event.event_type,
            event.asset_key.path[1:],
            event.partition,
            dict(getattr(inner, "tags", None) or {}),
            dict(getattr(inner, "metadata", None) or {}),
            "this run" if record.run_id == run_id else record.run_id,
        )

    keys = [dg.AssetKey([prefix, name]) for name in ASSETS]
    partitions = sorted({record.partition_key for record in records if record.partition_key})
    storage = instance.event_log_storage
    indexed = {}  # what Dagster's asset indexes answer, per asset
    for key in keys:
        [asset_record] = instance.get_asset_records([key])
        entry = asset_record.asset_entry
        indexed[key.path[-1]] = {
            "materializations": [
                described(r) for r in instance.fetch_materializations(key, limit=LIMIT, ascending=True).records
            ],
            "observations": [
                described(r) for r in instance.fetch_observations(key, limit=LIMIT, ascending=True).records
            ],
            "latest": described(entry.last_materialization_record),
            "last_run_id": "this run" if entry.last_run_id == run_id else entry.last_run_id,
            "last_observation": described(entry.last_observation_record),
            "last_planned": position.get(entry.last_planned_materialization_storage_id or -1),
            "tags_by_event": [  # the asset tag index, by event
                {
                    position[record.storage_id]: dict(
                        storage.get_event_tags_for_asset(key, filter_event_id=record.storage_id)[0]
                    )
                    for record in records
                    if record.asset_key == key
                    and storage.get_event_tags_for_asset(key, filter_event_id=record.storage_id)
                }
            ],
            "tagged_v1": len(storage.get_event_tags_for_asset(key, filter_tags={"dagster/code_version": "v1"})),
            "materialized": sorted(instance.get_materialized_partitions(key)),
            "latest_by_partition": {
                kind.value: {
                    partition: position[storage_id]
                    for partition, storage_id in storage.get_latest_storage_id_by_partition(key, kind).items()
                }
                for kind in (MATERIALIZATION, OBSERVATION, PLANNED)
            },
            "latest_tags": storage.get_latest_tags_by_partition(key, MATERIALIZATION, ["dagster/data_version"]),
            "planned_last_day": instance.get_latest_planned_materialization_info(key, "day-last") is not None,
            "status": instance.get_status_by_partition(key, partitions, dg.StaticPartitionsDefinition(partitions)),
        }
    return {"events": [described(record) for record in records], "assets": indexed}


@also_on_postgres("home")
def test_a_batch_is_stored_as_dagster_stores_the_events_one_at_a_time(home):
    days = 3
    one_run = _record("one", _events("one", days), _one_at_a_time)
    batch_run = _record("batch", _events("batch", days), _batched)
    with dg.DagsterInstance.get() as instance:
        one, batch = _stored(instance, "one", one_run), _stored(instance, "batch", batch_run)
    assert len(batch["events"]) == len(ASSETS) * (2 * days + 2)
    assert batch == one


@contextmanager
def _storage_calls() -> Iterator[list[str]]:
    """Every SQL statement executed (one per `Connection.execute`: an executemany is one)."""
    calls: list[str] = []

    def listen(conn, clauseelement, multiparams, params, execution_options) -> None:
        calls.append(str(clauseelement).split("\n")[0])

    sqlalchemy.event.listen(sqlalchemy.engine.Engine, "before_execute", listen)
    try:
        yield calls
    finally:
        sqlalchemy.event.remove(sqlalchemy.engine.Engine, "before_execute", listen)


@also_on_postgres("home")
def test_a_batch_takes_as_many_storage_calls_for_a_thousand_events_per_asset_as_for_two(home):
    counted: dict[int, list[str]] = {}

    def counting(days: int) -> Callable[[Sequence[AssetEvent]], None]:
        def store(events: Sequence[AssetEvent]) -> None:
            with _storage_calls() as calls:
                _batched(events)
            counted[days] = calls

        return store

    for days in (2, 1001):
        _record(f"count{days}", _events(f"count{days}", days), counting(days))
    few, many = counted[2], counted[1001]
    assert len(many) == len(few), (len(few), len(many), sorted(set(many) - set(few)) or many[:20])
