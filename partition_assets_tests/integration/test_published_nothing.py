"""A staged backfill one node of which fails publishes nothing, though its other nodes
succeeded (issue 52): the last line of `backfill run` and of `backfill status` say that nothing
was published, count staged against published, and name what publishes it (`retry`), while
the instance holds no materialization of it (backfill/commands/unpublished.py). The asset
stores nothing (range_failure_defs): no Spark, and its materializations are recorded only by
the publish."""

import dagster as dg

from partition_assets.cli.main import main
from partition_assets_tests.support.cli_runs import backfill_id
from partition_assets_tests.support.locations.range_failure_defs import FAILING_DAY

# One run per day (--no-batch): under its single_run() policy one run of the three days fails whole.
DAYS = ["--select", "key:daily_counts", "--start", "2024-01-06", "--end", "2024-01-08", "--no-batch"]


def nothing_published(backfill: str) -> str:
    return (
        "Nothing was published: 2 of 3 nodes staged, 0 published (the tables and Dagster's materializations are "
        f"unchanged); `partition-assets backfill retry {backfill}` runs the failed nodes again, then publishes every "
        "staged node once all have succeeded and the gate passes."
    )


def test_a_failed_staged_backfill_says_last_that_nothing_was_published_and_what_publishes_it(home, capsys):
    code = main(["backfill", "run", "-m", "partition_assets_tests.support.locations.range_failure_defs", *DAYS])
    ran = capsys.readouterr().out
    assert code == 1, ran
    backfill = backfill_id(ran)
    last = ran.splitlines()[-1]
    assert last.startswith(f"backfill {backfill}: 1 failed, 2 succeeded: BadSourceFileError"), last
    assert last.endswith(f"Fix and run `partition-assets backfill retry {backfill}`. {nothing_published(backfill)}")

    assert main(["backfill", "status", backfill]) == 0
    status = capsys.readouterr().out.splitlines()
    assert f"failed: daily_counts {FAILING_DAY}" in status
    assert status[-1] == nothing_published(backfill)
    with dg.DagsterInstance.get() as instance:
        assert instance.get_materialized_partitions(dg.AssetKey("daily_counts")) == set()
