"""Plans that the instance's history picks: `produced_by` (the partitions whose latest
materialization a commit, or a range of commits, made) and `stale`, each node with its reason.

`plan_by_history` plans the spec's candidates as `plan` does (the range, keys or, when the spec
names neither, every partition of the selection), keeps those a rule of reasons.py selects,
then adds what they feed when `downstream` asks. It reads each partition's latest
materialization from the provenance index (dagster_instance/provenance_index.py), brought up to the
event log's last event first: its cost follows the partitions planned and the events since the
last plan, not the history. Partitions made again after the spec's `history_as_of` are read
from the event log as of then, those alone.

A recorded backfill keeps `history_as_of` (`pinned_history`, when it is recorded), so that
resuming it plans the same nodes once its own runs have made them current.

Not guaranteed: a commit is matched exactly (a `-dirty` checkout is no commit); a
materialization recording no commit (neither metadata nor run tag) is matched by the code
version the commits' source gives its asset's function, which only a top-level function has.
After a rebase the commits the runs ran have other ids than those `A..B` names: a selection
of none of them is refused naming the recorded commits, not mapped to their new ids (git keeps
no such link).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
import numpy as np

from partition_assets.backfill.planning.edges import edges_between
from partition_assets.backfill.planning.graph import AssetSlice, BackfillGraph, build_graph, plan
from partition_assets.backfill.planning.mapping_memo import MappingMemo
from partition_assets.backfill.planning.reasons import (
    SHORT_SHA,
    Made,
    Materialized,
    NodeReasons,
    UpstreamMade,
    add_downstream_reasons,
    produced_by,
    stale,
)
from partition_assets.backfill.planning.spec import BackfillSpec, Wording
from partition_assets.backfill.planning.windows import WindowCache, padding_of
from partition_assets.code_location import import_module_named, split_target
from partition_assets.dagster_instance.provenance_index import latest_provenance, with_run_commits
from partition_assets.deploy.git import commits_named, source_version_at
from partition_assets.deploy.versioning import CODE_VERSION_TAG, asset_function, recorded_git_sha, run_git_shas
from partition_assets.errors import BackfillPlanError, NoCodeVersionError

if TYPE_CHECKING:
    from partition_assets.dagster_internals import BaseAssetGraph

_PAGE = 10_000  # materialization records per query
# Partitions a query names at most (SQLite caps a statement's variables); more: the asset's whole history.
_NAMED_AT_MOST = 500
_COMMITS_SHOWN = 5  # of the commits the materializations name, when --produced-by found none


def pinned_history(spec: BackfillSpec, instance: dg.DagsterInstance) -> BackfillSpec:
    """`spec` judging its history as of the instance's latest event, when history picks its
    partitions and it names no event yet: what a backfill is recorded with."""
    if not spec.selects_by_history() or spec.history_as_of is not None:
        return spec
    return dataclasses.replace(spec, history_as_of=instance.event_log_storage.get_maximum_record_id() or 0)


def plan_by_history(
    definitions: dg.Definitions, spec: BackfillSpec, instance: dg.DagsterInstance, wording: Wording
) -> BackfillGraph:
    """The graph of the nodes `spec.produced_by` or `spec.stale` select among its candidates
    (plus their downstream with `spec.downstream`), each with its reason (`graph.reasons`).

    Raises:
        UnknownCommitError: `produced_by` names no commit of the code location's repository.
        CommitRangeError: `produced_by` is A..B and A is no ancestor of B.
        NoCodeVersionError: `stale` and a selected asset has no code version.
        BackfillPlanError: The candidates are refused (see `plan`), or no candidate is selected.
    """
    asset_graph = definitions.resolve_asset_graph()
    whole = spec.time_range() is None and not spec.keys
    candidates = plan(
        asset_graph,
        dataclasses.replace(spec, downstream=False, all_partitions=spec.all_partitions or whole),
        dynamic_partitions_store=instance,
        wording=wording,
        parents_must_exist=False,  # only the picked partitions run: build_graph below checks theirs
        edges=False,  # those of the picked partitions alone: build_graph below
    )
    if spec.stale:
        _refuse_unversioned(asset_graph, candidates, wording)
    commits = commits_named(_source_directory(spec.module), spec.produced_by) if spec.produced_by else None
    parents = {p for key in candidates.slices for p in asset_graph.get(key).parent_keys} if spec.stale else set()
    read = [*candidates.slices, *(parents - set(candidates.slices))]
    reasons = _judged(definitions, spec, instance, candidates, read, commits)
    picked = {key: list(by_partition) for key, by_partition in reasons.items() if by_partition}
    if not picked:
        recorded = _recorded_commits(candidates, latest_materializations(instance, read, spec)) if commits else []
        why = (
            _other_commits(spec, commits, recorded)
            if commits is not None and recorded
            else f"none of the {candidates.node_count()} candidate partitions' latest materializations qualifies "
            "(nothing to re-run); widen the selection or the range"
        )
        raise BackfillPlanError(f"{spec.describe()} with {_judged_by(spec, wording)} selects no partition: {why}")
    graph = build_graph(
        asset_graph, picked, dynamic_partitions_store=instance, downstream=spec.downstream, picked_keys=picked
    )
    graph.reasons = add_downstream_reasons(graph, reasons)
    return graph


def _judged(
    definitions: dg.Definitions,
    spec: BackfillSpec,
    instance: dg.DagsterInstance,
    candidates: BackfillGraph,
    read: list[dg.AssetKey],
    commits: frozenset[str] | None,
) -> NodeReasons:
    """Per candidate asset, the partitions a rule selects with their reason, judged from the
    latest materializations of the assets `read` (released on return: the graph of what is
    picked is built without them)."""
    asset_graph = definitions.resolve_asset_graph()
    # --produced-by alone reads only the rows its commits may have made (the database filters them).
    latest = latest_materializations(instance, read, spec, None if spec.stale else commits)
    memo = MappingMemo(instance)
    # Every edge to an upstream asset the stale rule compares with, and one cache of their windows.
    mappings = {
        (key, parent): asset_graph.get_partition_mapping(key, parent)
        for key in (candidates.slices if spec.stale else ())
        for parent in sorted(asset_graph.get(key).parent_keys - {key})
    }
    windows = WindowCache(padding_of(mappings.values()))
    reasons: NodeReasons = {}
    for key, candidate in candidates.slices.items():
        found = {}
        if commits is not None:
            versions = cache(lambda key=key: _versions_at(definitions, key, commits))
            found = produced_by(candidate.partition_keys, latest[key], commits, versions)
        if spec.stale:
            upstreams = _upstreams(asset_graph, candidate, latest, mappings, windows, memo)
            current = str(asset_graph.get(key).code_version)
            for partition, reason in stale(candidate.partition_keys, latest[key], current, upstreams).items():
                found.setdefault(partition, reason)
        reasons[key] = {k: found[k] for k in candidate.partition_keys if k in found}
    return reasons


def latest_materializations(
    instance: dg.DagsterInstance,
    keys: Iterable[dg.AssetKey],
    spec: BackfillSpec,
    made_by: frozenset[str] | None = None,
) -> dict[dg.AssetKey, Mapping[str, Materialized]]:
    """Per asset, per partition ("" for an unpartitioned asset): its latest materialization up to
    `spec.history_as_of`, from the provenance index (dagster_instance/provenance_index.py, updated first;
    with `produced_by`, a commit not recorded when the index read the event is looked up).
    A partition whose latest materialization came after `history_as_of` is read from the event
    log as of then (`scanned_materializations`, for those partitions alone). With `made_by`,
    only the partitions one of those commits may have made: those recording one of them or
    none, and those made again after `history_as_of`."""
    provenance = latest_provenance(instance, keys, made_by=made_by, or_after=spec.history_as_of)
    if spec.produced_by:
        provenance = with_run_commits(instance, provenance)
    latest: dict[dg.AssetKey, Mapping[str, Materialized]] = dict(provenance)  # the index's rows, not copied
    if spec.history_as_of is not None:
        later = {
            key: {p for p, made in by_partition.items() if made.storage_id > spec.history_as_of}
            for key, by_partition in latest.items()
        }
        later = {key: partitions for key, partitions in later.items() if partitions}
        for key, then in scanned_materializations(instance, later, spec.history_as_of).items():
            latest[key] = {p: made for p, made in latest[key].items() if p not in later[key]} | then
    return latest


def scanned_materializations(
    instance: dg.DagsterInstance, partitions: Mapping[dg.AssetKey, AbstractSet[str] | None], history_as_of: int | None
) -> dict[dg.AssetKey, dict[str, Made]]:
    """What `latest_materializations` answers, read from the event log: per asset of
    `partitions`, of its partitions listed (None: all), the latest materialization up to
    `history_as_of`. One paginated query per asset, and the run tags of those recording no
    commit in their metadata in one query per 500 runs; only the few fields the rules read are
    kept (not Dagster's records: a year of 2,000 assets is 730k of them)."""
    before = None if history_as_of is None else history_as_of + 1
    latest: dict[dg.AssetKey, dict[str, Made]] = {}
    untagged: dict[str, list[tuple[dg.AssetKey, str]]] = {}  # run id -> what it made without a commit
    for key, wanted in partitions.items():
        # "": an unpartitioned asset
        named = None if wanted is None or "" in wanted or len(wanted) > _NAMED_AT_MOST else list(wanted)
        by_partition: dict[str, dg.EventLogRecord] = {}
        cursor = None
        while True:
            page = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=key, asset_partitions=named, before_storage_id=before),
                _PAGE,
                cursor,
                ascending=True,
            )
            for record in page.records:  # ascending: a later one replaces an earlier one
                partition = _materialization(record).partition or ""
                if wanted is None or partition in wanted:
                    by_partition[partition] = record
            if not page.has_more:
                break
            cursor = page.cursor
        latest[key] = {}
        for partition, record in by_partition.items():
            materialization = _materialization(record)
            sha = recorded_git_sha(materialization)
            if sha is None:
                untagged.setdefault(record.run_id, []).append((key, partition))
            code_version = (materialization.tags or {}).get(CODE_VERSION_TAG)
            latest[key][partition] = Made(record.storage_id, sha, code_version)
    for run_id, sha in run_git_shas(instance, sorted(untagged)).items():
        for key, partition in untagged[run_id]:
            latest[key][partition] = latest[key][partition]._replace(git_sha=sha)
    return latest


def _materialization(record: dg.EventLogRecord) -> dg.AssetMaterialization:
    materialization = record.asset_materialization
    assert materialization is not None  # the query asks for materializations only
    return materialization


def _upstreams(
    asset_graph: BaseAssetGraph,
    candidate: AssetSlice,
    latest: dict[dg.AssetKey, Mapping[str, Materialized]],
    mappings: dict[tuple[dg.AssetKey, dg.AssetKey], dg.PartitionMapping],
    windows: WindowCache,
    memo: MappingMemo,
) -> list[UpstreamMade]:
    """Each upstream asset of `candidate` (itself excepted) with its made partitions, the edges
    from the candidate partitions to them, and their latest storage ids."""
    found = []
    for parent in sorted(asset_graph.get(candidate.key).parent_keys - {candidate.key}):
        parent_def = asset_graph.get(parent).partitions_def
        made = latest[parent]
        keys = memo.order.sorted(parent_def, set(made)) if parent_def is not None else sorted(made)
        mapping = mappings[(candidate.key, parent)]
        dependency = edges_between(candidate, AssetSlice(parent, parent_def, keys), mapping, windows, memo)
        storage_ids = np.array([made[k].storage_id for k in keys], dtype=np.int64)
        found.append(UpstreamMade(parent.to_user_string(), dependency, keys, storage_ids))
    return found


def _refuse_unversioned(asset_graph: BaseAssetGraph, candidates: BackfillGraph, wording: Wording) -> None:
    unversioned = sorted(k.to_user_string() for k in candidates.slices if asset_graph.get(k).code_version is None)
    if unversioned:
        raise NoCodeVersionError(
            f"{wording('stale')} selects assets without a code version: {unversioned}; whether their code changed "
            "cannot be told. Give them a code_version (or stamp the code location with with_git_versions), or "
            f"leave them out of {wording('selection')}: nothing was planned"
        )


def _versions_at(definitions: dg.Definitions, key: dg.AssetKey, commits: frozenset[str]) -> frozenset[str]:
    """The code versions `commits`' source gives asset `key`'s function (none for a graph-backed asset)."""
    function = asset_function(definitions.resolve_assets_def(key).node_def)
    if function is None:
        return frozenset()
    return frozenset(v for commit in commits if (v := source_version_at(commit, function)) is not None)


def _source_directory(target: str) -> Path:
    """The folder of the code location's module or file: its commits are that repository's."""
    location, _ = split_target(target)
    if location.endswith(".py"):
        return Path(location).resolve().parent
    return Path(str(import_module_named(location).__file__)).resolve().parent


def _recorded_commits(candidates: BackfillGraph, latest: dict[dg.AssetKey, Mapping[str, Materialized]]) -> list[str]:
    """The commits the candidates' latest materializations record, the latest made first."""
    newest: dict[str, int] = {}
    for key, candidate in candidates.slices.items():
        for partition in candidate.partition_keys:
            made = latest[key].get(partition)
            if made is not None and made.git_sha is not None:
                newest[made.git_sha] = max(newest.get(made.git_sha, -1), made.storage_id)
    return sorted(newest, key=newest.__getitem__, reverse=True)


def _other_commits(spec: BackfillSpec, commits: frozenset[str], recorded: list[str]) -> str:
    """Why `produced_by` found nothing when the materializations record other commits than its
    `commits` (`recorded`): after a rebase (an amend, a squash) their commits have new ids."""
    shown = ", ".join(sha[:SHORT_SHA] for sha in recorded[:_COMMITS_SHOWN])
    more = f" and {len(recorded) - _COMMITS_SHOWN} more" if len(recorded) > _COMMITS_SHOWN else ""
    of = f"the {len(commits)} commits of" if len(commits) != 1 else "commit"
    return (
        f"no partition of the selection was produced by {of} {spec.produced_by}; the instance's materializations "
        f"name commits {shown}{more} (are they from before a rebase? A rebased commit gets a new id: name the "
        "commits the runs ran, which `git reflog` lists until git collects them); nothing was planned"
    )


def _judged_by(spec: BackfillSpec, wording: Wording) -> str:
    parts = [f"{wording('produced_by')} {spec.produced_by}"] if spec.produced_by else []
    return " and ".join([*parts, *([wording("stale")] if spec.stale else [])])
