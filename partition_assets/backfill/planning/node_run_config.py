"""The run config a backfill's node runs take, as Dagster's backfill takes one (`backfill run
--config FILE.yaml`, the Launchpad job's `run_config`): read from YAML files, checked against
the config schemas of the backfill's assets before anything runs, and given to every node run
(merged over the partition's own config, as a run request's config is).

Dagster gives each run of a backfill the whole run config; a run of a subset of the asset job
accepts config for the assets outside its subset and ignores it. The engine's node runs are
such subsets (one asset each), so one run config serves them all, as it does Dagster's runs.

Not guaranteed: a run config that configures the executor (`execution:`) is Dagster's to
accept; local node runs execute their one step in process whatever it says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from partition_assets.errors import RunConfigError

if TYPE_CHECKING:  # the command line's flags import this module (spec.py); Dagster loads when a command runs
    import dagster as dg

# The flag that gives node runs their run config (`--config FILE.yaml`, repeatable).
CONFIG_FLAG = "--config"
_NOTHING = "nothing was launched or written"
# Errors of a run config that does not match its schema named in one refusal, at most.
_ERRORS_SHOWN = 3


def run_config_of_files(paths: list[str]) -> dict[str, Any]:
    """The run config of `--config` files, each a YAML mapping, merged in order (a later file's
    values win, nested mappings merged key by key), as Dagster's `-c` files are; {} for none.

    Raises:
        RunConfigError: A file is missing, is not YAML, or does not hold a mapping.
    """
    merged: dict[str, Any] = {}
    for path in paths:
        try:
            loaded = yaml.safe_load(Path(path).read_text())
        except OSError as error:
            raise RunConfigError(
                f"{CONFIG_FLAG} {path}: cannot read it ({error.strerror}); give a YAML file of run config; {_NOTHING}"
            ) from None
        except yaml.YAMLError as error:
            raise RunConfigError(
                f"{CONFIG_FLAG} {path} is not YAML ({' '.join(str(error).split())}); {_NOTHING}"
            ) from None
        if loaded is None:
            continue
        if not isinstance(loaded, Mapping):
            raise RunConfigError(
                f"{CONFIG_FLAG} {path} holds a {type(loaded).__name__}, not run config: write it as a mapping, "
                f"e.g. `ops: {{my_asset: {{config: {{factor: 10}}}}}}`; {_NOTHING}"
            )
        merged = merged_config(merged, loaded)
    return merged


def merged_config(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `over`'s values, nested mappings merged key by key (`over` wins elsewhere)."""
    merged = dict(base)
    for key, value in over.items():
        below = merged.get(key)
        both_mappings = isinstance(below, Mapping) and isinstance(value, Mapping)
        merged[key] = merged_config(below, value) if both_mappings else value  # type: ignore[arg-type]
    return merged


def check_run_config(
    definitions: dg.Definitions, assets: Iterable[dg.AssetKey], run_config: Mapping[str, Any], named: str
) -> None:
    """Raises RunConfigError when `run_config` does not match the config schema of the code
    location's asset job subset to `assets` (config for its other assets is accepted, as a run
    of that subset accepts it): a field of the wrong type, unknown, or required and missing.
    `named` is how the caller's surface names the run config (its flag, or its config key).

    Raises:
        RunConfigError: The run config does not match; the message names each field at fault.
    """
    import dagster as dg

    job = definitions.resolve_implicit_global_asset_job_def().get_subset(asset_selection=frozenset(assets))
    try:
        dg.validate_run_config(job, dict(run_config))
    except dg.DagsterInvalidConfigError as error:
        faults = [" ".join(fault.message.split(" Expected: ")[0].split()) for fault in error.errors]
        more = f" (and {len(faults) - _ERRORS_SHOWN} more)" if len(faults) > _ERRORS_SHOWN else ""
        raise RunConfigError(
            f"{named}: the run config does not match the config schema of the backfill's assets: "
            f"{'; '.join(faults[:_ERRORS_SHOWN])}{more}. Fix the run config (the asset's `Config` class "
            f"names its fields); {_NOTHING}"
        ) from None
