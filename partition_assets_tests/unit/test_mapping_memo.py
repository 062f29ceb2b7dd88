"""Planning asks Dagster's partition mappings each distinct question once per plan
(backfill/planning/mapping_memo.py): 30 tables reading one multi-partitioned table by its
day dimension cost Dagster the questions of one table, and plan the same graph as edges
computed table by table."""

import dagster as dg

from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.graph import plan
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.partitions import daily, multi, static

DAILY = daily("2024-01-01", end="2024-02-01")
BY_REGION = multi(ds=DAILY, region=static(["emea", "amer"]))
READERS = 30
DAYS = ["2024-01-03", "2024-01-04", "2024-01-05"]


class CountedDayDimension(dg.MultiToSingleDimensionPartitionMapping):
    """Dagster's mapping to one dimension, counting the questions it answers (class-wide)."""

    upstream_asked = 0
    downstream_asked = 0

    def get_upstream_mapped_partitions_result_for_partitions(self, *args, **kwargs):
        CountedDayDimension.upstream_asked += 1
        return super().get_upstream_mapped_partitions_result_for_partitions(*args, **kwargs)

    def get_downstream_partitions_for_partitions(self, *args, **kwargs):
        CountedDayDimension.downstream_asked += 1
        return super().get_downstream_partitions_for_partitions(*args, **kwargs)


@dg.asset(partitions_def=BY_REGION)
def orders() -> None: ...


def _reader(index: int) -> dg.AssetsDefinition:
    @dg.asset(
        name=f"report_{index}",
        partitions_def=DAILY,
        deps=[dg.AssetDep(orders, partition_mapping=CountedDayDimension("ds"))],
    )
    def report() -> None: ...

    return report


ASSET_GRAPH = dg.Definitions(assets=[orders, *[_reader(index) for index in range(READERS)]]).resolve_asset_graph()


def test_each_distinct_mapping_question_is_asked_once_per_plan():
    spec = BackfillSpec(module=__name__, selection="key:orders", start=DAYS[0], end=DAYS[-1], downstream=True)
    CountedDayDimension.upstream_asked = CountedDayDimension.downstream_asked = 0

    graph = plan(ASSET_GRAPH, spec)

    # One downstream question (orders' 6 partitions -> days) for all 30 readers; one upstream
    # question per day (the reader's day -> orders' 2 regions of it) for all 30 readers, and
    # one for the reader's whole range (do its parents exist? missing_parents.py).
    assert (CountedDayDimension.downstream_asked, CountedDayDimension.upstream_asked) == (1, len(DAYS) + 1)
    assert graph.node_count() == 2 * len(DAYS) + READERS * len(DAYS)
    for index in range(READERS):
        for day in DAYS:
            upstream = graph.upstream(Node(dg.AssetKey(f"report_{index}"), day))
            assert {node.partition for node in upstream} == {
                dg.MultiPartitionKey({"ds": day, "region": region}) for region in ("emea", "amer")
            }
