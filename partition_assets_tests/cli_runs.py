"""Reading what `partition-assets backfill` printed, in end-to-end tests."""

import re
import subprocess


def backfill_id(output: str) -> str:
    """The id of the backfill whose start line `output` holds."""
    found = re.search(r"backfill (\w+): \d+ nodes", output)
    assert found, output
    return found.group(1)


def ok(result: subprocess.CompletedProcess) -> str:
    """The stdout of a command that must have succeeded (its output shows when it did not)."""
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout
