"""The node runs of a `--runs-via launcher` backfill as its instance recorded them, and the
proof that each went through the instance's run launcher rather than a local worker (the
run-launcher tests and the webserver's queued-coordinator test).

Not guaranteed: an instance on PostgreSQL (the functions open `home` by its dagster.yaml
alone: this process's environment must name the database's URL).
"""

from pathlib import Path

import dagster as dg

from partition_assets.run_tags import BACKFILL_ID_TAG, LAUNCHED_TAG

# The (hidden) tag the DefaultRunLauncher sets on each run it launches: the code server it asked.
GRPC_INFO_TAG = ".dagster/grpc_info"


def node_runs(home: Path, backfill: str) -> list[dg.DagsterRun]:
    """The node runs of `backfill` (not its publish run) in the instance at `home`, newest first."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return [
            run for run in instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill})) if run.asset_selection
        ]


def assert_launched_by_the_launcher(home: Path, backfill: str) -> None:
    """Every node run of `backfill` went through instance.launch_run to the DefaultRunLauncher."""
    runs = node_runs(home, backfill)
    assert runs
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for run in runs:
            assert run.tags[LAUNCHED_TAG] == "true" and GRPC_INFO_TAG in run.tags, run.tags
            starting = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.RUN_STARTING).records
            assert len(starting) == 1, run.run_id  # launched, not executed in process
