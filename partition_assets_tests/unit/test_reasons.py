"""Issue 41's pure logic, with fakes: the rules that pick partitions by the commit that made them or
by staleness (reasons.py), the 'downstream of' reasons, the counts `backfill plan` prints, and the
spec's checks of `produced_by` and `history_as_of`. Against an instance and a real git repository:
integration/test_history.py."""

import dagster as dg
import numpy as np
import pytest

from partition_assets.backfill.planning.edges import Dependency
from partition_assets.backfill.planning.graph import build_graph
from partition_assets.backfill.planning.reasons import (
    Made,
    Reason,
    ReasonKind,
    UpstreamMade,
    add_downstream_reasons,
    produced_by,
    reason_lines,
    stale,
)
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.errors import BackfillPlanError

FIRST, SECOND = "a" * 40, "b" * 40
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]


def test_produced_by_matches_the_recorded_commit_and_asks_code_versions_only_for_unrecorded_ones():
    latest = {DAYS[0]: Made(1, FIRST, "v1"), DAYS[1]: Made(2, SECOND, "v1")}
    asked = []

    def versions() -> frozenset[str]:
        asked.append(1)
        return frozenset({"v1"})

    assert produced_by(DAYS, latest, frozenset({FIRST}), versions) == {
        DAYS[0]: Reason(ReasonKind.PRODUCED_BY, "aaaaaaa")
    }
    assert asked == []  # every materialization recorded its commit
    latest[DAYS[2]] = Made(3, None, "v1")
    found = produced_by(DAYS, latest, frozenset({FIRST}), versions)
    assert found[DAYS[2]].text() == "produced by code version v1" and len(found) == 2 and asked == [1]


def test_stale_reasons_missing_then_code_version_then_the_first_upstream_partition_made_since():
    latest = {DAYS[0]: Made(10, FIRST, "old"), DAYS[1]: Made(11, FIRST, "new")}
    # Each day reads the same day of `orders`, whose 2024-01-02 was made again (storage id 12 > 11).
    identity = Dependency(dg.AssetKey("revenue"), dg.AssetKey("orders"), starts=np.arange(3), stops=np.arange(1, 4))
    orders = UpstreamMade("orders", identity, DAYS, np.array([5, 12, -1]))
    assert {p: r.text() for p, r in stale(DAYS, latest, "new", [orders]).items()} == {
        DAYS[0]: "code version changed",  # also read orders made before it, but its own code changed first
        DAYS[1]: "upstream orders 2024-01-02 re-materialized",
        DAYS[2]: "missing",
    }
    assert stale(DAYS[1:2], latest, "new", []) == {}


def test_downstream_nodes_are_named_after_the_selected_assets_they_read():
    @dg.asset(partitions_def=dg.DailyPartitionsDefinition("2024-01-01", end_date="2024-01-04"))
    def orders() -> None: ...

    @dg.asset(partitions_def=orders.partitions_def, deps=[orders])
    def revenue() -> None: ...

    @dg.asset(partitions_def=orders.partitions_def, deps=[revenue])
    def report() -> None: ...

    asset_graph = dg.Definitions(assets=[orders, revenue, report]).resolve_asset_graph()
    picked = {orders.key: [DAYS[1]], revenue.key: [DAYS[0]]}
    graph = build_graph(asset_graph, picked, downstream=True, picked_keys=picked)
    reasons = {orders.key: {DAYS[1]: Reason(ReasonKind.MISSING)}, revenue.key: {DAYS[0]: Reason(ReasonKind.MISSING)}}
    complete = add_downstream_reasons(graph, reasons)
    assert {k.to_user_string(): {p: r.text() for p, r in v.items()} for k, v in complete.items()} == {
        "orders": {DAYS[1]: "missing"},
        "revenue": {DAYS[0]: "missing", DAYS[1]: "downstream of orders"},
        "report": {DAYS[0]: "downstream of revenue", DAYS[1]: "downstream of orders"},
    }


def test_reason_lines_count_each_reason_per_asset_the_most_first_and_sum_the_rest():
    by_partition = {
        f"2024-01-{d:02d}": Reason(ReasonKind.UPSTREAM_REMATERIALIZED, f"orders 2024-01-{d:02d}") for d in (1, 2)
    }
    by_partition |= {f"2024-02-{d:02d}": Reason(ReasonKind.PRODUCED_BY, "3f2a1c9") for d in range(1, 4)}
    by_partition["2024-03-01"] = Reason(ReasonKind.MISSING)
    assert reason_lines({dg.AssetKey("revenue"): by_partition}, shown=2) == [
        "revenue: 3 produced by 3f2a1c9, 1 upstream orders 2024-01-01 re-materialized, 2 for 2 other reasons"
    ]


@pytest.mark.parametrize("value", ["", "a..", "..b", "a...b"])
def test_produced_by_must_be_a_commit_or_a_two_dot_range(value):
    with pytest.raises(BackfillPlanError, match="neither a commit nor a range"):
        BackfillSpec(module="m", selection="*", produced_by=value)


def test_history_as_of_judges_only_produced_by_or_stale_and_is_a_storage_id():
    with pytest.raises(BackfillPlanError, match="judges only --produced-by or --stale"):
        BackfillSpec(module="m", selection="*", history_as_of=3)
    with pytest.raises(BackfillPlanError, match="give a storage id >= 0"):
        BackfillSpec(module="m", selection="*", stale=True, history_as_of=-1)
    assert BackfillSpec(module="m", selection="*", produced_by="a..b", history_as_of=0).selects_by_history()
