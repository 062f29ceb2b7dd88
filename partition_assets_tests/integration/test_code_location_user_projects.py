"""Any user's assets, as Dagster runs them (issue 43 point 2; docs/guide/your-project.md, steps
1 to 3): four code locations written as Dagster users write them, nothing of partition_assets
in them: a `dg`-scaffolded project loading its `defs/` folder, a `@repository`, a DuckDB
project on Dagster's default IO manager, and a subsettable multi-asset with asset checks (a
blocking one); and a fifth wired by `partition_assets.definitions` alone, whose assets ask for
no Spark: it keeps Dagster's default IO manager and starts no Spark server. Each backfills
one day on the engine (`run_backfill`, as `partition-assets backfill run` does: its node runs in worker processes)
and on Dagster (`dagster asset materialize`, Dagster's own command), each in an instance of
its own; the two instances then hold the same materializations, the
same check results, and Dagster's default IO manager stored the same outputs. With no table to
stage, the engine's run warns of nothing (no "stored by other IO managers")."""

import json
import pickle
import shutil
from pathlib import Path

import dagster as dg
import pytest
from dagster._cli.asset import asset_materialize_command

from partition_assets import BackfillSpec, SilentConsole, run_backfill
from partition_assets_tests.support.instances import instance_env
from partition_assets_tests.support.webserver import free_port, listening

DAY = "2024-01-03"
LOCATIONS = {
    "dg project": "partition_assets_tests.support.locations.code_location_forms.dg_project.definitions",
    "@repository": "partition_assets_tests.support.locations.code_location_forms.repository_location",
    "DuckDB": "partition_assets_tests.support.locations.user_projects.duckdb_views",
    "multi-asset and checks": "partition_assets_tests.support.locations.user_projects.orders_with_checks",
    "one call, no Spark": "partition_assets_tests.support.locations.user_projects.wired_visits",
}
# The code locations whose executor `partition_assets.definitions` made in-process already.
WIRED = {LOCATIONS["one call, no Spark"]}
# Dagster runs the steps of a run in one process (as the engine's node runs do), not a process each.
IN_PROCESS = json.dumps({"execution": {"config": {"in_process": {}}}})


def what_the_instance_holds(home: Path) -> tuple[dict, set, dict]:
    """The instance's materialized partitions per asset, its check results (check, passed,
    severity) and the outputs Dagster's default IO manager stored under `home`/storage."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        materialized: dict[str, set[str]] = {}
        checks = set()
        for run in instance.get_runs():
            for entry in instance.all_logs(run.run_id):
                event = entry.dagster_event
                if event is None:
                    continue
                if event.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION:
                    key = event.asset_key.to_user_string()
                    materialized.setdefault(key, set()).add(event.partition)
                elif event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
                    evaluation = event.event_specific_data
                    checks.add((evaluation.check_name, evaluation.passed, evaluation.severity.value))
    outputs = {
        str(path.relative_to(home / "storage")): pickle.loads(path.read_bytes())
        for path in (home / "storage").rglob(DAY)
        if path.is_file()
    }
    return materialized, checks, outputs


# Dagster points from `dagster asset materialize` to `dg launch`, which runs the same code.
@pytest.mark.filterwarnings("ignore:Function `asset_materialize_command` is superseded")
@pytest.mark.parametrize("module", LOCATIONS.values(), ids=LOCATIONS.keys())
def test_the_engine_backfills_a_users_code_location_as_dagster_materializes_it(
    module, home, home_template, tmp_path, monkeypatch, caplog
):
    # Where a Spark Connect server this test started would leave its pid file and listen.
    monkeypatch.setenv("PARTITION_ASSETS_STATE_DIR", str(tmp_path / "spark_state"))
    spark_port = free_port()
    monkeypatch.setenv("PARTITION_ASSETS_SPARK_CONNECT_PORT", str(spark_port))
    with dg.DagsterInstance.get() as instance:
        outcome = run_backfill(
            BackfillSpec(module=module, selection="*", start=DAY, end=DAY), instance, SilentConsole()
        )
    assert outcome.succeeded, outcome.message
    # No table to stage: every asset is written as Dagster's runs write it, nothing to warn of.
    assert "stored by other IO managers" not in caplog.text
    dagster_home = tmp_path / "dagster_materialize_home"
    shutil.copytree(home_template, dagster_home)
    for name, value in instance_env(dagster_home).items():
        monkeypatch.setenv(name, value)
    asset_materialize_command.main(
        [
            "-m",
            module,
            "--select",
            "*",
            "--partition",
            DAY,
            *([] if module in WIRED else ["--config-json", IN_PROCESS]),
        ],
        standalone_mode=False,
    )

    on_engine, by_dagster = what_the_instance_holds(home), what_the_instance_holds(dagster_home)
    assert on_engine == by_dagster
    materialized, checks, outputs = on_engine
    assert materialized and all(partitions == {DAY} for partitions in materialized.values()), materialized
    assert len(outputs) == len(materialized), outputs
    # No Spark server was started: none has its files in the state folder, none listens.
    assert not list((tmp_path / "spark_state").glob("spark-connect-*.pid"))
    assert not listening(spark_port)
    if "checks" in module:
        assert checks == {("orders_are_positive", True, "ERROR"), ("no_refunds", False, "WARN")}
