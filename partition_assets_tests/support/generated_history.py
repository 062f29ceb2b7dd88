"""A generated history of materializations: daily assets in chains, their events written
straight into the instance's event log (shared by bench/history_selection_bench.py and
partition_assets_tests/integration/test_history.py).

`definitions` builds `assets` daily assets over `days` days (chains of CHAIN, identity
mappings, every NEW_VERSION_EVERY-th with a new code version); `write_events` writes a
materialization per (asset, day, commit) in batches of BATCH rows (`prepare_insert_event_batch`):
each a real serialized EventLogEntry with its `git_sha` metadata and `dagster/code_version`
tag, then each asset's summary row (its latest event: the assets the instance lists).

Not guaranteed: Dagster's tag index and the runs are not written (the events record their
commit, so no run tag is read); it is an instance to plan from, not one to run.
"""

from __future__ import annotations

import time
from datetime import date, timedelta

import dagster as dg

CHAIN = 10  # assets per chain: the head reads nothing, each other the one before it
NEW_VERSION_EVERY = 7
BATCH = 500


def definitions(assets: int, days: int) -> dg.Definitions:
    partitions = dg.DailyPartitionsDefinition("2023-01-01", end_date=str(date(2023, 1, 1) + timedelta(days=days)))

    def asset(n: int) -> dg.AssetsDefinition:
        @dg.asset(
            name=f"asset_{n}",
            partitions_def=partitions,
            deps=[] if n % CHAIN == 0 else [f"asset_{n - 1}"],
            code_version="v2" if n % NEW_VERSION_EVERY == 0 else "v1",
        )
        def compute() -> None: ...

        return compute

    return dg.Definitions(assets=[asset(n) for n in range(assets)])


def asset_keys(defs: dg.Definitions) -> list[dg.AssetKey]:
    """The assets of `definitions`, in their numbers' order."""
    return sorted(defs.resolve_asset_graph().get_all_asset_keys(), key=lambda k: int(k.path[0].split("_")[1]))


def days_of(defs: dg.Definitions) -> list[str]:
    partitions_def = defs.resolve_asset_graph().get(asset_keys(defs)[0]).partitions_def
    assert partitions_def is not None
    return list(partitions_def.get_partition_keys())


def write_events(instance: dg.DagsterInstance, wanted: list[tuple[dg.AssetKey, str, str]]) -> int:
    """Writes a materialization event per (asset, day, commit) of `wanted`, in batches; returns
    how many."""
    from dagster._core.events import DagsterEvent, DagsterEventType, StepMaterializationData
    from dagster._core.events.log import EventLogEntry

    def event(key: dg.AssetKey, day: str, sha: str) -> EventLogEntry:
        materialization = dg.AssetMaterialization(
            key, partition=day, metadata={"git_sha": sha}, tags={"dagster/code_version": "v1"}
        )
        dagster_event = DagsterEvent(
            DagsterEventType.ASSET_MATERIALIZATION.value,
            job_name="fill",
            event_specific_data=StepMaterializationData(materialization),
        )
        return EventLogEntry(
            error_info=None,
            level=20,
            user_message="",
            run_id="fill",
            timestamp=time.time(),
            dagster_event=dagster_event,
        )

    storage = instance.event_log_storage
    for start in range(0, len(wanted), BATCH):
        statement = storage.prepare_insert_event_batch([event(*w) for w in wanted[start : start + BATCH]])
        with storage.run_connection("fill") as connection:
            connection.execute(statement)
    # Dagster's per-asset summary (`store_event` writes it): the assets the instance lists.
    for key in dict.fromkeys(key for key, _, _ in wanted):
        (latest,) = instance.fetch_materializations(key, limit=1).records
        storage.store_asset_event(latest.event_log_entry, latest.storage_id)
    return len(wanted)
