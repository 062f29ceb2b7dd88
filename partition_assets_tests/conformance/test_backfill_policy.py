"""BackfillPolicy as Dagster honours it (issue 51 point 6): one backfill of ten days run twice on
fresh instances, by `partition-assets backfill run` and by Dagster's own asset backfill, makes
the same runs (per asset, the partitions of each run) and the same materializations and outputs.
The scenarios are those of Dagster's test_asset_backfill_with_backfill_policies.py: single_run()
(one run), multi_run(n) (runs of n in order, the last shorter), parent and child with different
policies, with the same policy, a daily parent of a weekly child, a self-dependent asset, and an
asset with no policy (one run per partition), and a multi-run child of a parent one day of which
fails (its runs close up around the day blocked). `backfill plan` says each asset's policy and runs;
`--batching engine` on assets without a policy is refused, nothing written."""

import pytest
from dagster._core.execution.backfill import BulkActionStatus

from partition_assets.cli.main import main
from partition_assets_tests.conformance.policy_compare import (
    POLICY_DEFS,
    by_dagster,
    on_engine,
    plan_json,
    planned_nodes,
    refused,
)
from partition_assets_tests.support.locations.policy_defs import FAILING_DAY

TEN_DAYS = ["--start", "2024-01-01", "--end", "2024-01-10"]
DAYS = [f"2024-01-{day:02d}" for day in range(1, 11)]
POLICY_SHAPES = (
    "key:single or key:chunked or key:after_single or key:single_child or key:weekly or key:running_total or key:plain"
)


def test_a_backfill_runs_each_policy_in_dagsters_runs(home, tmp_path):
    args = ["--select", POLICY_SHAPES, *TEN_DAYS]
    plan = plan_json(args)

    engine = on_engine(home, args)
    dagster = by_dagster(tmp_path / "dagster_instance", planned_nodes(plan))

    assert engine.runs == dagster.runs
    assert engine.materialized == dagster.materialized
    assert engine.outputs == dagster.outputs
    # What Dagster's own tests assert of these shapes, and what the plan said before the run.
    assert engine.runs["single"] == [tuple(DAYS)]  # single_run(): one run of the range
    assert engine.runs["chunked"] == [tuple(DAYS[0:3]), tuple(DAYS[3:6]), tuple(DAYS[6:9]), (DAYS[9],)]
    assert engine.runs["running_total"] == [tuple(DAYS[i : i + 2]) for i in range(0, 10, 2)]
    assert engine.runs["after_single"] == engine.runs["plain"] == [(day,) for day in DAYS]
    assert engine.runs["single_child"] == [tuple(DAYS)] and engine.runs["weekly"] == [("2024-01-07",)]
    assert {asset: entry["runs"] for asset, entry in plan["assets"].items()} == engine.run_counts()


def test_a_failed_parent_day_blocks_its_child_and_the_childs_runs_close_up_around_it(home, tmp_path):
    # One run at a time: the failing day fails before its child's later partitions are ready,
    # as each iteration of Dagster's backfill sees every run it requested finished. Per node: a
    # staged backfill with a failed node records no materialization (issue 51 point 3's).
    args = ["--select", "key:flaky or key:after_flaky", *TEN_DAYS, "--max-parallel", "1", "--publish", "per-node"]
    plan = plan_json(args)

    engine = on_engine(home, args, exit_code=1)
    dagster = by_dagster(tmp_path / "dagster_instance", planned_nodes(plan), ends=BulkActionStatus.COMPLETED_FAILED)

    assert engine.runs == dagster.runs
    assert engine.materialized == dagster.materialized
    assert engine.outputs == dagster.outputs
    assert engine.runs["after_flaky"] == [tuple(DAYS[0:3]), (DAYS[3],), tuple(DAYS[5:8]), tuple(DAYS[8:10])]
    assert set(engine.materialized["flaky"]) == set(engine.materialized["after_flaky"]) == set(DAYS) - {FAILING_DAY}


def test_the_plan_names_each_assets_policy_and_runs(home, capsys):
    assert (
        main(["backfill", "plan", "-m", POLICY_DEFS, "--select", "key:single or key:chunked or key:plain", *TEN_DAYS])
        == 0
    )
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert lines["single"].endswith("BackfillPolicy.single_run(): 1 run")
    assert lines["chunked"].endswith("BackfillPolicy.multi_run(max_partitions_per_run=3): 4 runs")
    assert lines["plain"].endswith("no policy: 10 runs (one per partition)")

    engine_batching = plan_json(["--select", "key:single", *TEN_DAYS, "--batching", "engine"])["assets"]["single"]
    assert engine_batching == {
        "policy": "BackfillPolicy.single_run()",
        "batching": "engine",
        "runs": 10,
        "runs_exact": False,
    }


@pytest.mark.parametrize(
    "args, named",
    [
        (["--select", "key:plain", "--batching", "engine"], "no asset of the backfill (plain) has a BackfillPolicy"),
        (
            ["--select", "key:single", "--batching", "engine", "--no-batch"],
            "--no-batch and --batching engine contradict",
        ),
        (["--select", "key:single", "--batching", "dagster"], "--batching 'dagster' is not a choice"),
    ],
    ids=["engine batching, no policy", "engine batching and --no-batch", "unknown batching"],
)
def test_a_batching_option_without_a_policy_to_follow_is_refused_and_nothing_written(home, capsys, args, named):
    assert named in refused(home, ["backfill", "run", "-m", POLICY_DEFS, *args, *TEN_DAYS], capsys)
