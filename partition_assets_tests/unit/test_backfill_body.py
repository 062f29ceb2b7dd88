"""A Dagster backfill serialized asset by asset (backfill/dagster_ui/backfill_body.py): what it
writes reads back, through Dagster's own deserializer, as the backfill Dagster would have
stored; changing some assets serializes those assets' subsets and no others; and the
mirror's per-asset conversion of nodes (conversion.py) holds what Dagster's does."""

import time

import dagster as dg
import pytest

from partition_assets.backfill.dagster_ui.backfill_body import FAILED, MATERIALIZED, REQUESTED, BackfillBody
from partition_assets.backfill.dagster_ui.conversion import PartitionSubsets, graph_subset, subset_of
from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.graph import build_graph
from partition_assets.dagster_internals import (
    AssetGraphSubset,
    AssetKeyPartitionKey,
    BulkActionStatus,
    PartitionBackfill,
    deserialize_value,
)

DAILY = dg.DailyPartitionsDefinition("2024-01-01", end_date="2024-03-01")
HOURLY = dg.HourlyPartitionsDefinition("2024-01-01-00:00", end_date="2024-01-08-00:00")
REGIONS = dg.StaticPartitionsDefinition(["emea", "amer", "apac"])
BY_REGION = dg.MultiPartitionsDefinition({"ds": DAILY, "region": REGIONS})


@dg.asset(partitions_def=HOURLY)
def clicks() -> None: ...


@dg.asset(partitions_def=DAILY, deps=[clicks])
def visits() -> None: ...


@dg.asset(partitions_def=BY_REGION, deps=[visits])
def regional() -> None: ...


@dg.asset(partitions_def=REGIONS, deps=[regional])
def summary() -> None: ...


@dg.asset(deps=[summary])
def report() -> None: ...


GRAPH = dg.Definitions(assets=[clicks, visits, regional, summary, report]).resolve_asset_graph()
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]
KEYS = {
    clicks.key: [f"{day}-{hour:02d}:00" for day in DAYS for hour in range(24)],
    visits.key: DAYS,
    regional.key: [dg.MultiPartitionKey({"ds": day, "region": region}) for day in DAYS for region in ("emea", "apac")],
    summary.key: ["emea", "apac"],
    report.key: [None],
}


def subset(asset_keys, fraction: slice = slice(None)) -> AssetGraphSubset:
    """The given part of KEYS' partitions of `asset_keys`."""
    nodes = {AssetKeyPartitionKey(key, partition) for key in asset_keys for partition in KEYS[key][fraction]}
    return AssetGraphSubset.from_asset_partition_set(nodes, GRAPH)


@pytest.fixture(scope="module")
def backfill() -> PartitionBackfill:
    """A backfill of every partition of KEYS, as the mirror creates it."""
    with dg.instance_for_test() as instance:
        return PartitionBackfill.from_asset_graph_subset(
            backfill_id="body",
            backfill_timestamp=time.time(),
            tags={"team": "finance", "note": 'quotes " and \\ and "__mapping_items__"'},
            dynamic_partitions_store=instance,
            asset_graph_subset=subset(KEYS),
            title=None,
            description="a backfill of every kind of asset",
            run_config=None,
        )


def counts(backfill: PartitionBackfill) -> dict[dg.AssetKey, dict[str, int]]:
    """The per-asset counts the webserver's backfill page shows (Dagster computes them)."""
    statuses = backfill.get_asset_backfill_data(GRAPH).get_backfill_status_per_asset_key(GRAPH)
    return {
        status.asset_key: {"targeted": status.num_targeted_partitions}
        | {state.value: count for state, count in status.partitions_counts_by_status.items()}
        for status in statuses
        if hasattr(status, "num_targeted_partitions")
    }


def test_the_body_reads_back_as_the_backfill_dagster_would_store(backfill):
    body = BackfillBody(backfill)
    requested, materialized = subset(KEYS, slice(0, 2)), subset(KEYS, slice(0, 1))
    failed = subset([visits.key, regional.key], slice(1, 2))
    for field, progress in ((REQUESTED, requested), (MATERIALIZED, materialized), (FAILED, failed)):
        body.replace(field, progress.partitions_subsets_by_asset_key)
        body.replace_unpartitioned(field, progress.non_partitioned_asset_keys)
    canceling = backfill.with_status(BulkActionStatus.CANCELING)

    read = deserialize_value(body.text(canceling), PartitionBackfill)

    progress = backfill.asset_backfill_data._replace(
        requested_subset=requested, materialized_subset=materialized, failed_and_downstream_subset=failed
    )
    assert read == canceling._replace(asset_backfill_data=progress)
    assert read.get_asset_backfill_data(GRAPH).materialized_subset.non_partitioned_asset_keys == {report.key}
    shown = counts(read)
    assert shown[clicks.key] == {"targeted": 72, "MATERIALIZED": 1, "FAILED": 0, "IN_PROGRESS": 1}
    assert shown[visits.key] == {"targeted": 3, "MATERIALIZED": 1, "FAILED": 1, "IN_PROGRESS": 0}
    assert shown[regional.key] == {"targeted": 6, "MATERIALIZED": 1, "FAILED": 1, "IN_PROGRESS": 0}


def test_changing_one_asset_serializes_that_asset_s_subset_and_no_other(backfill):
    body = BackfillBody(backfill)
    assert body.serialized_subsets == 4  # the target's partitioned assets, once
    body.text(backfill)
    assert body.serialized_subsets == 4  # writing again serializes no subset

    body.replace(MATERIALIZED, subset([visits.key], slice(0, 2)).partitions_subsets_by_asset_key)
    text = body.text(backfill)

    assert body.serialized_subsets == 5
    read = deserialize_value(text, PartitionBackfill).get_asset_backfill_data(GRAPH)
    assert read.target_subset == subset(KEYS)
    assert read.materialized_subset == subset([visits.key], slice(0, 2))


def test_a_backfill_without_asset_backfill_data_is_refused(backfill):
    job_backfill = backfill._replace(asset_backfill_data=None)
    with pytest.raises(ValueError, match="holds no asset backfill data"):
        BackfillBody(job_backfill)


def test_the_mirror_s_conversion_holds_what_dagster_s_does_one_object_for_equal_keys():
    nodes = [Node(key, partition) for key, partitions in KEYS.items() if key != report.key for partition in partitions]
    expected = subset_of(nodes, GRAPH).partitions_subsets_by_asset_key
    subsets = PartitionSubsets()

    for key, partitions in KEYS.items():
        if key != report.key:
            partitions_def = GRAPH.get(key).partitions_def
            converted = subsets.of(partitions_def, frozenset(partitions))
            assert converted == expected[key]
            assert subsets.of(partitions_def, frozenset(reversed(partitions))) is converted
            first = frozenset(partitions[:1])
            grown = PartitionSubsets()
            grown.of(partitions_def, first)
            assert grown.of(partitions_def, frozenset(partitions), grown_from=first) == converted


WEEKDAYS = dg.DailyPartitionsDefinition("2024-01-01", end_date="2024-02-01", exclusions=["0 0 * * 6", "0 0 * * 0"])
PARIS_HOURS = dg.HourlyPartitionsDefinition("2024-03-30-00:00", timezone="Europe/Paris", end_date="2024-04-02-00:00")


@pytest.mark.parametrize("partitions_def", [HOURLY, DAILY, WEEKDAYS, PARIS_HOURS])
def test_a_slice_s_keys_converted_from_its_windows_hold_what_dagster_s_conversion_does(partitions_def):
    """conversion.py converts a time-partitioned asset's keys from its slice's windows (no key
    parsed): the same subset as Dagster's, for the whole slice, runs with gaps, one key and none,
    across excluded days and a daylight saving change; the whole graph as `subset_of` has it."""

    @dg.asset(partitions_def=partitions_def)
    def timed() -> None: ...

    asset_graph = dg.Definitions(assets=[timed, report]).resolve_asset_graph()
    keys = list(partitions_def.get_partition_keys())
    graph = build_graph(asset_graph, {timed.key, report.key}, explicit_keys=keys[:5] + keys[7:])
    asset_slice = graph.slices[timed.key]
    for chosen in (
        asset_slice.partition_keys,
        asset_slice.partition_keys[2:9] + asset_slice.partition_keys[12:20],
        keys[3:4],
        [],
    ):
        expected = subset_of([Node(timed.key, key) for key in chosen], asset_graph).partitions_subsets_by_asset_key
        converted = PartitionSubsets().of(partitions_def, frozenset(chosen), asset_slice=asset_slice)
        assert converted == expected.get(timed.key, partitions_def.empty_subset())
    assert graph_subset(graph, asset_graph, PartitionSubsets()) == subset_of(graph.nodes(), asset_graph)
