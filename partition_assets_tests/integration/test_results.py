"""A staged backfill one node of which fails publishes nothing, though its other nodes succeeded
(issue 52): the summaries of `run_backfill` and `backfill_status` (the last lines `backfill run`
and `backfill status` print) say that nothing was published, count staged against published, and
name what publishes it (`retry`), while the instance holds no materialization of it
(backfill/commands/unpublished.py). The asset stores nothing (range_failure_defs): no Spark, and
its materializations are recorded only by the publish. An asset a plain IO manager stores
(plain_io_defs) is written, and recorded, as its nodes run: the line names it apart."""

import dagster as dg

from partition_assets import BackfillSpec, SilentConsole, backfill_status, run_backfill
from partition_assets_tests.support.locations import plain_io_defs
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


def test_a_failed_staged_backfill_names_apart_what_a_plain_io_manager_wrote_as_its_nodes_ran(home):
    days = BackfillSpec(module=plain_io_defs.__name__, selection="*", start="2024-01-02", end="2024-01-04")
    with dg.DagsterInstance.get() as instance:
        outcome = run_backfill(days, instance, SilentConsole())
        assert not outcome.succeeded, outcome.message
        backfill = outcome.backfill_id
        expected = (
            "Nothing was published: 2 of 6 nodes staged, 0 published (the tables and Dagster's materializations "
            "of report are unchanged); 3 nodes of readings were written by their IO manager as they ran, which "
            "stages nothing (recorded as materialized, as Dagster's runs record them); "
            f"`partition-assets backfill retry {backfill}` runs the failed nodes again, then publishes every "
            "staged node once all have succeeded and the gate passes."
        )
        assert outcome.message.splitlines()[-1].endswith(expected), outcome.message
        assert backfill_status(instance, backfill).unpublished == expected
        # What the line says is what the storage and the instance hold.
        written = {"2024-01-02", "2024-01-03", "2024-01-04"}
        assert {path.name for path in (home / "storage" / "readings").iterdir()} == written
        assert instance.get_materialized_partitions(dg.AssetKey("readings")) == written
        assert instance.get_materialized_partitions(dg.AssetKey("report")) == set()
