"""What a backfill re-runs: the original materializations of its partitions, the input
versions they read and the runtime they ran on.

`--inputs-as-of original` pins every input table the backfill does not rewrite to the
version the original materialization of each partition read (its `input_versions`
metadata); `--inputs-as-of <ISO time>` pins each such table to its version as of that
time, the same for every node. Pins are decided once, when the backfill starts, kept in
its record (a resumed backfill reads the same versions) and passed to each node run in
its tags (run_tags.pinned_input_tags); the IO manager reads those versions. Partitions
whose pins differ never share a run. The same originals' commit, code version and runtime
are what a rollback restores (backfill/publishing/provenance.py).

Not guaranteed: inputs stored by other IO managers, or by a format without versions
(Parquet), are not pinned; a pinned version whose files were vacuumed fails its node
with delta-rs's error; inputs the backfill rewrites are read as it stages them, never
pinned.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace

import dagster as dg

from partition_assets.backfill.model import InputsAsOf, Node
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.planning.keys import UNPARTITIONED
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing.tables import input_tables
from partition_assets.deploy.runtime import RUNTIME_METADATA, runtime_differences
from partition_assets.deploy.versioning import CODE_VERSION_TAG, recorded_git_sha, run_git_shas
from partition_assets.errors import BackfillPlanError
from partition_assets.storage.io_manager import INPUT_VERSIONS_METADATA

# Input versions a staged backfill recorded for inputs it rewrote itself: "staged:<backfill id>".
_STAGED_PREFIX = "staged:"
_SHOWN = 5
# Materialization records Dagster fetches at most in one call (`fetch_materializations` refuses more).
_FETCH = 10_000

# asset -> the table version a node reads it at
Pins = dict[str, int]


@dataclass(frozen=True)
class Original:
    """What the latest materialization of one (asset, partition) recorded."""

    input_versions: Mapping[str, int | str] = field(default_factory=dict)
    runtime: Mapping[str, str] = field(default_factory=dict)
    git_sha: str | None = None  # the commit that made it (metadata, else its run's tag); None when unrecorded
    code_version: str | None = None


def originals(
    instance: dg.DagsterInstance, graph: BackfillGraph, left_alone: AbstractSet[Node] = frozenset()
) -> dict[Node, Original]:
    """The latest materialization of each node of `graph` that has one, but those of `left_alone`
    (the nodes a `--catch-up` backfill leaves as they are: never re-run, so neither pinned nor
    restored by a rollback): per asset, two queries per 10,000 partitions, and the run tags of
    those recording no commit in their metadata in one query per 500 runs. What it reads grows
    with the nodes the backfill runs, not with the asset's history."""
    found: dict[Node, Original] = {}
    untagged: dict[str, list[Node]] = {}  # run id -> the nodes it made without recording a commit

    def add(node: Node, run_id: str, materialization: dg.AssetMaterialization) -> None:
        found[node] = _original(materialization)
        if found[node].git_sha is None:
            untagged.setdefault(run_id, []).append(node)

    for key, asset_slice in graph.slices.items():
        if asset_slice.partitions_def is None:
            event = (
                instance.get_latest_materialization_event(key) if Node(key, UNPARTITIONED) not in left_alone else None
            )
            if event is not None and event.asset_materialization is not None:
                add(Node(key, UNPARTITIONED), event.run_id, event.asset_materialization)
            continue
        wanted = [partition for partition in asset_slice.partition_keys if Node(key, partition) not in left_alone]
        for start in range(0, len(wanted), _FETCH):
            storage_ids = instance.get_latest_storage_id_by_partition(
                key, dg.DagsterEventType.ASSET_MATERIALIZATION, set(wanted[start : start + _FETCH])
            )
            if not storage_ids:
                continue
            records = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=key, storage_ids=list(storage_ids.values())), limit=len(storage_ids)
            ).records
            for record in records:
                materialization = record.asset_materialization
                if materialization is not None and materialization.partition is not None:
                    add(Node(key, materialization.partition), record.run_id, materialization)
    for run_id, sha in run_git_shas(instance, sorted(untagged)).items():
        for node in untagged[run_id]:
            found[node] = replace(found[node], git_sha=sha)
    return found


def _original(materialization: dg.AssetMaterialization) -> Original:
    def json_entry(name: str) -> dict:
        value = materialization.metadata.get(name)
        return value.value if isinstance(value, dg.JsonMetadataValue) and isinstance(value.value, dict) else {}

    return Original(
        json_entry(INPUT_VERSIONS_METADATA),
        json_entry(RUNTIME_METADATA),
        recorded_git_sha(materialization),
        (materialization.tags or {}).get(CODE_VERSION_TAG),
    )


def pin_inputs(
    spec: BackfillSpec, definitions: dg.Definitions, graph: BackfillGraph, found: Mapping[Node, Original]
) -> dict[Node, Pins]:
    """The version of each input table outside the backfill that each node reads, as
    `spec.inputs_as_of` asks; {} when it asks nothing. BackfillPlanError names the nodes
    that cannot be pinned (no original, or one that recorded no version of an input) and
    the fix; nothing is launched then."""
    if spec.inputs_as_of is None:
        return {}
    inputs = input_tables(definitions, graph)
    when = spec.pinned_time()
    if when is not None:
        as_of = {}
        for table in {table.asset: table for tables in inputs.values() for table in tables}.values():
            version = table.table_format.version_at(table.uri, when)
            if version is None:
                raise BackfillPlanError(
                    f"--inputs-as-of {spec.inputs_as_of}: input {table.asset.to_user_string()} had no table at "
                    f"{table.uri} then; pick a later time. Nothing was launched"
                )
            as_of[table.asset.to_user_string()] = version
        return {
            node: {t.asset.to_user_string(): as_of[t.asset.to_user_string()] for t in inputs[node.asset]}
            for node in graph.nodes()
        }
    pins: dict[Node, Pins] = {}
    unpinnable: list[str] = []
    published: dict[tuple[str, str], int | None] = {}
    for node in graph.nodes():
        original = found.get(node)
        node_pins: Pins = {}
        for table in inputs[node.asset]:
            name = table.asset.to_user_string()
            recorded = original.input_versions.get(name) if original else None
            if isinstance(recorded, str) and recorded.startswith(_STAGED_PREFIX):
                backfill_id = recorded.removeprefix(_STAGED_PREFIX)
                if (name, backfill_id) not in published:
                    published[(name, backfill_id)] = table.table_format.published_version(table.uri, backfill_id)
                recorded = published[(name, backfill_id)]
            if not isinstance(recorded, int):
                why = "was never materialized" if original is None else f"recorded no version of {name}"
                unpinnable.append(f"{node.asset.to_user_string()} {node.partition or '(unpartitioned)'} {why}")
                break
            node_pins[name] = recorded
        pins[node] = node_pins
    if unpinnable:
        more = f" and {len(unpinnable) - _SHOWN} more" if len(unpinnable) > _SHOWN else ""
        raise BackfillPlanError(
            f"--inputs-as-of {InputsAsOf.original}: {'; '.join(unpinnable[:_SHOWN])}{more}, so the version its "
            "original read is unknown. Pin to a time (--inputs-as-of 2024-03-01T00:00:00+00:00) or run "
            "without --inputs-as-of; nothing was launched"
        )
    return pins


def break_runs_between_pins(graph: BackfillGraph, pins: Mapping[Node, Pins]) -> None:
    """Marks, in each slice of `graph`, where consecutive partitions read different pinned
    versions: one run reads one version of each input, so they must not share it."""
    if not pins:  # nothing pinned: no run to break
        return
    for key, asset_slice in graph.slices.items():
        keys = asset_slice.partition_keys
        differ = {i for i in range(1, len(keys)) if pins.get(Node(key, keys[i])) != pins.get(Node(key, keys[i - 1]))}
        asset_slice.breaks = asset_slice.breaks | differ


def runtime_warnings(found: Mapping[Node, Original], current: Mapping[str, str]) -> list[str]:
    """One line per asset whose original partitions ran on another runtime than `current`."""
    changed: Counter[tuple[str, tuple[str, ...]]] = Counter()
    for node, original in found.items():
        differences = tuple(runtime_differences(original.runtime, current))
        if differences:
            changed[(node.asset.to_user_string(), differences)] += 1
    return [
        f"{asset}: {count} partition(s) were written on another runtime ({', '.join(differences)}); "
        "the re-run may not reproduce them"
        for (asset, differences), count in sorted(changed.items())
    ]


def pins_to_json(pins: Mapping[Node, Pins]) -> dict[str, dict[str, Pins]]:
    """`pins` as the backfill record keeps them: asset -> partition -> input -> version."""
    saved: dict[str, dict[str, Pins]] = {}
    for node, node_pins in pins.items():
        saved.setdefault(node.asset.to_user_string(), {})[node.partition] = dict(node_pins)
    return saved


def pins_from_json(saved: Mapping[str, Mapping[str, Pins]]) -> dict[Node, Pins]:
    """The inverse of `pins_to_json`."""
    return {
        Node(dg.AssetKey.from_user_string(asset), partition): dict(node_pins)
        for asset, by_partition in saved.items()
        for partition, node_pins in by_partition.items()
    }
