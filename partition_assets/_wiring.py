"""One call wires a project: `partition_assets.definitions(assets=..., module=__name__)`.

It returns the project's Definitions with every part the engine and its Dagster surfaces
need, each replaceable by an option and each but the assets optional:

- Spark and the Delta IO manager, when the project uses them (`delta`): by default when an
  asset asks for them, by requesting the `spark` resource or the `delta_io_manager` IO manager
  key, or when `spark` or `lake` is given. Then the Delta IO manager (`SparkDeltaIOManager` on
  `lake`) is the default IO manager (`io_manager` replaces it) and the `delta_io_manager` key,
  and the Spark resource it uses is the `spark` one (default `SparkResource.from_env()`: no
  server starts before a step asks for a session). Otherwise the project keeps Dagster's
  default IO manager (or `io_manager`), and nothing of Spark is wired;
- the gates as asset checks (`gate_checks`: each backfill records its evaluation on the
  asset's Checks tab);
- the engine job (`engine`, default `sparse_backfill_job(module)`), the pause job and the
  jobs of the commands on a recorded backfill (`operation_jobs`), launchable from the Launchpad;
- the eager partitions sensor over every asset (`eager_sensor`; stopped unless
  PARTITION_ASSETS_SENSORS names `eager_partitions`);
- the in-process executor (`executor`): a step's work runs on the Spark server, and a step
  subprocess, Dagster's default, imports Dagster, pyspark and the code location again;
- git versions (`git_versions`, `with_git_versions` of `module`'s file): code versions, run
  tags and materialization metadata from the checkout's commit.

The result is resolved (`code_location.resolved`): an error in the definitions raises here.

Not guaranteed: an asset that makes a Spark DataFrame without the `spark` resource, in a
project where no asset asks for Spark, is stored by Dagster's default IO manager (which
cannot pickle it): pass `delta=True`. An option this call does not know raises WiringError, but a wrong value of a
known one (an IO manager of another kind, a job named as the engine's) is Dagster's to refuse,
when it does.
"""

from __future__ import annotations

import difflib
import importlib.util
import inspect
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from partition_assets.automation import (
    default_status,
    eager_partitions_sensor,
    pause_backfill_job,
    sparse_backfill_job,
)
from partition_assets.automation.operations import backfill_operation_jobs
from partition_assets.backfill import gate_checks as checks_of_gates
from partition_assets.code_location import resolved
from partition_assets.deploy import with_git_versions
from partition_assets.errors import WiringError
from partition_assets.spark import SparkResource
from partition_assets.storage import SparkDeltaIOManager

LAKE_ENV = "PARTITION_ASSETS_LAKE"
# The IO manager key an asset names (`io_manager_key=...`) to be stored as Delta in a project
# whose default IO manager is another.
DELTA_IO_MANAGER_KEY = "delta_io_manager"
# The resource keys by which an asset asks for Spark and Delta.
_SPARK_KEYS = frozenset({"spark", DELTA_IO_MANAGER_KEY})


def lake_root() -> str:
    """PARTITION_ASSETS_LAKE, or `.lake` under the working directory."""
    return os.environ.get(LAKE_ENV) or str(Path.cwd() / ".lake")


def definitions(
    *,
    assets: Iterable[Any],
    module: str,
    asset_checks: Sequence[dg.AssetChecksDefinition] = (),
    jobs: Sequence[dg.JobDefinition] = (),
    sensors: Sequence[dg.SensorDefinition] = (),
    schedules: Sequence[dg.ScheduleDefinition] = (),
    resources: Mapping[str, Any] | None = None,
    lake: str | None = None,
    spark: SparkResource | None = None,
    io_manager: Any = None,
    delta: bool | None = None,
    engine: dg.JobDefinition | None = None,
    gate_checks: bool = True,
    operation_jobs: bool = True,
    eager_sensor: bool = True,
    executor: dg.ExecutorDefinition | None = dg.in_process_executor,
    git_versions: bool = True,
    **unknown: object,
) -> dg.Definitions:
    """The Definitions of a project whose backfills run on the engine (see the module docstring).

    Args:
        assets: The project's assets (e.g. `dg.load_assets_from_modules([assets])`).
        module: The code location as the engine's node runs load it again: the module's name
            (`__name__` in a module on the import path), or a .py file's path.
        asset_checks: The project's own, added to the gate checks.
        jobs: The project's own, added to the engine's.
        sensors: The project's own, added to the eager sensor.
        schedules: The project's schedules.
        resources: The project's own; an `io_manager` or `spark` key here replaces the default one.
        lake: Where the Delta IO manager stores tables (default `lake_root()`).
        spark: The Spark resource (default `SparkResource.from_env()`, when Spark is wired).
        io_manager: The default IO manager (default: the Delta one when Delta is wired, else
            Dagster's own).
        delta: Whether Spark and the Delta IO manager are wired: True always, False never
            (the `spark` resource still is, when an asset requests it or `spark` is given),
            None (default) when an asset asks for them or `spark` or `lake` is given.
        engine: The engine job (default `sparse_backfill_job(module)`); pass the one your
            catch-up sensors launch.
        gate_checks: Whether the gates are asset checks.
        operation_jobs: Whether the pause job and the commands' jobs are added.
        eager_sensor: Whether the eager partitions sensor over every asset is added.
        executor: The default executor; None keeps Dagster's.
        git_versions: Whether `module`'s git commit stamps the definitions.

    Raises:
        WiringError: an option this call does not take (naming it, and the one meant); nothing
            was built or written.
    """
    if unknown:
        raise WiringError(_unknown_options_message(sorted(unknown)))
    project_assets = list(assets)
    engine_job = engine or sparse_backfill_job(module=module)
    built = dg.Definitions(
        assets=project_assets,
        asset_checks=[*(checks_of_gates(project_assets) if gate_checks else []), *asset_checks],
        jobs=[engine_job, *((pause_backfill_job(), *backfill_operation_jobs()) if operation_jobs else ()), *jobs],
        executor=executor,
        sensors=[
            *(
                [eager_partitions_sensor(dg.AssetSelection.all(), default_status=default_status("eager_partitions"))]
                if eager_sensor
                else []
            ),
            *sensors,
        ],
        schedules=list(schedules),
        resources={**_storage_resources(project_assets, delta, spark, lake, io_manager), **(resources or {})},
    )
    # Resolved here, so that the code server and the CLI read it resolved (without Dagster's
    # own beta warning).
    return resolved(with_git_versions(built, _file_of(module)) if git_versions else built)


def _storage_resources(
    assets: list[Any], delta: bool | None, spark: SparkResource | None, lake: str | None, io_manager: Any
) -> dict[str, Any]:
    """The IO managers and the Spark resource of a project (see `definitions`' `delta`)."""
    asked = set().union(*(getattr(asset, "required_resource_keys", ()) for asset in assets))
    wired = delta if delta is not None else bool(asked & _SPARK_KEYS) or spark is not None or lake is not None
    found: dict[str, Any] = {} if io_manager is None else {"io_manager": io_manager}
    if not wired:  # Dagster's default IO manager, or the one given; Spark only if requested
        requested = spark is not None or "spark" in asked
        return {"spark": spark or SparkResource.from_env(), **found} if requested else found
    chosen_spark = spark or SparkResource.from_env()
    delta_io = SparkDeltaIOManager(root_uri=lake or lake_root(), spark=chosen_spark)
    named = {DELTA_IO_MANAGER_KEY: delta_io} if DELTA_IO_MANAGER_KEY in asked else {}
    return {"spark": chosen_spark, "io_manager": delta_io, **found, **named}


def _file_of(module: str) -> str:
    """The file of the code location `module` (a .py path, or a module's name: its file is
    known while it is being imported, as when it calls `definitions`)."""
    if module.endswith(".py"):
        return module
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise WiringError(
            f"module={module!r} is no module on the import path: pass the code location's module "
            "name (`__name__`) or its .py file; nothing was built or written"
        )
    return spec.origin


def _unknown_options_message(names: list[str]) -> str:
    known = [name for name in inspect.signature(definitions).parameters if name != "unknown"]
    meant = [
        f"{name!r} (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(name, known, 1)) else repr(name)
        for name in names
    ]
    return (
        f"partition_assets.definitions() takes no option {', '.join(meant)}: its options are "
        f"{', '.join(known)}; nothing was built or written"
    )
