"""What a failed backfill prints, as a user reads it: a line per failed node naming the user's
own error and the run, no Dagster DEBUG event lines, and a last line that groups the failures
by cause (with --verbose the DEBUG lines return: integration/test_run_console.py)."""

import re

import dagster as dg
import pytest

from partition_assets_tests.support.cli_runs import backfill_cli, backfill_id
from partition_assets_tests.support.locations.failing_defs import OTHER_CAUSE_PARTITION

TARGET = ["-m", "partition_assets_tests.support.locations.failing_defs"]
THREE_DAYS = ["--select", "key:drifting", "--start", "2024-01-01", "--end", "2024-01-03"]
FAILED_LINE = re.compile(r"^\[\d/3\] drifting \d/3 (2024-01-0\d) [\d.]+s FAILED: (.+) \(run ([\w-]+)\)$")
SCHEMA_ERROR = "SourceSchemaError: column amount became a string: cast it in the source query"
OTHER_ERROR = f"ValueError: no rows for {OTHER_CAUSE_PARTITION}"

pytestmark = pytest.mark.slow


def grouped_last_line(backfill: str) -> str:
    return (
        f"backfill {backfill}: 3 failed: {SCHEMA_ERROR} (2 nodes: drifting[2024-01-01], drifting[2024-01-02]); "
        f"{OTHER_ERROR} (1 node: drifting[{OTHER_CAUSE_PARTITION}]). "
        f"Fix and run `partition-assets backfill retry {backfill}`."
    )


def test_a_failed_backfill_names_each_users_error_without_debug_lines_and_groups_them_last(home):
    failed = backfill_cli(home, "run", *TARGET, *THREE_DAYS)
    output = failed.stdout + failed.stderr
    assert failed.returncode == 1, output
    assert "DEBUG" not in output, output
    backfill = backfill_id(failed.stdout)
    node_lines = [match.groups() for match in map(FAILED_LINE.match, failed.stdout.splitlines()) if match]
    expected = {"2024-01-01": SCHEMA_ERROR, "2024-01-02": SCHEMA_ERROR, OTHER_CAUSE_PARTITION: OTHER_ERROR}
    assert {partition: error for partition, error, _ in node_lines} == expected, failed.stdout
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for partition, _, run_id in node_lines:
            run = instance.get_run_by_id(run_id)
            assert run is not None and run.status == dg.DagsterRunStatus.FAILURE
            assert run.tags["dagster/partition"] == partition
            # Dagster's DEBUG events stay in the run's own log.
            assert any(entry.level == 10 for entry in instance.all_logs(run_id)), run_id
    assert failed.stdout.splitlines()[-1] == grouped_last_line(backfill)
