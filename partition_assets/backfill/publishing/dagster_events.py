"""What Dagster records of a staged backfill, once readers can see it: one publish
run holding a materialization of every node it ran, and after a rollback, the old
content's materializations and the created partitions wiped (or observed removed).
A publish or rollback that changed a table's schema adds the schema readers now see
(`dagster/column_schema`) and the change to its materializations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import dagster as dg

from partition_assets.backfill.planning.graph import Node
from partition_assets.backfill.publishing.ledger_rows import latest
from partition_assets.backfill.publishing.tables import BackfillTable, unstaged_assets
from partition_assets.backfill.running.scheduling import NodeStatus
from partition_assets.backfill.state.ledger import LedgerEntry
from partition_assets.backfill.state.record import node_states
from partition_assets.deploy.runtime import RUNTIME_METADATA
from partition_assets.deploy.versioning import GIT_SHA_METADATA, GIT_SHA_TAG, definitions_git_sha
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets.storage.delta import DeltaFormat
from partition_assets.storage.io_manager import INPUT_VERSIONS_METADATA, INPUTS_AS_OF_METADATA
from partition_assets.storage.schema_change import (
    COLUMN_SCHEMA_METADATA,
    SCHEMA_CHANGE_METADATA,
    ColumnMapping,
    delta_type_name,
    diff_schemas,
)

if TYPE_CHECKING:
    from partition_assets.backfill.publishing.publication import Publication


def record_materializations(publication: Publication, instance: dg.DagsterInstance) -> None:
    """One run in the instance recording a materialization of every node the backfill
    ran, now that readers can see them: the metadata its IO manager gave the staged
    output, the table version published, the asset's code version. Skipped when an
    earlier publish run of the backfill succeeded."""
    if publish_recorded(publication, instance):
        return
    tags = {BACKFILL_ID_TAG: publication.record.id, PUBLISH_RUN_TAG: "true"}
    sha = definitions_git_sha(publication.definitions)
    asset_graph = publication.definitions.resolve_asset_graph()
    states = node_states(instance, publication.record.id, publication.graph)
    ledger_rows = {(entry.asset, entry.partition): entry for entry in latest(publication)}
    foreign = set(unstaged_assets(publication.definitions, publication.graph))
    events = []
    schema_metadata = _schema_metadata_by_asset(publication, rolled_back=False)
    for node in ran_nodes(publication, instance):
        asset = node.asset.to_user_string()
        metadata: dict[str, dg.RawMetadataValue] = {"backfill_id": publication.record.id}
        if node.asset in foreign:  # what its own IO manager said of the output
            metadata.update(_handled_output_metadata(instance, states[node][1].run_id, node.asset))
        entry = ledger_rows.get((asset, node.partition))
        if entry is not None:
            table = publication.tables[node.asset]
            metadata.update(_entry_metadata(entry, table.uri, publication.record.published_versions.get(asset)))
            metadata.update(schema_metadata.get(node.asset, {}))
        code_version = asset_graph.get(node.asset).code_version
        events.append(
            dg.AssetMaterialization(
                node.asset,
                partition=node.partition or None,
                metadata=metadata,
                tags={CODE_VERSION_TAG: code_version} if code_version else None,
            )
        )
    if sha:
        tags[GIT_SHA_TAG] = sha
    run_reporting(instance, events, tags, "partition_assets_publish")


def publish_recorded(publication: Publication, instance: dg.DagsterInstance) -> bool:
    """Whether a publish run of the backfill recorded its materializations in Dagster."""
    tags = {BACKFILL_ID_TAG: publication.record.id, PUBLISH_RUN_TAG: "true"}
    return bool(instance.get_runs(dg.RunsFilter(tags=tags, statuses=[dg.DagsterRunStatus.SUCCESS]), limit=1))


def reflect_rollback(publication: Publication, instance: dg.DagsterInstance) -> None:
    """Dagster's view after a rollback: each restored partition gets a materialization
    of its old content; each partition the backfill created is wiped (missing again)
    where the instance's event log can wipe partitions, else gets an observation
    saying the rollback removed it (Dagster 1.13's SQL event logs cannot wipe one
    partition: NotImplementedError)."""
    created = {
        (asset, partition) for asset, partitions in publication.record.created.items() for partition in partitions
    }
    schema_metadata = _schema_metadata_by_asset(publication, rolled_back=True)
    events: list[dg.AssetMaterialization | dg.AssetObservation] = [
        dg.AssetMaterialization(
            node.asset,
            partition=node.partition or None,
            metadata={"rolled_back_backfill_id": publication.record.id, **schema_metadata.get(node.asset, {})},
        )
        for node in ran_nodes(publication, instance)
        if (node.asset.to_user_string(), node.partition) not in created
    ]
    for asset, partitions in _by_asset(created).items():
        key = dg.AssetKey.from_user_string(asset)
        try:
            instance.wipe_asset_partitions(key, partitions)
        except NotImplementedError:
            events += [
                dg.AssetObservation(key, partition=p, metadata={"removed_by_rollback_of": publication.record.id})
                for p in partitions
            ]
    run_reporting(instance, events, {BACKFILL_ID_TAG: publication.record.id}, "partition_assets_rollback")


def ran_nodes(publication: Publication, instance: dg.DagsterInstance) -> list[Node]:
    """The nodes a run of this backfill succeeded on, in graph order: not those a
    catch-up left alone because they were current."""
    succeeded = {
        node
        for node, (state, _) in node_states(instance, publication.record.id, publication.graph).items()
        if state == NodeStatus.SUCCEEDED
    }
    return [node for node in publication.graph.nodes() if node in succeeded]


def _by_asset(keys: set[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for asset, partition in sorted(keys):
        grouped.setdefault(asset, []).append(partition)
    return grouped


def _entry_metadata(entry: LedgerEntry, table_uri: str, version: int | None) -> dict[str, dg.RawMetadataValue]:
    """A published partition's materialization metadata, from its ledger row."""
    metadata: dict[str, dg.RawMetadataValue] = {
        "table_uri": table_uri,
        "rows": entry.rows or 0,
        "checksum": entry.checksum or "",
        INPUT_VERSIONS_METADATA: dg.MetadataValue.json(dict(entry.input_versions)),
        "staged_by_run": entry.run_id or "",
    }
    if entry.inputs_as_of:
        metadata[INPUTS_AS_OF_METADATA] = entry.inputs_as_of
    if entry.runtime:
        metadata[RUNTIME_METADATA] = dg.MetadataValue.json(dict(entry.runtime))
    if entry.git_sha:
        metadata[GIT_SHA_METADATA] = entry.git_sha
    if version is not None:
        metadata["delta_version"] = version
    return metadata


def _schema_metadata(table: BackfillTable, published: int | None, rolled_back: bool) -> dict[str, dg.RawMetadataValue]:
    """When the publish commit at version `published` changed the table's schema: the schema
    readers now see as `dagster/column_schema` (so the UI shows its columns) and the change,
    column by column; after a rollback, the restored schema and the change back to it."""
    if not published or not isinstance(table.table_format, DeltaFormat):
        return {}
    before, after = table.table_format.schema(table.uri, published - 1), table.table_format.schema(table.uri, published)
    if rolled_back:
        before, after = after, before
    if before is None or after is None:
        return {}
    change = diff_schemas(before, after, ColumnMapping.from_metadata(table.metadata))
    if not change:
        return {}
    columns = [dg.TableColumn(f.name, delta_type_name(f.type)) for f in after]
    return {
        COLUMN_SCHEMA_METADATA: dg.MetadataValue.table_schema(dg.TableSchema(columns=columns)),
        SCHEMA_CHANGE_METADATA: dg.MetadataValue.json(change.to_json()),
    }


def _schema_metadata_by_asset(publication: Publication, rolled_back: bool) -> dict[dg.AssetKey, dict]:
    versions = publication.record.published_versions
    return {
        key: _schema_metadata(table, versions.get(key.to_user_string()), rolled_back)
        for key, table in publication.tables.items()
    }


def _handled_output_metadata(instance: dg.DagsterInstance, run_id: str, asset: dg.AssetKey) -> dict:
    """The metadata another IO manager gave `asset`'s output in run `run_id`."""
    metadata: dict = {}
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.HANDLED_OUTPUT):
        event = record.dagster_event
        if event is not None and event.asset_key in (None, asset):
            metadata.update(getattr(event.event_specific_data, "metadata", None) or {})
    return metadata


def run_reporting(
    instance: dg.DagsterInstance,
    events: Sequence[dg.AssetMaterialization | dg.AssetObservation | dg.AssetCheckEvaluation],
    tags: dict[str, str],
    name: str,
) -> None:
    """Records `events` from one in-process run named `name` in `instance`."""

    @dg.op(name=f"{name}_op")
    def report():
        yield from events
        yield dg.Output(None)

    @dg.job(name=name, executor_def=dg.in_process_executor)
    def reporting_job():
        report()

    reporting_job.execute_in_process(instance=instance, tags=tags)


PUBLISH_RUN_TAG = "partition_assets/publish_run"
CODE_VERSION_TAG = "dagster/code_version"
