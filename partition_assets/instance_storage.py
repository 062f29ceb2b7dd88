"""Instance storage with less bookkeeping per run, for instances that run many small runs.

`EngineBackfillInstance` (partition_assets/instance.py) takes these as its defaults, for
whatever dagster.yaml leaves unset (`instance_storage_defaults`):
- the event log: Dagster's `ConsolidatedSqliteEventLogStorage`, one SQLite database for
  every run's events under `<home>/history/consolidated`, where Dagster's default SQLite
  storage creates a database per run, schema included;
- compute logs: `DirectComputeLogManager`, a run's stdout and stderr written straight into
  the files Dagster's `LocalComputeLogManager` uses (`<home>/storage`). Dagster's mirrors each
  captured stream back to the terminal through a `tail -F` process plus a Python orphan
  watcher, two per stream: four processes started, and waited for, per run. For a backfill
  node that is most of the CPU a run costs (bench/results/node_overhead.md).
The webserver shows and follows both as before (partition_assets_tests/test_instance_storage.py).
A `storage:` block in dagster.yaml (Postgres) replaces the event log default; a
`compute_logs:` block the compute log default.

Not guaranteed: a step's output no longer also appears on the terminal of the process that
runs it (`dagster dev`'s, a backfill command's); it is in the webserver's run view and under
`<home>/storage`. The consolidated event log serializes every run's event writes on one
SQLite file (WAL). Relies on Dagster's `InstanceRef.config_defaults`, its composite storage,
`redirect_to_file` and the file layout of `LocalComputeLogManager` (pinned by the tests).
"""

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import yaml
from dagster._core.execution.compute_logs import redirect_to_file
from dagster._core.instance.ref import InstanceRef, compute_logs_directory
from dagster._core.storage.compute_log_manager import CapturedLogContext, ComputeIOType
from dagster._core.storage.local_compute_log_manager import IO_TYPE_EXTENSION, LocalComputeLogManager
from dagster._serdes import ConfigurableClassData
from dagster._utils import ensure_file, touch_file


class DirectComputeLogManager(LocalComputeLogManager):
    """`LocalComputeLogManager` capturing stdout/stderr into its files by file-descriptor
    redirection alone."""

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> "DirectComputeLogManager":
        return cls(inst_data=inst_data, **config_value)

    @contextmanager
    def capture_logs(self, log_key: Sequence[str]) -> Iterator[CapturedLogContext]:
        paths = {
            io_type: self.get_captured_local_path(log_key, IO_TYPE_EXTENSION[io_type])
            for io_type in (ComputeIOType.STDOUT, ComputeIOType.STDERR)
        }
        for path in paths.values():
            ensure_file(path)
        with (
            redirect_to_file(sys.stdout, paths[ComputeIOType.STDOUT]),
            redirect_to_file(sys.stderr, paths[ComputeIOType.STDERR]),
        ):
            yield CapturedLogContext(log_key)
        # The marker Dagster's webserver reads to stop following the files.
        touch_file(self.complete_artifact_path(log_key))


def _class_data(module: str, name: str, config: Mapping[str, Any]) -> ConfigurableClassData:
    return ConfigurableClassData(module, name, yaml.dump(dict(config), default_flow_style=False))


def instance_storage_defaults(home: str) -> dict[str, ConfigurableClassData | None]:
    """Dagster's instance defaults for the instance at `home`, with the consolidated event
    log (inside Dagster's composite of its default run and schedule storages) and
    `DirectComputeLogManager`."""
    defaults = dict(InstanceRef.config_defaults(home))
    event_log = _class_data(
        "dagster._core.storage.event_log",
        "ConsolidatedSqliteEventLogStorage",
        {"base_dir": os.path.join(home, "history", "consolidated")},
    )

    def part(data: ConfigurableClassData | None) -> dict[str, str]:
        assert data is not None  # Dagster's defaults name every storage
        return {"module_name": data.module_name, "class_name": data.class_name, "config_yaml": data.config_yaml}

    defaults["event_log_storage"] = event_log
    defaults["storage"] = _class_data(
        "dagster._core.storage.legacy_storage",
        "CompositeStorage",
        {
            "run_storage": part(defaults["run_storage"]),
            "event_log_storage": part(event_log),
            "schedule_storage": part(defaults["schedule_storage"]),
        },
    )
    defaults["compute_logs"] = _class_data(
        __name__, DirectComputeLogManager.__name__, {"base_dir": compute_logs_directory(home)}
    )
    return defaults
