"""What a retract removes (backfill/planning/retraction.py), planned on a small asset graph with
the instance's materialized partitions given as a set, and how its result reads
(commands/results.py `Retracted`)."""

import dagster as dg
import pytest

from partition_assets.backfill.commands import RemovedPartition, Retracted
from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.graph import plan
from partition_assets.backfill.planning.retraction import SHOWN_IN_REFUSALS, describe_nodes, retracted_nodes
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing.gate_evaluation import GateCheck
from partition_assets.errors import DownstreamReadersError, NotMaterializedError
from partition_assets.partitions import daily

DAYS = daily("2024-01-01", end="2024-01-11")


@dg.asset(partitions_def=DAYS)
def events() -> None: ...


@dg.asset(partitions_def=DAYS, deps=[events])
def daily_counts() -> None: ...


ASSET_GRAPH = dg.Definitions(assets=[events, daily_counts]).resolve_asset_graph()
EVENTS, COUNTS = dg.AssetKey("events"), dg.AssetKey("daily_counts")


def graphs(keys: list[str]):
    """(the selection's graph, the selection's graph with its downstream) of `events` at `keys`."""
    spec = BackfillSpec(module="unused", selection="events", keys=keys)
    return plan(ASSET_GRAPH, spec), plan(
        ASSET_GRAPH, BackfillSpec(module="unused", selection="events", keys=keys, downstream=True)
    )


def nodes(asset: dg.AssetKey, *days: str) -> set[Node]:
    return {Node(asset, day) for day in days}


def test_the_selected_partitions_are_retracted_when_nothing_downstream_is_materialized():
    selected, reach = graphs(["2024-01-02", "2024-01-03"])
    materialized = nodes(EVENTS, "2024-01-01", "2024-01-02", "2024-01-03") | nodes(COUNTS, "2024-01-01")

    assert retracted_nodes(selected, reach, materialized, downstream=False) == [
        Node(EVENTS, "2024-01-02"),
        Node(EVENTS, "2024-01-03"),
    ]


def test_a_materialized_downstream_partition_refuses_the_retract_naming_it_and_the_fix():
    selected, reach = graphs(["2024-01-02", "2024-01-03"])
    materialized = nodes(EVENTS, "2024-01-02", "2024-01-03") | nodes(COUNTS, "2024-01-03")

    with pytest.raises(DownstreamReadersError) as refused:
        retracted_nodes(selected, reach, materialized, downstream=False)

    message = str(refused.value)
    assert "daily_counts 2024-01-03" in message and "daily_counts 2024-01-02" not in message
    assert "--downstream" in message and "Nothing was written" in message


def test_with_downstream_the_materialized_downstream_partitions_are_retracted_too_upstream_first():
    selected, reach = graphs(["2024-01-02", "2024-01-03"])
    materialized = nodes(EVENTS, "2024-01-02", "2024-01-03") | nodes(COUNTS, "2024-01-03", "2024-01-04")

    assert retracted_nodes(selected, reach, materialized, downstream=True) == [
        Node(EVENTS, "2024-01-02"),
        Node(EVENTS, "2024-01-03"),
        Node(COUNTS, "2024-01-03"),  # 2024-01-02 holds nothing to remove; 2024-01-04 does not read them
    ]


def test_a_selected_partition_never_materialized_is_refused_naming_it():
    selected, reach = graphs(["2024-01-02", "2024-01-08"])

    with pytest.raises(NotMaterializedError) as refused:
        retracted_nodes(selected, reach, nodes(EVENTS, "2024-01-02"), downstream=True)

    assert "events 2024-01-08" in str(refused.value) and "events 2024-01-02" not in str(refused.value)


def test_a_refusal_names_the_first_partitions_and_how_many_more():
    many = [Node(EVENTS, f"2024-01-{day:02d}") for day in range(1, SHOWN_IN_REFUSALS + 4)]

    text = describe_nodes(many)

    assert text.startswith("events 2024-01-01, events 2024-01-02") and text.endswith(" and 3 more")


def test_a_retract_s_result_lists_each_removed_partition_its_failed_checks_and_the_rollback():
    retracted = Retracted(
        "bf1",
        (RemovedPartition("events", "2024-01-02", 3), RemovedPartition("daily_counts", "2024-01-02", 1)),
        {"events": 4, "daily_counts": 7},
        (
            GateCheck("events", ("2024-01-02",), "rows", 3, 0, 1.5, passed=False),
            GateCheck("events", ("2024-01-02",), "null_keys", 0, 0, 0, passed=True),
        ),
    )

    assert retracted.lines[:2] == (
        "removed events 2024-01-02: 3 rows -> 0",
        "removed daily_counts 2024-01-02: 1 rows -> 0",
    )
    assert retracted.lines[2].endswith("events 2024-01-02 rows: 3 -> 0 (limit ±1.5) FAILED")
    assert "null_keys" not in retracted.lines[2]
    assert retracted.message == (
        "backfill bf1 retracted 2 partitions: events v4, daily_counts v7; "
        "`partition-assets backfill rollback bf1` brings them back"
    )
