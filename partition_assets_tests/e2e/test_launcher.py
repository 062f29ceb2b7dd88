"""`backfill run --runs-via launcher`: node runs submitted through the instance's run
coordinator and Dagster's DefaultRunLauncher (a run worker process per run, started by
the code server), followed by status; retry reruns the failed node; a staged Spark backfill
publishes what local workers publish; the deployment's backfill capacity holds. Kill -9 +
resume, cancel, queued runs without a daemon and --detach: test_launcher_coordinator.py
(a file of its own, so that pytest-xdist can run the two halves side by side). With a daemon
(`dagster dev`) the queued runs are launched: partition_assets_tests/e2e/test_dagster_ui_webserver.py
checks it on its `dagster dev`, rather than starting one more here."""

import re
from collections import Counter

import dagster as dg
import pytest

from partition_assets.backfill.model import NodeStatus
from partition_assets.backfill.planning.instance_state import graph_of
from partition_assets.backfill.state.record import node_states
from partition_assets.run_tags import BACKFILL_ID_TAG, RANGE_END_TAG, RANGE_START_TAG
from partition_assets_tests.support.cli_runs import LAUNCHING_INSTANCE_YAML, backfill_cli, backfill_id, ok
from partition_assets_tests.support.instances import also_on_postgres
from partition_assets_tests.support.lakehouse import Lakehouse
from partition_assets_tests.support.launched_runs import (
    TARGET,
    assert_launched_by_the_launcher,
    launching_home,
    node_runs,
)
from partition_assets_tests.support.records import recorded_backfill

pytestmark = pytest.mark.slow

# The progress line of the node that fails, with the error its launched run recorded.
FLAKY_FAILED = re.compile(
    r"flaky \d/3 2024-01-04 [\d.]+s FAILED: RuntimeError: flaky fails on 2024-01-04 \(run [\w-]+\)$", re.M
)


@pytest.fixture
def home(home):
    """The shared DAGSTER_HOME (also this process's, to read the backfill records; on PostgreSQL
    for tests marked also_on_postgres("home")), its instance launching each run at once."""
    return launching_home(home)


@also_on_postgres("home")
def test_launched_backfill_runs_every_node_through_the_launcher_and_retry_reruns_the_failed_one(home):
    args = ["--select", "key:raw or key:flaky or key:balance", "--start", "2024-01-03", "--end", "2024-01-05"]
    first = backfill_cli(home, "run", *TARGET, *args, "--runs-via", "launcher", "--max-parallel", "3")
    assert first.returncode == 1, first.stdout + first.stderr  # flaky fails on 2024-01-04
    assert FLAKY_FAILED.search(first.stdout), first.stdout
    backfill = backfill_id(first.stdout)
    record = recorded_backfill(home, backfill)
    assert record.spec.runs_via == "launcher" and record.status == "failed"

    with dg.DagsterInstance.from_config(str(home)) as instance:
        graph = graph_of(record.spec, instance)
        states = {
            (node.asset.to_user_string(), node.partition): s
            for node, (s, _) in node_states(instance, backfill, graph).items()
        }
    days = ("2024-01-03", "2024-01-04", "2024-01-05")
    expected = {(asset, day): NodeStatus.SUCCEEDED for asset in ("raw", "flaky", "balance") for day in days}
    expected["flaky", "2024-01-04"] = NodeStatus.FAILED
    assert states == expected
    # balance (its policy takes ranges, each day needs the day before): one launched range run
    (balance_run,) = [run for run in node_runs(home, backfill) if run.asset_selection == {dg.AssetKey("balance")}]
    assert (balance_run.tags[RANGE_START_TAG], balance_run.tags[RANGE_END_TAG]) == ("2024-01-03", "2024-01-05")
    assert_launched_by_the_launcher(home, backfill)

    before = Counter(run.run_id for run in node_runs(home, backfill))
    retried = backfill_cli(home, "retry", backfill)
    assert retried.returncode == 1 and FLAKY_FAILED.search(retried.stdout), retried.stdout + retried.stderr
    new_runs = [run for run in node_runs(home, backfill) if run.run_id not in before]
    assert [(run.asset_selection, run.tags["dagster/partition"], run.status) for run in new_runs] == [
        ({dg.AssetKey("flaky")}, "2024-01-04", dg.DagsterRunStatus.FAILURE)
    ]
    assert_launched_by_the_launcher(home, backfill)


def test_a_staged_spark_backfill_through_the_launcher_publishes_what_local_workers_publish(
    tmp_path, spark, home_template
):
    local, launched = Lakehouse(tmp_path / "local", home_template), Lakehouse(tmp_path / "launched", home_template)
    (launched.home / "dagster.yaml").write_text(LAUNCHING_INSTANCE_YAML)
    ok(local.backfill("2024-01-01", "2024-01-03"))
    output = ok(launched.backfill("2024-01-01", "2024-01-03", "--runs-via", "launcher"))
    assert "published: " in output
    assert all(launched.contents().values())
    assert launched.contents() == local.contents()
    assert_launched_by_the_launcher(launched.home, backfill_id(output))


def test_launched_node_runs_honour_the_deployment_s_backfill_capacity(home):
    """Two nodes and --max-parallel 2, but the deployment lets backfills run one run at a time."""
    capacity = (
        "instance_class:\n  module: partition_assets.instance\n  class: EngineBackfillInstance\n"
        "partition_assets:\n  engine_modules: []\n  backfills:\n    max_runs: 1\n"
    )
    (home / "dagster.yaml").write_text(LAUNCHING_INSTANCE_YAML + capacity)
    args = ["--select", "key:raw", "--start", "2024-01-01", "--end", "2024-01-02", "--runs-via", "launcher"]
    done = backfill_cli(home, "run", *TARGET, *args, "--max-parallel", "2")
    ok(done)
    backfill = backfill_id(done.stdout)
    assert_launched_by_the_launcher(home, backfill)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        records = instance.get_run_records(dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill}))
        spans = sorted((record.start_time, record.end_time) for record in records if record.dagster_run.asset_selection)
    assert len(spans) == 2
    assert all(earlier[1] <= later[0] for earlier, later in zip(spans, spans[1:])), spans  # one at a time
