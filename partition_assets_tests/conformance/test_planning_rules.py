"""Planning rules a user's project declares, on the engine and on Dagster side by side (issue 51
points 4, 5 and 8): exclusions, parents that do not exist, keys holding a comma.

Each compares the engine's plan with Dagster's own targets and order (planning_compare.py);
the refusals and one exclusion backfill also run Dagster's asset backfill itself, and the
command-line cases run `partition-assets backfill` as a user does.
"""

import argparse
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest

from partition_assets.backfill.model import NodeStatus
from partition_assets.backfill.planning.graph import plan
from partition_assets.backfill.planning.spec import BackfillSpec, add_spec_arguments, spec_from_arguments
from partition_assets.backfill.running.scheduling import unit_starting_at
from partition_assets.dagster_internals import BulkActionStatus
from partition_assets.errors import BackfillPlanError, MissingParentPartitionError
from partition_assets_tests.conformance.planning_compare import (
    dagster_backfill,
    dagster_ranges,
    dagster_side,
    dagster_target,
    engine_side,
    respects,
)
from partition_assets_tests.support.cli_runs import backfill_cli, ok
from partition_assets_tests.support.locations import planning_rules_defs as rules
from partition_assets_tests.support.records import recorded_ids

MODULE = rules.__name__
ASSET_GRAPH = rules.defs.resolve_asset_graph()


def spec(selection: str, **fields: object) -> BackfillSpec:
    return BackfillSpec(module=MODULE, selection=selection, **fields)


def days_window(partitions_def: dg.TimeWindowPartitionsDefinition, first: str, last: str) -> list[str]:
    """The keys Dagster's time windows give for the days `first`..`last` (inclusive)."""
    start = datetime.fromisoformat(first).replace(tzinfo=UTC)
    end = datetime.fromisoformat(last).replace(tzinfo=UTC) + timedelta(days=1)
    return list(partitions_def.get_partition_keys_in_time_window(dg.TimeWindow(start, end)))


# -- point 4: exclusions ------------------------------------------------------------------


def test_a_range_starting_on_an_excluded_day_plans_the_workdays_dagster_gives_it():
    """Saturday 2024-01-06 to Wednesday 01-10: Dagster's windows give Monday to Wednesday; the
    Friday before the excluded weekend is not part of it."""
    keys = days_window(rules.WEEKDAYS, "2024-01-06", "2024-01-10")
    assert keys == ["2024-01-08", "2024-01-09", "2024-01-10"]

    engine = engine_side(ASSET_GRAPH, spec("key:workday", start="2024-01-06", end="2024-01-10"))

    assert engine == dagster_side(ASSET_GRAPH, dagster_ranges(ASSET_GRAPH, {"workday": (keys[0], keys[-1])}))


def test_a_range_of_excluded_days_only_is_refused_naming_the_exclusions():
    """A weekend holds no partition in Dagster's windows; the refusal says so (not that the range
    lies outside the partitions, which run from 01-01 to 01-31)."""
    assert days_window(rules.WEEKDAYS, "2024-01-06", "2024-01-07") == []

    with pytest.raises(BackfillPlanError, match="2024-01-06..2024-01-07 holds only days its exclusions leave out"):
        engine_side(ASSET_GRAPH, spec("key:workday", start="2024-01-06", end="2024-01-07"))


def test_an_offset_mapping_next_to_excluded_days_plans_what_dagster_runs():
    """previous_workday reads the workday before its own: Monday 01-08 reads Friday 01-05 across
    the weekend. A range after the weekend is planned (it was refused: could not pad), with
    Dagster's edges, and Dagster's own backfill materializes exactly its targets in that order."""
    keys = days_window(rules.WEEKDAYS, "2024-01-08", "2024-01-09")
    target = dagster_ranges(ASSET_GRAPH, {asset: (keys[0], keys[-1]) for asset in ("workday", "previous_workday")})

    engine = engine_side(ASSET_GRAPH, spec("key:workday or key:previous_workday", start="2024-01-08", end="2024-01-09"))
    dagster = dagster_side(ASSET_GRAPH, target)
    ran = dagster_backfill(MODULE, ASSET_GRAPH, target)

    assert engine == dagster
    assert (("previous_workday", "2024-01-09"), ("workday", "2024-01-08")) in engine.waits_for
    assert ran.status == BulkActionStatus.COMPLETED_SUCCESS, ran.error
    assert sorted(ran.materialized) == sorted(engine.targets)
    assert respects(ran.materialized, engine.waits_for) == []


def test_offsets_across_a_weekend_and_a_holiday_give_dagster_edges():
    """around_open_day reads the two open days before its own to the one after it. The week after
    a long weekend (Monday 2024-01-15 a holiday) is planned with Dagster's edges: it was refused
    (could not pad), as its first day's two open days before lie five days back."""
    assets = ("open_day", "around_open_day")
    selection = " or ".join(f"key:{asset}" for asset in assets)

    engine = engine_side(ASSET_GRAPH, spec(selection, start="2024-01-16", end="2024-01-19"))

    keys = days_window(rules.HOLIDAYS, "2024-01-16", "2024-01-19")
    assert keys == ["2024-01-16", "2024-01-17", "2024-01-18", "2024-01-19"]
    assert engine == dagster_side(ASSET_GRAPH, dagster_ranges(ASSET_GRAPH, dict.fromkeys(assets, (keys[0], keys[-1]))))
    assert (("around_open_day", "2024-01-16"), ("open_day", "2024-01-17")) in engine.waits_for


def test_downstream_of_a_friday_reaches_the_monday_after_the_weekend_as_dagster_does():
    engine = engine_side(ASSET_GRAPH, spec("key:workday", keys=["2024-01-05"], downstream=True))

    selection = [dg.AssetKey("workday"), dg.AssetKey("previous_workday")]
    assert engine == dagster_side(ASSET_GRAPH, dagster_target(ASSET_GRAPH, ["2024-01-05"], selection))
    assert ("previous_workday", "2024-01-08") in engine.targets


def test_a_single_run_policy_covers_a_weekend_in_one_run_as_dagster_does():
    """BackfillPolicy.single_run() over Thursday to Tuesday: Dagster makes one run of the four
    workdays; the engine's first run unit takes them all (it broke at the weekend: a gap between
    Friday's window and Monday's, though no partition lies between them)."""
    keys = days_window(rules.WEEKDAYS, "2024-01-04", "2024-01-09")
    ran = dagster_backfill(MODULE, ASSET_GRAPH, dagster_ranges(ASSET_GRAPH, {"batched_workday": (keys[0], keys[-1])}))
    assert ran.status == BulkActionStatus.COMPLETED_SUCCESS, ran.error
    assert ran.runs == [[("batched_workday", key) for key in keys]]

    graph = plan(ASSET_GRAPH, spec("key:batched_workday", start="2024-01-04", end="2024-01-09"))
    nodes = list(graph.nodes())
    first = unit_starting_at(
        graph, nodes[0], dict.fromkeys(nodes, NodeStatus.PENDING), {}, dict.fromkeys(nodes, 0), len(nodes)
    )

    assert first.partitions == tuple(keys)


# -- point 5: parents that do not exist ---------------------------------------------------


@pytest.mark.parametrize(
    ("child", "parent", "first", "last", "missing"),
    [
        # May partitions reading an asset that starts in June.
        ("may_report", "june_orders", "2024-05-30", "2024-06-01", ["2024-05-30", "2024-05-31"]),
        # Partitions after the end date of the asset they read.
        ("open_report", "closed_ledger", "2024-05-14", "2024-05-17", ["2024-05-16", "2024-05-17"]),
    ],
)
def test_a_partition_whose_parent_does_not_exist_is_refused_as_dagster_refuses_it(child, parent, first, last, missing):
    ran = dagster_backfill(MODULE, ASSET_GRAPH, dagster_ranges(ASSET_GRAPH, {child: (first, last)}))
    assert ran.status != BulkActionStatus.COMPLETED_SUCCESS and "depends on non-existent partitions" in str(ran.error)
    assert ran.materialized == []

    with pytest.raises(MissingParentPartitionError) as refused:
        engine_side(ASSET_GRAPH, spec(f"key:{child}", start=first, end=last))

    message = str(refused.value)
    assert all(name in message for name in (child, parent, *missing, "allow_nonexistent_upstream_partitions"))
    assert "nothing was planned or written" in message


def test_a_mapping_that_allows_missing_parents_is_planned_as_dagster_targets_it():
    engine = engine_side(ASSET_GRAPH, spec("key:tolerant_report", start="2024-05-30", end="2024-06-01"))

    assert engine == dagster_side(
        ASSET_GRAPH, dagster_ranges(ASSET_GRAPH, {"tolerant_report": ("2024-05-30", "2024-06-01")})
    )


@pytest.mark.slow  # a `partition-assets` process
def test_a_missing_parent_is_refused_by_the_command_before_anything_is_written(home):
    """`backfill run` exits 2 with one line naming the partitions and the fix; no record, no run."""
    refused = backfill_cli(
        home, "run", "-m", MODULE, "--select", "may_report", "--start", "2024-05-31", "--end", "2024-06-01"
    )

    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "may_report 2024-05-31 reads june_orders 2024-05-31" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "nothing was planned or written" in refused.stderr
    assert recorded_ids(home) == []
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.get_runs() == []


# -- point 8: keys holding a comma --------------------------------------------------------


def parsed(*arguments: str) -> BackfillSpec:
    """The spec of `backfill run`'s spec flags, parsed as the command line parses them."""
    parser = argparse.ArgumentParser()
    add_spec_arguments(parser)
    return spec_from_arguments(parser.parse_args(arguments), MODULE)


def test_a_key_holding_a_comma_is_named_whole_by_key_as_dagster_names_it():
    """--key takes each key whole: a comma, a slash, a space, non-ASCII letters; Dagster
    materializes the same key by name (`dagster asset materialize --partition 'a,b'`)."""
    given = parsed("--select", "regional", "--key", "a,b", "--key", "c/d", "--key", "é ü", "--keys", "plain")

    assert list(given.keys) == ["a,b", "c/d", "é ü", "plain"]
    assert engine_side(ASSET_GRAPH, given) == dagster_side(
        ASSET_GRAPH, dagster_target(ASSET_GRAPH, ["a,b", "c/d", "é ü", "plain"], [dg.AssetKey("regional")])
    )
    assert dg.materialize([rules.regional], partition_key="a,b").success


@pytest.mark.slow  # a `partition-assets` process
def test_a_key_that_is_no_partition_of_the_selection_is_refused_writing_nothing(home):
    refused = backfill_cli(home, "run", "-m", MODULE, "--select", "regional", "--key", "a,c")

    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert (
        "['a,c'] is no partition of any selected asset" in refused.stderr and "nothing was launched" in refused.stderr
    )
    assert recorded_ids(home) == []


@pytest.mark.slow  # a `partition-assets` process
def test_the_plan_command_lists_a_key_holding_a_comma(home):
    shown = ok(backfill_cli(home, "plan", "-m", MODULE, "--select", "regional", "--key", "a,b", "--json"))

    assert '"partition": "a,b"' in shown and '"node_count": 1' in shown


def test_keys_still_splits_on_commas():
    assert list(parsed("--select", "regional", "--keys", "plain,c/d").keys) == ["plain", "c/d"]
    with pytest.raises(
        BackfillPlanError, match=r"--keys \[.a., .b.\] are no partition of any selected asset.*--key KEY"
    ):
        engine_side(ASSET_GRAPH, parsed("--select", "regional", "--keys", "a,b"))
