"""Runs one small user project twice, each on a fresh instance of its own: by the engine
(`partition-assets backfill run`, through the CLI's `main`) and by Dagster (`dagster asset
materialize`, Dagster's own command, one run per partition as its backfill makes them); then
reads what each instance and Dagster's default IO manager hold, as one comparable value.

Not guaranteed: the runs' ids, timestamps and counts differ (the engine runs a run per node,
then a publish run); what is compared is what a reader of the instance and the storage sees.
"""

from __future__ import annotations

import json
import pickle
import shutil
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

import click
import dagster as dg
from dagster._cli.asset import asset_materialize_command

from partition_assets.cli.main import main
from partition_assets.code_location import load_definitions
from partition_assets_tests.support.instances import instance_env

# Dagster runs the steps of a run in one process (as the engine's node runs do), not a process each.
IN_PROCESS = json.dumps({"execution": {"config": {"in_process": {}}}})


@dataclass(frozen=True)
class Holdings:
    """What an instance and its storage hold after a backfill.

    materialized: asset -> the partitions the instance calls materialized ("" for an unpartitioned asset).
    checks: (check, partition) -> the latest evaluation's status and whether it judged the
        partition's latest materialization (`is_current`, as the Checks tab reads it). Not the
        rows Dagster's own runs leave of an unpartitioned check under each partition of their
        run, planned and never evaluated (the evaluation is the check's, of no partition):
        storage bookkeeping no reader sees, and which runs that defer their asset events skip.
    outputs: each file Dagster's default IO manager stored, by its path under the storage folder -> its value.
    """

    materialized: dict[str, set[str]]
    checks: dict[tuple[str, str | None], tuple[str, bool]]
    outputs: dict[str, object]


def holdings(home: Path, module: str) -> Holdings:
    """What the instance at `home` holds of the assets and checks of code location `module`,
    and what Dagster's default IO manager stored under `home`/storage."""
    asset_graph = load_definitions(module).resolve_asset_graph()
    materialized: dict[str, set[str]] = {}
    checks: dict[tuple[str, str | None], tuple[str, bool]] = {}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for key in asset_graph.materializable_asset_keys:
            if asset_graph.get(key).is_partitioned:
                partitions = set(instance.get_materialized_partitions(key))
            else:
                partitions = {""} if instance.get_latest_materialization_event(key) else set()
            if partitions:
                materialized[key.to_user_string()] = partitions
        infos = instance.event_log_storage.get_asset_check_partition_info(list(asset_graph.asset_check_keys))
        for info in infos:
            partitioned = asset_graph.get(info.check_key).partitions_def is not None
            if info.partition_key is None or partitioned:
                checks[(info.check_key.name, info.partition_key)] = (
                    info.latest_execution_status.value,
                    info.is_current,
                )
    storage = home / "storage"
    outputs = {}  # Dagster's default IO manager stores an asset at storage/<key path>[/<partition>]
    for key in asset_graph.materializable_asset_keys:
        stored = storage.joinpath(*key.path)
        for path in [stored] if stored.is_file() else stored.rglob("*"):
            if path.is_file():
                outputs[str(path.relative_to(storage))] = pickle.loads(path.read_bytes())
    return Holdings(materialized, checks, outputs)


def partition_statuses(home: Path, module: str, partitions: Sequence[str]) -> dict[str, dict[str, str]]:
    """Each partitioned asset of code location `module` -> the status of each of `partitions`
    in the instance at `home` as Dagster's UI shows it (`get_status_by_partition`, the asset's
    partition status cache): "materialized", "failed", "in_progress" or "missing"."""
    asset_graph = load_definitions(module).resolve_asset_graph()
    statuses = {}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for key in asset_graph.materializable_asset_keys:
            partitions_def = asset_graph.get(key).partitions_def
            if partitions_def is not None:
                status = instance.get_status_by_partition(key, list(partitions), partitions_def) or {}
                statuses[key.to_user_string()] = {
                    partition: found.value.lower() if (found := status.get(partition)) else "missing"
                    for partition in partitions
                }
    return statuses


def on_the_engine(module: str, select: str, start: str, end: str, *options: str) -> tuple[int, str]:
    """`partition-assets backfill run` of the assets `select` picks of `module` over
    `start`..`end`, in the instance of the test's DAGSTER_HOME: its exit code and its output."""
    return engine_command("backfill", "run", "-m", module, "--select", select, "--start", start, "--end", end, *options)


def engine_command(*arguments: str) -> tuple[int, str]:
    """`partition-assets <arguments>` in this process: its exit code and its output."""
    printed = StringIO()
    with redirect_stdout(printed), redirect_stderr(printed):
        code = main(list(arguments))
    return code, printed.getvalue()


def by_dagster(
    home: Path, home_template: Path, module: str, select: str, partitions: Sequence[str], monkeypatch
) -> list[bool]:
    """`dagster asset materialize` of the assets `select` picks of `module`, one run per partition of
    `partitions` (as Dagster's backfill runs them), in a fresh instance at `home` (the
    DAGSTER_HOME from then on): whether each run succeeded."""
    shutil.copytree(home_template, home)
    for name, value in instance_env(home).items():
        monkeypatch.setenv(name, value)
    succeeded = []
    for partition in partitions:
        arguments = ["-m", module, "--select", select, "--partition", partition, "--config-json", IN_PROCESS]
        try:
            asset_materialize_command.main(arguments, standalone_mode=False)
            succeeded.append(True)
        except click.ClickException:  # "Materialization failed.": its run failed
            succeeded.append(False)
    return succeeded


@dataclass(frozen=True)
class SideBySide:
    """One case run both ways: the engine's exit code, output and holdings, then Dagster's
    holdings and whether each of its runs succeeded."""

    code: int
    output: str
    on_engine: Holdings
    by_dagster: Holdings
    dagster_runs: list[bool]


def side_by_side(
    module: str, select: str, days: Sequence[str], home: Path, home_template: Path, tmp_path: Path, monkeypatch
) -> SideBySide:
    """`partition-assets backfill run` of `module`'s `select` over `days` in the test's
    DAGSTER_HOME (`home`), then `dagster asset materialize` of the same partitions, one run per
    day, in a fresh instance (`by_dagster`; the DAGSTER_HOME from then on)."""
    code, output = on_the_engine(module, select, days[0], days[-1])
    on_engine = holdings(home, module)
    dagster_home = tmp_path / "dagster_materialize_home"
    dagster_runs = by_dagster(dagster_home, home_template, module, select, days, monkeypatch)
    return SideBySide(code, output, on_engine, holdings(dagster_home, module), dagster_runs)
