"""Run config as Dagster's backfill takes it (issue 51 point 7): an asset with a `dg.Config`
backfilled with `factor: 10` stores 10, 20, 30 on the engine (`backfill run --config FILE.yaml`)
as by Dagster's own asset backfill given that run config; the Launchpad's engine job takes it in
its config, and its record keeps it, so that `backfill retry` runs with it again; a run config
that does not match the assets' config schema is refused before anything runs, naming the field,
nothing written."""

import dagster as dg
import pytest
import yaml

from partition_assets.automation import backfill_run_config, sparse_backfill_job
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.cli.main import main
from partition_assets_tests.conformance.policy_compare import POLICY_DEFS, by_dagster, on_engine, outcome_of, refused

THREE_DAYS = ["--start", "2024-01-01", "--end", "2024-01-03"]
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]


def scaled_config(**config: object) -> dict:
    return {"ops": {"scaled": {"config": config}}}


def test_node_runs_take_the_run_config_as_dagsters_backfill_runs_do(home, tmp_path):
    config = tmp_path / "factor.yaml"
    config.write_text(yaml.safe_dump(scaled_config(factor=10)))

    engine = on_engine(home, ["--select", "key:scaled", *THREE_DAYS, "--config", str(config)])
    dagster = by_dagster(tmp_path / "dagster_instance", {"scaled": DAYS}, scaled_config(factor=10))

    assert engine.outputs == dagster.outputs == {f"scaled/{day}": 10 * (i + 1) for i, day in enumerate(DAYS)}
    assert engine.runs == dagster.runs and engine.materialized == dagster.materialized


def test_the_launchpad_jobs_run_config_is_kept_and_a_retry_runs_with_it(home, tmp_path, capsys):
    ready = tmp_path / "ready"  # absent: every node of the first attempt fails
    job = sparse_backfill_job(POLICY_DEFS)
    config = backfill_run_config(
        selection="key:scaled",
        start=DAYS[0],
        end=DAYS[-1],
        run_config=scaled_config(factor=10, requires_file=str(ready)),
    )
    with dg.DagsterInstance.get() as instance:
        first = job.execute_in_process(run_config=config, instance=instance, raise_on_error=False)
        (backfill_id,) = BackfillStore(instance).ids()
    assert not first.success

    ready.touch()
    assert main(["backfill", "retry", backfill_id]) == 0, capsys.readouterr()

    with dg.DagsterInstance.get() as instance:
        retried = outcome_of(instance, home / "storage")
    assert retried.outputs == {"scaled/2024-01-01": 10, "scaled/2024-01-02": 20, "scaled/2024-01-03": 30}


@pytest.mark.parametrize("command", ["plan", "run"])
@pytest.mark.parametrize(
    "config, named",
    [
        (scaled_config(factor="ten"), 'root:ops:scaled:config:factor. Value "ten"'),
        (scaled_config(fctor=10), 'unexpected config entry "fctor" at path root:ops:scaled:config'),
        (["not", "a", "mapping"], "holds a list, not run config"),
    ],
    ids=["wrong type", "unknown field", "not a mapping"],
)
def test_a_run_config_that_does_not_match_the_schema_is_refused_naming_the_field(
    home, tmp_path, capsys, command, config, named
):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    error = refused(
        home,
        ["backfill", command, "-m", POLICY_DEFS, "--select", "key:scaled", *THREE_DAYS, "--config", str(path)],
        capsys,
    )
    assert named in error and "nothing" in error
