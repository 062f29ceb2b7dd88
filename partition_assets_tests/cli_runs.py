"""Reading what `partition-assets backfill` printed, and the instance it ran against, in end-to-end tests."""

import re
import subprocess

# An instance that launches each submitted run at once (the synchronous DefaultRunCoordinator;
# the repo's dagster.yaml queues runs for dagster-daemon) with Dagster's DefaultRunLauncher.
LAUNCHING_INSTANCE_YAML = """\
telemetry:
  enabled: false
run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
run_launcher:
  module: dagster
  class: DefaultRunLauncher
"""


def backfill_id(output: str) -> str:
    """The id of the backfill whose start line `output` holds."""
    found = re.search(r"backfill (\w+): \d+ nodes", output)
    assert found, output
    return found.group(1)


def ok(result: subprocess.CompletedProcess) -> str:
    """The stdout of a command that must have succeeded (its output shows when it did not)."""
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout
