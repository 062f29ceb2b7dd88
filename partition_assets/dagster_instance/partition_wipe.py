"""Partitions of an asset marked not materialized in a Dagster instance: Dagster's own
`DagsterInstance.wipe_asset_partitions` where the instance's event log implements it, else
the same effect on a SQL event log (SQLite, Postgres), whose Dagster 1.13 implementation
raises NotImplementedError: the partition index of the partitions' materialization events
is cleared (the events stay in their runs' logs, no longer indexed under a partition) and
the asset's cached partition status dropped, so that Dagster rebuilds it from the index.
Either way, the partitions' rows of the provenance index (dagster_instance/provenance_index.py) are
deleted, and `get_materialized_partitions`, the UI's partition status and `--catch-up`
(backfill/planning/instance_state.py) see the partitions missing; a later materialization of
one makes it materialized again.

Not guaranteed: an event log that is neither (a custom storage without partition wipes) is
left as it is: `wipe_partitions` says so by returning False.
"""

import dagster as dg

from partition_assets.dagster_instance.provenance_index import forget_partitions
from partition_assets.dagster_internals import SqlEventLogStorage, SqlEventLogStorageTable

# The event types that make a partition materialized, or planned or failed to be: each is indexed
# by partition, and a wiped partition keeps none of them (as Dagster's own wipe keeps none).
_INDEXED_TYPES = (
    dg.DagsterEventType.ASSET_MATERIALIZATION,
    dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
    dg.DagsterEventType.ASSET_FAILED_TO_MATERIALIZE,
)


def wipe_partitions(instance: dg.DagsterInstance, asset: dg.AssetKey, partitions: list[str]) -> bool:
    """Marks `partitions` of `asset` not materialized in `instance` (see the module's
    docstring); False when its event log can do neither (then nothing was changed)."""
    storage = instance.event_log_storage
    try:
        instance.wipe_asset_partitions(asset, partitions)
        if isinstance(storage, SqlEventLogStorage):
            with storage.index_transaction() as connection:
                forget_partitions(connection, asset, partitions)
        return True
    except NotImplementedError:
        if not isinstance(storage, SqlEventLogStorage):
            return False
    table = SqlEventLogStorageTable
    with storage.index_transaction() as connection:
        connection.execute(
            table.update()
            .where(
                table.c.asset_key == asset.to_string(),
                table.c.partition.in_(partitions),
                table.c.dagster_event_type.in_([event_type.value for event_type in _INDEXED_TYPES]),
            )
            .values(partition=None)
        )
        forget_partitions(connection, asset, partitions)
    instance.wipe_asset_cached_status([asset])
    return True
