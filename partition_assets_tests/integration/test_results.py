"""A staged backfill one node of which fails publishes nothing, though its other nodes succeeded
(issue 52): the summaries of `run_backfill` and `backfill_status` (the last lines `backfill run`
and `backfill status` print) say that nothing was published, count staged against published, and
name what publishes it (`retry`), while the instance holds no materialization of it
(backfill/commands/unpublished.py). The asset stores nothing (range_failure_defs): no Spark, and
its materializations are recorded only by the publish. An asset a plain IO manager stores
(plain_io_defs) is written, and recorded, as its nodes run: the line names it apart.

The failed, blocked and skipped lines are read from the nodes that have a state, in each
asset's partition order, never from every partition of the graph (issue 54: `status` of a
100,000-partition asset)."""

from dataclasses import replace

import dagster as dg

from partition_assets import BackfillSpec, SilentConsole, backfill_status, run_backfill
from partition_assets.backfill.commands.results import StatusReport
from partition_assets.backfill.model import Node, NodeStatus
from partition_assets_tests.support.locations import plain_io_defs
from partition_assets_tests.support.locations.range_failure_defs import FAILING_DAY
from partition_assets_tests.unit.test_node_runs import _nodes_counted
from partition_assets_tests.unit.test_skipped_ranges import BY_DAY_AND_REGION, HOURS, REGIONS, _graph

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


def test_a_failed_catch_up_counts_the_same_staged_nodes_in_run_and_status_leaving_out_the_current_ones(home):
    """A catch-up left the day materialized before it alone as current: `run` and `status` say
    the same count staged, that day not among them (`run` counted it: 2 of 3), and `run`'s
    summary names it current, as `status` does (it said `2 succeeded`)."""
    with dg.DagsterInstance.get() as instance:
        before = run_backfill(replace(DAYS, start="2024-01-08", end="2024-01-08"), instance, SilentConsole())
        assert before.succeeded, before.message
        outcome = run_backfill(replace(DAYS, catch_up=True), instance, SilentConsole())
        assert not outcome.succeeded, outcome.message

        staged = "Nothing was published: 1 of 3 nodes staged, 0 published"
        assert staged in outcome.message, outcome.message
        summary = f"backfill {outcome.backfill_id}: 1 failed, 1 succeeded, 1 current (skipped by --catch-up): "
        assert outcome.message.startswith(summary), outcome.message
        assert backfill_status(instance, outcome.backfill_id).unpublished.startswith(staged)


def _report(graph, node_states) -> StatusReport:
    return StatusReport(None, graph, node_states, launch=None, silence=None, previous_versions=None)  # type: ignore[arg-type]


def test_each_status_line_names_its_partitions_in_the_graph_order_and_no_node_outside_it():
    graph = _graph(3)
    hours = graph.slices[HOURS].partition_keys
    states = {
        Node(HOURS, hours[40]): NodeStatus.FAILED,
        Node(HOURS, hours[2]): NodeStatus.FAILED,
        Node(HOURS, "2099-01-01-00:00"): NodeStatus.FAILED,  # not in the graph
        Node(REGIONS, "west"): NodeStatus.BLOCKED,
        Node(REGIONS, "north"): NodeStatus.BLOCKED,  # listed before west in the definition
        Node(BY_DAY_AND_REGION, "2024-01-02|east"): NodeStatus.SKIPPED,
        Node(HOURS, hours[7]): NodeStatus.SUCCEEDED,
    }

    report = _report(graph, states)

    assert report.failed_lines == [f"failed: hours {hours[2]}, {hours[40]}"]
    assert report.blocked_lines == ["blocked: lake/regions north, west"]
    assert report.skipped_lines == ["skipped: by_day_and_region 2024-01-02|east"]


def test_the_lines_of_years_of_hours_make_no_node_per_partition(monkeypatch):
    graph = _graph(2 * 365)
    report = _report(graph, {Node(HOURS, graph.slices[HOURS].partition_keys[-1]): NodeStatus.FAILED})
    made = _nodes_counted(monkeypatch)

    assert len(report.failed_lines + report.blocked_lines + report.skipped_lines) == 1
    assert made[0] == 0, f"{made[0]:,} nodes made"
