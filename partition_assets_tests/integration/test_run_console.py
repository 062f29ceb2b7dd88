"""A node run's console: Dagster's DEBUG event lines stay in the run's event log, off the
command's output, unless --verbose (VERBOSE_ENV, which the workers' environment carries)."""

import logging

import dagster as dg
import pytest

from partition_assets.backfill.running.asset_runs import AssetRuns
from partition_assets.run_console import VERBOSE_ENV
from partition_assets_tests.support.locations.failing_defs import defs, drifting


@pytest.mark.parametrize("verbose", [False, True], ids=["quiet", "verbose"])
def test_debug_event_lines_reach_the_console_only_when_verbose(instance, capfd, monkeypatch, verbose):
    if verbose:
        monkeypatch.setenv(VERBOSE_ENV, "1")
    else:
        monkeypatch.delenv(VERBOSE_ENV, raising=False)
    result = AssetRuns(defs.resolve_implicit_global_asset_job_def()).execute(instance, drifting.key, "2024-01-01", {})
    assert not result.success
    printed = capfd.readouterr()
    assert (" - DEBUG - " in printed.err) is verbose, printed.err
    # A failed step's stack trace too is on the console only when verbose.
    assert ("Stack Trace" in printed.err) is verbose, printed.err
    # The run's own log holds every DEBUG event either way.
    assert any(entry.level == logging.DEBUG for entry in instance.all_logs(result.run_id))
    assert dg.DagsterEventType.STEP_FAILURE in {entry.dagster_event_type for entry in instance.all_logs(result.run_id)}
