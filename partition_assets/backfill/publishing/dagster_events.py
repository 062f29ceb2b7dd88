"""What Dagster records of a staged backfill, once readers can see it: one publish
run holding a materialization of every node it ran, and after a rollback, the old
content's materializations and the created partitions wiped (or observed removed).
Of any backfill whose nodes failed: those nodes and the ones it never ran behind them,
planned in a run that fails, as Dagster's failed run leaves them (`record_failures`).
A retract's partitions are wiped (dagster_instance/partition_wipe.py) and observed removed; its
rollback records them materialized again.
A publish or rollback that changed a table's schema adds the schema readers now see
(`dagster/column_schema`) and the change to its materializations.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing

import dagster as dg

from partition_assets.backfill.model import Node, NodeStatus
from partition_assets.backfill.planning.gate_rules import GATE_CHECK
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.planning.keys import UNPARTITIONED
from partition_assets.backfill.planning.retraction import describe_nodes
from partition_assets.backfill.publishing.event_batches import AssetEvent, store_asset_events
from partition_assets.backfill.publishing.originals import Original
from partition_assets.backfill.publishing.provenance import provenance_from_json
from partition_assets.backfill.publishing.tables import BackfillTable, Tables
from partition_assets.backfill.state.ledger import LedgerEntry
from partition_assets.backfill.state.record import BackfillRecord, node_states, nodes_of
from partition_assets.dagster_instance.partition_wipe import wipe_partitions
from partition_assets.dagster_internals import (
    SQLITE_BUSY_TIMEOUT_SECONDS,
    AssetCheckEvaluationTargetMaterializationData,
    AssetGraph,
    AssetMaterializationPlannedData,
    SqlEventLogStorageTable,
    SqliteEventLogStorage,
    deserialize_value,
    replace,
)
from partition_assets.deploy.runtime import RUNTIME_METADATA
from partition_assets.deploy.versioning import CODE_VERSION_TAG, GIT_SHA_METADATA, GIT_SHA_TAG, definitions_git_sha
from partition_assets.run_console import quiet_console_config
from partition_assets.run_tags import BACKFILL_ID_TAG, defers_asset_events
from partition_assets.storage.failpoints import failpoint
from partition_assets.storage.io_manager import INPUT_VERSIONS_METADATA, INPUTS_AS_OF_METADATA
from partition_assets.storage.schema_change import (
    COLUMN_SCHEMA_METADATA,
    SCHEMA_CHANGE_METADATA,
    ColumnMapping,
    delta_type_name,
    diff_schemas,
)
from partition_assets.storage.table_format import versioned


def record_materializations(
    instance: dg.DagsterInstance,
    record: BackfillRecord,
    definitions: dg.Definitions,
    graph: BackfillGraph,
    tables: Tables,
    ledger_rows: Sequence[LedgerEntry],
) -> None:
    """One run in the instance recording a materialization of every node of `graph` that
    `record`'s backfill ran and left to it (running/coordinator.py), now that readers can see
    them: the metadata the node's body gave its output (`Output`/`MaterializeResult` metadata,
    `add_output_metadata`), then this library's (the ledger row's, the table version published), the
    asset's code version. The library's keys win where the body used the same name.
    Then every asset check result the node runs recorded (the user's checks, blocking or not,
    partitioned or not; the latest of each check and partition), and the gate's, recorded
    again against those materializations (`run_reporting`), as Dagster's runs record a check
    result against the materialization it judged: recorded before it, the Checks tab would
    read "not evaluated". Skipped when an earlier publish run of the backfill succeeded.

    Costs a few instance round trips per node run and per asset, none per node: the node
    states are read once, each run's outputs and check results once, and the events written
    in one batch (event_batches.py); a query per asset and checked partition for the checks."""
    if publish_recorded(instance, record.id):
        return
    _end_cut_publish_runs(instance, record.id)
    tags = {BACKFILL_ID_TAG: record.id, PUBLISH_RUN_TAG: "true"}
    sha = definitions_git_sha(definitions)
    asset_graph = definitions.resolve_asset_graph()
    states = node_states(instance, record.id, graph)
    row_of = {(entry.asset, entry.partition): entry for entry in ledger_rows}
    ran = _succeeded(graph, states)
    run_events = _events_of_runs(instance, {states[node][1].run_id for node in ran}, {STEP_OUTPUT, CHECK_EVALUATION})
    outputs = _output_metadata(asset_graph, run_events)
    events = []
    schema_metadata = _schema_metadata_by_asset(record, tables, rolled_back=False)
    for node in ran:
        asset = node.asset.to_user_string()
        metadata: dict[str, dg.RawMetadataValue] = dict(outputs.get((states[node][1].run_id, node.asset), {}))
        metadata["backfill_id"] = record.id
        entry = row_of.get((asset, node.partition))
        if entry is not None:
            table = tables[node.asset]
            metadata.update(_entry_metadata(entry, table.uri, record.published_versions.get(asset)))
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
    evaluations = [*_latest_evaluations(run_events), *gate_evaluations(instance, record.id, tables)]
    run_reporting(instance, [*events, *evaluations], tags, "partition_assets_publish")


def _latest_evaluations(run_events: Iterable[dg.EventLogEntry]) -> list[dg.AssetCheckEvaluation]:
    """The latest check evaluation of each check and partition among `run_events` (in storage order)."""
    latest: dict[tuple[dg.AssetCheckKey, str | None], dg.AssetCheckEvaluation] = {}
    for entry in run_events:
        event = entry.dagster_event
        if event is not None and event.event_type == CHECK_EVALUATION:
            evaluation = event.event_specific_data
            assert isinstance(evaluation, dg.AssetCheckEvaluation)  # the data of every such event
            latest[(evaluation.asset_check_key, evaluation.partition)] = evaluation
    return list(latest.values())


def gate_evaluations(instance: dg.DagsterInstance, backfill_id: str, tables: Tables) -> list[dg.AssetCheckEvaluation]:
    """The latest `backfill_gate` evaluation of each of `tables` that this backfill's gate
    recorded, to be recorded again in its publish run: Dagster counts a check's evaluation
    for an asset's latest materialization when both are in one run (an evaluation recorded
    before the materialization reads "Not evaluated" on the asset's *Checks* tab). A forced
    publish repeats a failed evaluation: what was published failed its gate."""
    repeated = []
    for asset in tables:
        history = instance.event_log_storage.get_asset_check_execution_history(
            dg.AssetCheckKey(asset, GATE_CHECK), limit=1
        )
        event = history[0].event if history else None
        evaluation = event.dagster_event.event_specific_data if event and event.dagster_event else None
        if isinstance(evaluation, dg.AssetCheckEvaluation) and _backfill_of(evaluation) == backfill_id:
            repeated.append(
                dg.AssetCheckEvaluation(
                    asset_key=evaluation.asset_key,
                    check_name=evaluation.check_name,
                    passed=evaluation.passed,
                    metadata=evaluation.metadata,
                    severity=evaluation.severity,
                    description=evaluation.description,
                )
            )
    return repeated


def _backfill_of(evaluation: dg.AssetCheckEvaluation) -> object:
    value = evaluation.metadata.get("backfill_id")
    return None if value is None else value.value


# A run in one of these has not ended (Dagster's own list is private).
_NOT_ENDED = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def _end_cut_publish_runs(instance: dg.DagsterInstance, backfill_id: str) -> None:
    """Marks canceled the backfill's publish runs a walk killed mid-stage left unended: this
    stage runs again only once that walk's process is gone (a resume or a takeover refuses a
    live coordinator), so nothing will end them (found by the soak: a coordinator killed while
    it recorded the publish left its run STARTED for good)."""
    tags = {BACKFILL_ID_TAG: backfill_id, PUBLISH_RUN_TAG: "true"}
    for run in instance.get_runs(dg.RunsFilter(tags=tags, statuses=_NOT_ENDED)):
        instance.report_run_canceled(run, message=f"backfill {backfill_id}: its publish was cut short and resumed")


def publish_recorded(instance: dg.DagsterInstance, backfill_id: str) -> bool:
    """Whether a publish run of the backfill recorded its materializations in Dagster."""
    tags = {BACKFILL_ID_TAG: backfill_id, PUBLISH_RUN_TAG: "true"}
    return bool(instance.get_runs(dg.RunsFilter(tags=tags, statuses=[dg.DagsterRunStatus.SUCCESS]), limit=1))


def reflect_rollback(
    instance: dg.DagsterInstance, record: BackfillRecord, graph: BackfillGraph, tables: Tables
) -> None:
    """Dagster's view after `record`'s backfill over `graph` was rolled back: each restored
    partition (each it ran, each a retract removed) gets a materialization of its old content,
    with the commit (`git_sha`), code version and runtime that made it when the backfill started
    (`record.restored_provenance`; none for a record of an earlier release);
    each partition the backfill created is wiped, missing again (dagster_instance/partition_wipe.py:
    Dagster's own wipe, or its effect on the SQL event logs that lack one), and gets an
    observation saying the rollback removed it."""
    created = {(asset, partition) for asset, partitions in record.created.items() for partition in partitions}
    schema_metadata = _schema_metadata_by_asset(record, tables, rolled_back=True)
    restored = provenance_from_json(record.restored_provenance)
    events: list[dg.AssetMaterialization | dg.AssetObservation] = [
        _restored_materialization(node, record.id, schema_metadata.get(node.asset, {}), restored.get(node))
        for node in [*ran_nodes(instance, record.id, graph), *nodes_of(record.retracted)]
        if (node.asset.to_user_string(), node.partition) not in created
    ]
    for asset, partitions in _by_asset(created).items():
        key = dg.AssetKey.from_user_string(asset)
        wipe_partitions(instance, key, partitions)
        events += [
            dg.AssetObservation(key, partition=p, metadata={"removed_by_rollback_of": record.id}) for p in partitions
        ]
    run_reporting(instance, events, {BACKFILL_ID_TAG: record.id}, "partition_assets_rollback")


def _restored_materialization(
    node: Node, backfill_id: str, schema_metadata: Mapping[str, dg.RawMetadataValue], original: Original | None
) -> dg.AssetMaterialization:
    """The materialization a rollback records of `node`'s old content, which `original` made."""
    metadata: dict[str, dg.RawMetadataValue] = {"rolled_back_backfill_id": backfill_id, **schema_metadata}
    if original is not None and original.git_sha:
        metadata[GIT_SHA_METADATA] = original.git_sha
    if original is not None and original.runtime:
        metadata[RUNTIME_METADATA] = dg.MetadataValue.json(dict(original.runtime))
    code_version = original.code_version if original is not None else None
    return dg.AssetMaterialization(
        node.asset,
        partition=node.partition or None,
        metadata=metadata,
        tags={CODE_VERSION_TAG: code_version} if code_version else None,
    )


def record_retraction(instance: dg.DagsterInstance, record: BackfillRecord) -> None:
    """The partitions `record`'s retract removed (`record.retracted`), marked not materialized
    in `instance` (dagster_instance/partition_wipe.py; an unpartitioned asset is wiped whole) and each
    observed as removed by it, in one run: the UI and `--catch-up` see them missing, and why.
    Done again (a retract resumed after a kill), it wipes nothing more and observes them again."""
    events = []
    for node in nodes_of(record.retracted):
        events.append(
            dg.AssetObservation(node.asset, partition=node.partition or None, metadata={"retracted_by": record.id})
        )
    for asset, partitions in record.retracted.items():
        key = dg.AssetKey.from_user_string(asset)
        if partitions == [UNPARTITIONED]:
            instance.wipe_assets([key])
        else:
            wipe_partitions(instance, key, partitions)
    run_reporting(instance, events, {BACKFILL_ID_TAG: record.id}, "partition_assets_retract")


def ran_nodes(instance: dg.DagsterInstance, backfill_id: str, graph: BackfillGraph) -> list[Node]:
    """The nodes of `graph` a run of the backfill succeeded on and left to the publish to
    record, in graph order: not those a catch-up left alone because they were current, nor
    those skipped (no output: running/skips.py), nor those whose run recorded its own
    materialization (their IO manager wrote as they ran, which no staging, publish or rollback
    holds back or undoes: running/coordinator.py)."""
    return _succeeded(graph, node_states(instance, backfill_id, graph))


def _succeeded(graph: BackfillGraph, states: Mapping[Node, tuple[NodeStatus, dg.DagsterRun]]) -> list[Node]:
    return [
        node
        for node in graph.nodes()
        if node in states and states[node][0] == NodeStatus.SUCCEEDED and defers_asset_events(states[node][1].tags)
    ]


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
    with_versions = versioned(table.table_format)
    if not published or with_versions is None:
        return {}
    before, after = with_versions.schema(table.uri, published - 1), with_versions.schema(table.uri, published)
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


def _schema_metadata_by_asset(record: BackfillRecord, tables: Tables, rolled_back: bool) -> dict[dg.AssetKey, dict]:
    versions = record.published_versions
    return {
        key: _schema_metadata(table, versions.get(key.to_user_string()), rolled_back) for key, table in tables.items()
    }


def _output_metadata(
    asset_graph: AssetGraph, run_events: Iterable[dg.EventLogEntry]
) -> dict[tuple[str, dg.AssetKey], dict]:
    """Per (run, asset): the metadata the asset's body gave its output in the run, from the
    runs' `run_events` (`_events_of_runs`; events other than STEP_OUTPUT are passed over). An
    asset another IO manager stores records its own materialization, in its node run."""
    asset_of = {}  # (step key, output name) -> asset
    for key in asset_graph.get_all_asset_keys():
        assets_def = asset_graph.assets_def_for_key(key)
        if assets_def.is_executable:
            asset_of[(assets_def.node_def.name, assets_def.get_output_name_for_asset_key(key))] = key
    found: dict[tuple[str, dg.AssetKey], dict] = {}
    for record in run_events:
        event = record.dagster_event
        if event is None or event.event_type != STEP_OUTPUT:
            continue
        output = event.step_output_data.step_output_handle.output_name
        asset = asset_of.get((record.step_key or "", output))
        if asset is not None:
            found.setdefault((record.run_id, asset), {}).update(event.step_output_data.metadata or {})
    return found


def _events_of_runs(
    instance: dg.DagsterInstance, run_ids: set[str], types: set[dg.DagsterEventType]
) -> Iterable[dg.EventLogEntry]:
    """The events of `types` of `run_ids`, in storage order, in three queries, from an event
    log of every run (the consolidated SQLite one, Postgres): the runs' earliest creation,
    the first run start from a second before it (every run of `run_ids` starts after it),
    then those kinds of events of every run since (other runs' are dropped here).
    Dagster's default SQLite event log keeps a database per run (`is_run_sharded`): one query
    per run there (`_per_run_database_events`); its cross-run index holds asset and run-status
    events only, so reading it would find no outputs at all. A query per run was a third of a
    publish with nothing to publish (bench DAG, 31 days: 125 runs, 0.35 of 1.2 s profiled), and
    grew with the runs."""
    if not run_ids:
        return []
    storage = instance.event_log_storage
    if isinstance(storage, SqliteEventLogStorage) and storage.is_run_sharded:
        return _per_run_database_events(storage, run_ids, types)
    if storage.is_run_sharded:
        return [record for run_id in sorted(run_ids) for record in instance.all_logs(run_id, of_type=types)]
    earliest = instance.get_run_records(
        dg.RunsFilter(run_ids=sorted(run_ids)), limit=1, order_by="create_timestamp", ascending=True
    )
    after = earliest[0].create_timestamp.timestamp() - 1 if earliest else 0.0
    starts = instance.fetch_run_status_changes(
        dg.RunStatusChangeRecordsFilter(dg.DagsterEventType.RUN_START, after_timestamp=after), limit=1, ascending=True
    ).records
    since = instance.event_log_storage.get_logs_for_all_runs_by_log_id(
        after_cursor=starts[0].storage_id - 1 if starts else -1, dagster_event_type=types
    )
    return [record for record in since.values() if record.run_id in run_ids]


def _per_run_database_events(
    storage: SqliteEventLogStorage, run_ids: set[str], types: set[dg.DagsterEventType]
) -> list[dg.EventLogEntry]:
    """The events of `types` of `run_ids` from Dagster's default event log
    (a SQLite database per run, of Dagster's event table), each run's database read through
    one read-only connection. Dagster's own read of a run builds an SQLAlchemy engine and
    checks the database's schema revision first: several times the cost of the query, per
    node run, in a publish. A run without a database (no event stored) has none."""
    table = SqlEventLogStorageTable
    values = sorted(event_type.value for event_type in types)
    query = (
        f"SELECT {table.c.event.name} FROM {table.name} "
        f"WHERE {table.c.dagster_event_type.name} IN ({', '.join('?' * len(values))}) ORDER BY {table.c.id.name}"
    )
    found = []
    for run_id in sorted(run_ids):
        path = storage.path_for_shard(run_id)
        if not os.path.exists(path):
            continue
        uri = f"file:{path}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True, timeout=SQLITE_BUSY_TIMEOUT_SECONDS)) as connection:
            rows = connection.execute(query, values).fetchall()
        found += [deserialize_value(event, dg.EventLogEntry) for (event,) in rows]
    return found


def record_failures(
    instance: dg.DagsterInstance, backfill_id: str, graph: BackfillGraph, status: Mapping[Node, NodeStatus]
) -> list[Node]:
    """Records what a run of backfill `backfill_id`'s nodes (`status`, as the scheduler left
    them) left failed as Dagster's failed runs leave it: `dagster asset materialize` of a
    partition (and Dagster's asset backfill, running a child with its parent) plans every step
    of its run (ASSET_MATERIALIZATION_PLANNED), then the run fails, and Dagster's partition
    status (the UI's, `get_status_by_partition`, the catch-up's) reads a partition planned in a
    failed run and not materialized since as failed, the steps it never ran included. Planned
    here, in one run (FAILURES_JOB) that then fails naming them: the nodes never run because a
    node upstream of them failed (blocked), and the failed nodes whose runs planned nothing (a
    staged run defers its asset events; any other run planned its own). Nothing is recorded
    materialized; a later materialization of a partition (a retry's, a publish's) reads
    materialized again. Returns the nodes planned: the failed ones, then the blocked ones, each
    in graph order; none (and no run) when nothing is left to plan.

    Not guaranteed: a node blocked only behind canceled runs (a cancel, a run terminated) is
    not recorded: Dagster counts the partitions a canceled run planned neither failed nor
    materialized. The run fails as Dagster's did: a user's run-failure sensor sees it too.
    """
    if not {NodeStatus.FAILED, NodeStatus.BLOCKED} & set(status.values()):
        return []
    states = node_states(instance, backfill_id, graph)
    behind = {node for node, (_, run) in states.items() if run.status == dg.DagsterRunStatus.FAILURE}
    failed = [node for node in graph.nodes() if node in behind]
    blocked = []
    for node in graph.nodes():  # parents before their children
        if status.get(node) == NodeStatus.BLOCKED and any(parent in behind for parent in graph.upstream(node)):
            behind.add(node)
            blocked.append(node)
    unplanned = [node for node in failed if defers_asset_events(states[node][1].tags)]
    if not unplanned and not blocked:
        return []
    recorded = [*unplanned, *blocked]
    planned = [AssetMaterializationPlannedData(node.asset, partition=node.partition or None) for node in recorded]
    never_ran = f"; {describe_nodes(blocked)} never ran, blocked behind them" if blocked else ""
    failure = (
        f"backfill {backfill_id}: {describe_nodes(failed)} failed{never_ran}. "
        f"`partition-assets backfill retry {backfill_id}` runs them again"
    )
    run_reporting(instance, planned, {BACKFILL_ID_TAG: backfill_id}, FAILURES_JOB, failure=failure)
    return recorded


# The job name of every run `run_reporting` makes starts so: the capacity counts none as production's.
REPORTING_JOB_PREFIX = "partition_assets_"


def run_reporting(
    instance: dg.DagsterInstance,
    events: Sequence[AssetEvent | dg.AssetCheckEvaluation],
    tags: dict[str, str],
    name: str,
    failure: str | None = None,
) -> None:
    """Records `events` from one in-process run named `name` (starting with
    REPORTING_JOB_PREFIX) in `instance`: asset events in one batch (event_batches.py), then check
    evaluations as the op's own, each of an asset this run materialized judging the
    materialization it stored (`judging_stored`). With `failure`, the run then fails as a run
    of Dagster's whose step failed (`dg.Failure(failure)`: what the run recorded is what such a
    run left, `record_failures`); an error recording the events is raised either way."""
    asset_events = [event for event in events if not isinstance(event, dg.AssetCheckEvaluation)]
    evaluations = [event for event in events if isinstance(event, dg.AssetCheckEvaluation)]
    materialized = {event.asset_key for event in asset_events if isinstance(event, dg.AssetMaterialization)}
    errors: list[Exception] = []  # what recording the events raised

    @dg.op(name=f"{name}_op")
    def report():
        context = dg.OpExecutionContext.get()
        failpoint(f"{name}_started")  # killed here, the run is left STARTED (`_end_cut_publish_runs`)
        try:
            store_asset_events(context, asset_events)
            yield from judging_stored(context.instance, evaluations, materialized)
        except Exception as error:
            errors.append(error)
            raise
        if failure is not None:
            raise dg.Failure(description=failure)
        yield dg.Output(None)

    @dg.job(name=name, executor_def=dg.in_process_executor)
    def reporting_job():
        report()

    # Its console quiet, as the node runs' are: the events are in the run's log. Not raising
    # on the step's failure, the run ends as Dagster's do: failed because a step failed.
    reporting_job.execute_in_process(
        instance=instance,
        tags=tags,
        run_config=quiet_console_config(reporting_job, {}),
        raise_on_error=failure is None,
    )
    if errors:
        raise errors[0]


def judging_stored(
    instance: dg.DagsterInstance, evaluations: Sequence[dg.AssetCheckEvaluation], materialized: set[dg.AssetKey]
) -> list[dg.AssetCheckEvaluation]:
    """`evaluations`, each of an asset of `materialized` as judging the asset's latest
    materialization in `instance` (its partition's, for a partitioned check's evaluation), as
    Dagster's check results name the materialization they judged (`target_materialization_data`:
    what `is_current` and the Checks tab compare with the latest materialization). One query
    per asset and partition judged."""
    targets: dict[tuple[dg.AssetKey, str | None], AssetCheckEvaluationTargetMaterializationData | None] = {}
    judged = []
    for evaluation in evaluations:
        if evaluation.asset_key not in materialized:
            judged.append(evaluation)
            continue
        where = (evaluation.asset_key, evaluation.partition)
        if where not in targets:
            partitions = [evaluation.partition] if evaluation.partition else None
            latest = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=evaluation.asset_key, asset_partitions=partitions), limit=1
            ).records
            targets[where] = (
                AssetCheckEvaluationTargetMaterializationData(
                    storage_id=latest[0].storage_id, run_id=latest[0].run_id, timestamp=latest[0].timestamp
                )
                if latest
                else None
            )
        judged.append(replace(evaluation, target_materialization_data=targets[where]))
    return judged


STEP_OUTPUT = dg.DagsterEventType.STEP_OUTPUT
CHECK_EVALUATION = dg.DagsterEventType.ASSET_CHECK_EVALUATION
PUBLISH_RUN_TAG = "partition_assets/publish_run"
FAILURES_JOB = f"{REPORTING_JOB_PREFIX}failures"
