"""A staged backfill one node of which fails publishes nothing, though its other nodes succeeded
(issue 52): the summaries of `run_backfill` and `backfill_status` (the last lines `backfill run`
and `backfill status` print) say that nothing was published, count staged against published, and
name what publishes it (`retry`), while the instance holds no materialization of it
(backfill/commands/unpublished.py). The asset stores nothing (range_failure_defs): no Spark, and
its materializations are recorded only by the publish."""

import dagster as dg

from partition_assets import BackfillSpec, SilentConsole, backfill_status, run_backfill
from partition_assets_tests.support.locations.range_failure_defs import FAILING_DAY

# One run per day (batch=False, --no-batch): under its single_run() policy one run of the three days fails whole.
DAYS = BackfillSpec(
    module="partition_assets_tests.support.locations.range_failure_defs",
    selection="key:daily_counts",
    start="2024-01-06",
    end="2024-01-08",
    batch=False,
)


def nothing_published(backfill: str) -> str:
    return (
        "Nothing was published: 2 of 3 nodes staged, 0 published (the tables and Dagster's materializations are "
        f"unchanged); `partition-assets backfill retry {backfill}` runs the failed nodes again, then publishes every "
        "staged node once all have succeeded and the gate passes."
    )


def test_a_failed_staged_backfill_says_last_that_nothing_was_published_and_what_publishes_it(home):
    with dg.DagsterInstance.get() as instance:
        outcome = run_backfill(DAYS, instance, SilentConsole())
        assert not outcome.succeeded, outcome.message
        backfill = outcome.backfill_id
        last = outcome.message.splitlines()[-1]
        assert last.startswith(f"backfill {backfill}: 1 failed, 2 succeeded: BadSourceFileError"), last
        assert last.endswith(f"Fix and run `partition-assets backfill retry {backfill}`. {nothing_published(backfill)}")

        status = backfill_status(instance, backfill)
        assert f"failed: daily_counts {FAILING_DAY}" in status.failed_lines
        assert status.unpublished == nothing_published(backfill)
        assert instance.get_materialized_partitions(dg.AssetKey("daily_counts")) == set()
