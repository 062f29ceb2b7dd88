"""Dagster's own backfill scenarios, planned by the engine and targeted by Dagster side by side.

Each scenario reproduces one of Dagster's tests (its name says which): the asset graphs of
`test_asset_backfill.py`'s scenarios (dagster_tests/.../auto_materialize_tests/scenarios:
partition_scenarios.py and asset_graphs.py) and shapes of its partition-mapping tests
(test_time_window_partition_mapping.py, test_static_partition_mapping.py,
test_multi_partition_mapping.py). Time definitions get an end date here, so that a scenario
does not move with the clock. The engine plans the backfill as a user asks for it (its roots'
keys with --downstream, a range, or --all-partitions); Dagster's target is built as its
webserver and its tests build it. Both must give the same (asset, partition) targets and the
same order among them (planning_compare.py).
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import dagster as dg
import pytest

from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.dagster_internals import AssetGraph, AssetGraphSubset, DynamicPartitionsStore
from partition_assets_tests.conformance.planning_compare import (
    dagster_ranges,
    dagster_side,
    dagster_target,
    engine_side,
)

Parents = Mapping[str, dg.PartitionMapping | None]

DAILY_2020 = dg.DailyPartitionsDefinition("2020-01-01", end_date="2020-01-08")
HOURLY_2020 = dg.HourlyPartitionsDefinition("2020-01-01-00:00", end_date="2020-01-08-00:00")
HOURLY_2013 = dg.HourlyPartitionsDefinition("2013-01-05-00:00", end_date="2013-01-07-00:00")
DAILY_2013 = dg.DailyPartitionsDefinition("2013-01-05", end_date="2013-01-07")
# Hours into a day whose daily partition is not complete yet: the daily definition ends before it.
HOURLY_2013_INTO_THE_7TH = dg.HourlyPartitionsDefinition("2013-01-05-00:00", end_date="2013-01-07-11:00")
DAILY_2024 = dg.DailyPartitionsDefinition("2024-01-01", end_date="2024-01-29")
WEEKLY_2024 = dg.WeeklyPartitionsDefinition("2024-01-07", end_date="2024-01-28")
FEW_DAYS = dg.DailyPartitionsDefinition("2024-01-01", end_date="2024-01-05")
FOO = dg.DynamicPartitionsDefinition(name="foo")


def asset_def(
    key: str, parents: Parents | Sequence[str] = (), partitions_def: dg.PartitionsDefinition | None = None
) -> dg.AssetsDefinition:
    """A trivial asset reading `parents` (by name, each with its partition mapping or Dagster's default)."""
    mapped = parents if isinstance(parents, Mapping) else dict.fromkeys(parents)

    @dg.asset(
        name=key,
        partitions_def=partitions_def,
        deps=[dg.AssetDep(parent, partition_mapping=mapping) for parent, mapping in mapped.items()],
    )
    def _asset() -> None: ...

    return _asset


def static(*keys: str) -> dg.StaticPartitionsDefinition:
    return dg.StaticPartitionsDefinition(list(keys))


@dataclass(frozen=True)
class Scenario:
    """Assets, the engine's spec fields, and how Dagster's target is built."""

    assets: list[dg.AssetsDefinition]
    engine: Mapping[str, object]
    dagster: Callable[[AssetGraph, DynamicPartitionsStore], AssetGraphSubset]
    dynamic: Mapping[str, list[str]] = field(default_factory=dict)


EVERY_PARTITION = {"selection": "*", "all_partitions": True}


def everything(asset_graph: AssetGraph, store: DynamicPartitionsStore) -> AssetGraphSubset:
    return dagster_target(asset_graph, None, store=store)


def roots_with(*names: str) -> Callable[[AssetGraph, DynamicPartitionsStore], AssetGraphSubset]:
    """Dagster's target of partition `names` given to the root assets, over every asset."""
    return lambda asset_graph, store: dagster_target(asset_graph, list(names), store=store)


def downstream_of(root: str, *keys: str) -> Mapping[str, object]:
    """The engine's spec of `keys` of asset `root` and every partition they reach."""
    return {"selection": f"key:{root}", "keys": list(keys), "downstream": True}


SCENARIOS = {
    # test_asset_backfill.py's scenarios (partition_scenarios.py, asset_graphs.py)
    "one_asset_one_partition": Scenario([asset_def("asset1", (), static("a"))], EVERY_PARTITION, everything),
    "one_asset_two_partitions": Scenario([asset_def("asset1", (), static("a", "b"))], EVERY_PARTITION, everything),
    "two_assets_in_sequence_one_partition": Scenario(
        [asset_def("asset1", (), static("a")), asset_def("asset2", ["asset1"], static("a"))],
        EVERY_PARTITION,
        everything,
    ),
    "two_assets_in_sequence_two_partitions": Scenario(
        [asset_def("asset1", (), static("a", "b")), asset_def("asset2", ["asset1"], static("a", "b"))],
        downstream_of("asset1", "a"),
        roots_with("a"),
    ),
    "two_assets_in_sequence_fan_in_partitions": Scenario(
        [
            asset_def("asset1", (), static("a_1", "a_2", "a_3")),
            asset_def(
                "asset2", {"asset1": dg.StaticPartitionMapping({"a_1": "a", "a_2": "a", "a_3": "a"})}, static("a")
            ),
        ],
        downstream_of("asset1", "a_1", "a_2"),
        roots_with("a_1", "a_2"),
    ),
    "two_assets_in_sequence_fan_out_partitions": Scenario(
        [
            asset_def("asset1", (), static("a", "b", "c")),
            asset_def(
                "asset2",
                {"asset1": dg.StaticPartitionMapping({"a": ["a_1", "a_2", "a_3"]})},
                static("a_1", "a_2", "a_3"),
            ),
        ],
        downstream_of("asset1", "a"),
        roots_with("a"),
    ),
    "non_partitioned_after_partitioned": Scenario(
        [asset_def("asset1", (), DAILY_2020), asset_def("asset2", ["asset1"])],
        downstream_of("asset1", "2020-01-01", "2020-01-02"),
        roots_with("2020-01-01", "2020-01-02"),
    ),
    "partitioned_after_non_partitioned": Scenario(
        [asset_def("asset1"), asset_def("asset2", ["asset1"]), asset_def("asset3", ["asset2"], DAILY_2020)],
        {"selection": "*", "keys": ["2020-01-01", "2020-01-02"]},
        roots_with("2020-01-01", "2020-01-02"),
    ),
    "one_asset_self_dependency": Scenario(
        [asset_def("asset1", {"asset1": dg.TimeWindowPartitionMapping(start_offset=-1, end_offset=-1)}, DAILY_2020)],
        EVERY_PARTITION,
        everything,
    ),
    "hourly_to_daily_partitions": Scenario(
        [asset_def("hourly", (), HOURLY_2013), asset_def("daily", ["hourly"], DAILY_2013)],
        downstream_of("hourly", "2013-01-05-22:00", "2013-01-05-23:00", "2013-01-06-00:00", "2013-01-06-01:00"),
        roots_with("2013-01-05-22:00", "2013-01-05-23:00", "2013-01-06-00:00", "2013-01-06-01:00"),
    ),
    "hourly_with_nonexistent_downstream_daily_partition": Scenario(
        [asset_def("hourly", (), HOURLY_2013_INTO_THE_7TH), asset_def("daily", ["hourly"], DAILY_2013)],
        downstream_of("hourly", "2013-01-07-05:00"),
        roots_with("2013-01-07-05:00"),
    ),
    "root_assets_different_partitions_same_downstream": Scenario(
        [
            asset_def("root1", (), DAILY_2020),
            asset_def("root2", (), HOURLY_2020),
            asset_def("downstream", ["root1", "root2"], DAILY_2020),
        ],
        EVERY_PARTITION,
        everything,
    ),
    "multipartitioned_self_dependency": Scenario(
        [
            asset_def(
                "asset1",
                {
                    "asset1": dg.MultiPartitionMapping(
                        {
                            "time": dg.DimensionPartitionMapping(
                                "time", dg.TimeWindowPartitionMapping(start_offset=-1, end_offset=-1)
                            ),
                            "abc": dg.DimensionPartitionMapping("abc", dg.IdentityPartitionMapping()),
                        }
                    )
                },
                dg.MultiPartitionsDefinition({"time": FEW_DAYS, "abc": static("a", "b", "c")}),
            )
        ],
        EVERY_PARTITION,
        everything,
    ),
    "two_dynamic_assets": Scenario(
        [asset_def("asset1", (), FOO), asset_def("asset2", ["asset1"], FOO)],
        EVERY_PARTITION,
        everything,
        dynamic={"foo": ["a", "b"]},
    ),
    "unpartitioned_after_dynamic_asset": Scenario(
        [asset_def("asset1", (), FOO), asset_def("asset2", ["asset1"])],
        EVERY_PARTITION,
        everything,
        dynamic={"foo": ["a", "b"]},
    ),
    # Shapes of Dagster's partition-mapping tests
    "daily_to_weekly": Scenario(
        [asset_def("daily", (), DAILY_2024), asset_def("weekly", ["daily"], WEEKLY_2024)],
        downstream_of("daily", *(f"2024-01-{day:02d}" for day in range(6, 16))),
        roots_with(*(f"2024-01-{day:02d}" for day in range(6, 16))),
    ),
    "time_window_start_offset_minus_one": Scenario(
        [
            asset_def("daily", (), DAILY_2024),
            asset_def("two_days", {"daily": dg.TimeWindowPartitionMapping(start_offset=-1)}, DAILY_2024),
        ],
        {"selection": "key:daily or key:two_days", "start": "2024-01-02", "end": "2024-01-05"},
        lambda asset_graph, _: dagster_ranges(
            asset_graph, {"daily": ("2024-01-02", "2024-01-05"), "two_days": ("2024-01-02", "2024-01-05")}
        ),
    ),
    "multi_to_single_dimension": Scenario(
        [
            asset_def("orders", (), dg.MultiPartitionsDefinition({"date": FEW_DAYS, "region": static("emea", "amer")})),
            asset_def("report", {"orders": dg.MultiToSingleDimensionPartitionMapping("date")}, FEW_DAYS),
        ],
        EVERY_PARTITION,
        everything,
    ),
    "all_partition_mapping": Scenario(
        [asset_def("daily", (), FEW_DAYS), asset_def("summary", {"daily": dg.AllPartitionMapping()}, static("x"))],
        EVERY_PARTITION,
        everything,
    ),
    "last_partition_mapping": Scenario(
        [asset_def("daily", (), FEW_DAYS), asset_def("latest", {"daily": dg.LastPartitionMapping()})],
        EVERY_PARTITION,
        everything,
    ),
    "specific_partitions_mapping": Scenario(
        [
            asset_def("regions", (), static("a", "b", "c")),
            asset_def("daily", {"regions": dg.SpecificPartitionsPartitionMapping(["b"])}, FEW_DAYS),
        ],
        EVERY_PARTITION,
        everything,
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_engine_plans_the_targets_and_order_of_dagsters_backfill(name):
    scenario = SCENARIOS[name]
    asset_graph = dg.Definitions(assets=scenario.assets).resolve_asset_graph()
    store = dg.DagsterInstance.ephemeral()
    for definition, keys in scenario.dynamic.items():
        store.add_dynamic_partitions(definition, keys)

    engine = engine_side(asset_graph, BackfillSpec(module=__name__, **scenario.engine), store)
    dagster = dagster_side(asset_graph, scenario.dagster(asset_graph, store), store)

    assert engine.targets, "the scenario targets nothing"
    assert engine.targets == dagster.targets
    assert engine.waits_for == dagster.waits_for
