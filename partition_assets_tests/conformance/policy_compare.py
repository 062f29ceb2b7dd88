"""One backfill run twice on fresh instances, on the engine and by Dagster, and what each left:
its runs (per asset, the partitions of each run), its materializations and the outputs Dagster's
default IO manager stored.

The engine runs `partition-assets backfill run` in this process (its node runs in worker
processes), in the test's DAGSTER_HOME. Dagster runs its own asset backfill, in process: the
backfill added as the webserver's launch adds it (`PartitionBackfill`), of exactly the nodes the
engine planned (`backfill plan --json`), with the same run config, and driven by its backfill
daemon's iteration (`execute_backfill_iteration`) on an instance whose run launcher executes each
run as it is launched (Dagster's SyncInMemoryRunLauncher), until the backfill is done: each
iteration requests what the runs before it made ready, as the daemon does on its ticks.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Mapping, Sequence
from contextlib import redirect_stdout
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._core.definitions.partitions.partition_key_range import PartitionKeyRange
from dagster._core.execution.backfill import BulkActionStatus
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    PARTITION_NAME_TAG,
)

from partition_assets.backfill.state.store import BackfillStore
from partition_assets.cli.main import main
from partition_assets.code_location import load_definitions
from partition_assets.dagster_internals import AssetGraphSubset, AssetKeyPartitionKey
from partition_assets_tests.conformance.dagster_backfill import run_dagster_backfill

POLICY_DEFS = "partition_assets_tests.support.locations.policy_defs"

# Dagster runs the steps of a run in one process, as the engine's node runs do (its default
# executor would start a process per step, a run's whole cost here).
IN_PROCESS = {"execution": {"config": {"in_process": {}}}}
# Each run launched at once (no queue), executed in this process as it is launched.
_RUN_AT_ONCE = {
    "run_coordinator": {"module": "dagster._core.run_coordinator", "class": "DefaultRunCoordinator"},
    "run_launcher": {
        "module": "dagster._core.launcher.sync_in_memory_run_launcher",
        "class": "SyncInMemoryRunLauncher",
    },
}


@dataclass(frozen=True)
class Outcome:
    """What a backfill left in its instance: per asset, the partitions of each run that
    materialized it, sorted (`runs`); per asset and partition, the `value` its materialization's
    metadata holds, or None (`materialized`); and the outputs stored, by path under the storage
    folder (`outputs`)."""

    runs: dict[str, list[tuple[str, ...]]]
    materialized: dict[str, dict[str, str | None]]
    outputs: dict[str, Any]

    def run_counts(self) -> dict[str, int]:
        return {asset: len(runs) for asset, runs in self.runs.items()}


def planned_nodes(plan: Mapping[str, Any]) -> dict[str, list[str]]:
    """Per asset, the partitions a plan (`plan_json`) holds."""
    nodes: dict[str, list[str]] = {}
    for node in plan["nodes"]:
        nodes.setdefault(node["asset"], []).append(node["partition"])
    return nodes


def plan_json(args: Sequence[str]) -> dict[str, Any]:
    """`partition-assets backfill plan <args> --json`, parsed."""
    return json.loads(_printed(["backfill", "plan", "-m", POLICY_DEFS, *args, "--json"]))


def _printed(argv: list[str], exit_code: int = 0) -> str:
    """What `partition-assets <argv>` printed, run in this process; it must exit `exit_code`."""
    out = StringIO()
    with redirect_stdout(out):
        code = main(argv)
    assert code == exit_code, out.getvalue()
    return out.getvalue()


def on_engine(home: Path, args: Sequence[str], exit_code: int = 0) -> Outcome:
    """`partition-assets backfill run -m POLICY_DEFS <args>` in the DAGSTER_HOME `home` (set in
    the environment), which must exit `exit_code` (1: nodes failed), and what it left there."""
    _printed(["backfill", "run", "-m", POLICY_DEFS, *args], exit_code)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return outcome_of(instance, home / "storage")


def by_dagster(
    root: Path,
    nodes: Mapping[str, Sequence[str]],
    run_config: Mapping[str, Any] | None = None,
    ends: BulkActionStatus = BulkActionStatus.COMPLETED_SUCCESS,
) -> Outcome:
    """Dagster's own asset backfill of `nodes` (per asset, its partitions) with `run_config`, on a
    fresh instance at `root`, run to its end, which must be `ends`; what it left there."""
    asset_graph = load_definitions(POLICY_DEFS).resolve_asset_graph()
    subset = AssetGraphSubset.from_asset_partition_set(
        {AssetKeyPartitionKey(dg.AssetKey.from_user_string(a), p) for a, ps in nodes.items() for p in ps}, asset_graph
    )
    root.mkdir(parents=True, exist_ok=True)
    with dg.instance_for_test(temp_dir=str(root), overrides=_RUN_AT_ONCE) as instance:
        backfill = run_dagster_backfill(instance, POLICY_DEFS, subset, {**IN_PROCESS, **(run_config or {})})
        assert backfill.status == ends, backfill.status
        return outcome_of(instance, root / "storage")


def outcome_of(instance: dg.DagsterInstance, storage: Path) -> Outcome:
    """The runs, materializations and stored outputs a backfill left in `instance`."""
    asset_graph = load_definitions(POLICY_DEFS).resolve_asset_graph()
    runs: dict[str, list[tuple[str, ...]]] = {}
    materialized: dict[str, dict[str, str | None]] = {}
    for run in instance.get_runs():
        for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
            materialization = entry.asset_materialization
            assert materialization is not None
            value = materialization.metadata.get("value")
            materialized.setdefault(materialization.asset_key.to_user_string(), {})[materialization.partition or ""] = (
                value.value if value is not None else None
            )
        # A run of partitions: the engine's node runs and Dagster's backfill runs (not the
        # engine's publish run, which records what its node runs staged).
        for key in run.asset_selection or () if _is_partitioned_run(run) else ():
            runs.setdefault(key.to_user_string(), []).append(_partitions_of(run, asset_graph.get(key).partitions_def))
    assets = {key.to_user_string() for key in asset_graph.get_all_asset_keys()}
    outputs = {  # Dagster's default IO manager stores under <storage>/<asset>/<partition>, beside the instance's
        str(path.relative_to(storage)): pickle.loads(path.read_bytes())
        for path in storage.rglob("*")
        if path.is_file() and path.relative_to(storage).parts[0] in assets
    }
    return Outcome({asset: sorted(found) for asset, found in runs.items()}, materialized, outputs)


def _is_partitioned_run(run: dg.DagsterRun) -> bool:
    return PARTITION_NAME_TAG in run.tags or ASSET_PARTITION_RANGE_START_TAG in run.tags


def _partitions_of(run: dg.DagsterRun, partitions_def: dg.PartitionsDefinition | None) -> tuple[str, ...]:
    """The partitions `run` covers, by its tags (a range's, or one partition's)."""
    start, end = run.tags.get(ASSET_PARTITION_RANGE_START_TAG), run.tags.get(ASSET_PARTITION_RANGE_END_TAG)
    if start is not None and end is not None and partitions_def is not None:
        return tuple(partitions_def.get_partition_keys_in_range(PartitionKeyRange(start, end)))
    return (run.tags.get(PARTITION_NAME_TAG, ""),)


def refused(home: Path, argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line `partition-assets <argv>` printed when it refused a bad input (exit 2),
    after checking that it wrote nothing: no run, no backfill record, no output in `home`."""
    assert main(list(argv)) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1, error
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert not instance.get_runs() and not BackfillStore(instance).ids()
    assert not (home / "storage").exists() or not any(path.is_file() for path in (home / "storage").rglob("*"))
    return error
