"""`--runs-via launcher` backfills for tests: a DAGSTER_HOME whose instance launches each run
at once, the node runs of a backfill as its instance recorded them, and the proof that each
went through the instance's run launcher rather than a local worker (the run-launcher tests
and the webserver's queued-coordinator test).

Not guaranteed: an instance on PostgreSQL (the functions open `home` by its dagster.yaml
alone: this process's environment must name the database's URL).
"""

from pathlib import Path

import dagster as dg

from partition_assets.run_tags import BACKFILL_ID_TAG, LAUNCHED_TAG
from partition_assets_tests.support.cli_runs import LAUNCHING_INSTANCE_YAML
from partition_assets_tests.support.instances import POSTGRES_STORAGE_YAML

# The (hidden) tag the DefaultRunLauncher sets on each run it launches: the code server it asked.
GRPC_INFO_TAG = ".dagster/grpc_info"
# The code location of the run-launcher tests.
TARGET = ["-m", "partition_assets_tests.support.locations.engine_defs"]


def launching_home(home: Path) -> Path:
    """`home` (a DAGSTER_HOME from instance_env, on SQLite or PostgreSQL), its instance launching
    each run at once; its storage created, before a coordinator and a test's polling race to
    create it."""
    storage = POSTGRES_STORAGE_YAML if POSTGRES_STORAGE_YAML in (home / "dagster.yaml").read_text() else ""
    (home / "dagster.yaml").write_text(LAUNCHING_INSTANCE_YAML + storage)
    with dg.DagsterInstance.from_config(str(home)):
        pass
    return home


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
