"""Instance storage with less bookkeeping per run, for instances that run many small runs.

- `ConsolidatedEventLogStorage`: Dagster's `ConsolidatedSqliteEventLogStorage` (one SQLite
  database for every run's events) under `$DAGSTER_HOME/history/consolidated` by default.
  Dagster's default SQLite event log creates a database per run, schema included.
- `DirectComputeLogManager`: captures a run's stdout and stderr without helper processes.

Dagster's `LocalComputeLogManager` mirrors each captured stream back to the terminal
through a `tail -F` process plus a Python orphan watcher, two per stream: four processes
started, and waited for, per run. For a backfill node that is most of the CPU a run costs
(bench/results/run_overhead.md). `DirectComputeLogManager` writes the streams straight
into the same files, so the webserver shows and follows them exactly as before.

Set in dagster.yaml (the repo's `make dev` setup does):

    event_log_storage:
      module: partition_assets.instance_storage
      class: ConsolidatedEventLogStorage
    compute_logs:
      module: partition_assets.instance_storage
      class: DirectComputeLogManager

Not guaranteed: a step's output no longer also appears on the terminal of the process
that runs it (`dagster dev`'s, a backfill command's); it is in the webserver's run view
and under `base_dir`. The consolidated event log serializes every run's event writes on
one SQLite file (WAL), which is what the per-run overhead measured in `make bench` includes.
Relies on Dagster's `redirect_to_file` and the file layout of
`LocalComputeLogManager` (pinned by partition_assets_tests/test_instance_storage.py).
"""

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import dagster as dg
from dagster._core.execution.compute_logs import redirect_to_file
from dagster._core.storage.compute_log_manager import CapturedLogContext, ComputeIOType
from dagster._core.storage.event_log import ConsolidatedSqliteEventLogStorage
from dagster._core.storage.local_compute_log_manager import IO_TYPE_EXTENSION, LocalComputeLogManager
from dagster._serdes import ConfigurableClassData
from dagster._utils import ensure_file, touch_file


def _under_dagster_home(*parts: str) -> str:
    return os.path.join(os.environ.get("DAGSTER_HOME", "."), *parts)


class ConsolidatedEventLogStorage(ConsolidatedSqliteEventLogStorage):
    """Dagster's consolidated SQLite event log; `base_dir` defaults to
    `$DAGSTER_HOME/history/consolidated`, a folder of its own (the webserver watches it,
    recursively, for new events)."""

    def __init__(self, base_dir: str | None = None, inst_data: ConfigurableClassData | None = None) -> None:
        super().__init__(base_dir or _under_dagster_home("history", "consolidated"), inst_data)

    @classmethod
    def config_type(cls) -> dict:
        return {"base_dir": dg.Field(dg.StringSource, is_required=False)}


class DirectComputeLogManager(LocalComputeLogManager):
    """`LocalComputeLogManager` capturing stdout/stderr into its files by file-descriptor
    redirection alone. `base_dir` defaults to `$DAGSTER_HOME/storage`, where Dagster's
    default compute log manager keeps them."""

    def __init__(
        self,
        base_dir: str | None = None,
        polling_timeout: float | None = None,
        inst_data: ConfigurableClassData | None = None,
    ) -> None:
        super().__init__(base_dir or _under_dagster_home("storage"), polling_timeout, inst_data)

    @classmethod
    def config_type(cls) -> dict:
        return {
            "base_dir": dg.Field(dg.StringSource, is_required=False),
            "polling_timeout": dg.Field(dg.Float, is_required=False),
        }

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
