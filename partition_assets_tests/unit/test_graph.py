"""The backfill graph's edges equal a brute-force enumeration through Dagster's own
mappings, key by key, for every mapping shape, over small ranges."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import dagster as dg
import pytest

from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.graph import build_graph
from partition_assets.backfill.planning.spec import TimeRange
from partition_assets.backfill.planning.windows import WindowCache, _grid_keys, keys_in_window
from partition_assets.errors import BackfillPlanError
from partition_assets.example import defs as example_defs
from partition_assets.partitions import (
    cron,
    daily,
    hourly,
    mappings,
    monthly,
    multi,
    static,
    weekly,
)
from partition_assets.partitions.mappings import upstream_keys

UTC = UTC


def brute_force_upstream(asset_graph, graph, node: Node) -> set[Node]:
    """The node's upstream nodes inside the graph, through Dagster's mappings key by key."""
    return {
        parent
        for parent in brute_force_upstream_all(asset_graph, node)
        if parent.asset in graph.slices and parent.partition in graph.slices[parent.asset].index_of
    }


def assert_edges_match(asset_graph, graph):
    checked = 0
    for node in graph.nodes():
        assert set(graph.upstream(node)) == brute_force_upstream(asset_graph, graph, node), node
        checked += 1
    assert checked == graph.node_count() > 0


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 15, tzinfo=UTC)),  # the first partitions
        (datetime(2024, 2, 20, tzinfo=UTC), datetime(2024, 3, 3, tzinfo=UTC)),  # leap day, month end
        (datetime(2024, 1, 30, 18, tzinfo=UTC), datetime(2024, 2, 1, 6, tzinfo=UTC)),  # mid-day edges
    ],
)
def test_example_pipeline_edges_equal_brute_force(instance, start, end):
    instance.add_dynamic_partitions("campaigns", ["spring", "summer"])
    asset_graph = example_defs.resolve_asset_graph()
    graph = build_graph(
        asset_graph,
        asset_graph.get_all_asset_keys(),
        TimeRange(start, end),
        dynamic_partitions_store=instance,
    )
    assert_edges_match(asset_graph, graph)


BERLIN_HOURLY = hourly("2024-03-25-00:00", tz="Europe/Berlin")
BERLIN_DAILY = daily("2024-03-25", tz="Europe/Berlin")
LATE_DAILY = daily("2024-04-01")  # starts after its upstream: offsets reach before its start
DAILY = daily("2024-03-01")
REGIONS = static(["amer", "emea"])


@dg.asset(partitions_def=BERLIN_HOURLY)
def berlin_hours(): ...


@dg.asset(partitions_def=BERLIN_DAILY, ins={"berlin_hours": dg.AssetIn(partition_mapping=mappings.fan_in())})
def berlin_days(berlin_hours): ...


@dg.asset(partitions_def=DAILY)
def days(): ...


@dg.asset(partitions_def=LATE_DAILY, ins={"days": dg.AssetIn(partition_mapping=mappings.rolling_window(5))})
def late_window(days): ...


@dg.asset(
    partitions_def=DAILY,
    ins={"days": dg.AssetIn(partition_mapping=dg.TimeWindowPartitionMapping(start_offset=0, end_offset=1))},
)
def with_next_day(days): ...


@dg.asset(partitions_def=DAILY, ins={"previous": mappings.self_dependency("two_back", periods=2)})
def two_back(previous): ...


@dg.asset(partitions_def=hourly("2024-03-01-00:00"), ins={"days": dg.AssetIn(partition_mapping=mappings.fan_out())})
def hours_of_day(days): ...


@dg.asset(
    partitions_def=weekly("2024-03-04", day_offset=1), ins={"days": dg.AssetIn(partition_mapping=mappings.fan_in())}
)
def weeks(days): ...


@dg.asset(partitions_def=monthly("2024-03-01"), ins={"days": dg.AssetIn(partition_mapping=mappings.fan_in())})
def months(days): ...


@dg.asset(
    partitions_def=cron("0 */8 * * *", "2024-03-01-00:00"),
    ins={"hours_of_day": dg.AssetIn(partition_mapping=mappings.fan_in())},
)
def shifts(hours_of_day): ...


@dg.asset(
    partitions_def=multi(ds=DAILY, region=REGIONS),
    ins={"days": dg.AssetIn(partition_mapping=mappings.to_dimension("ds"))},
)
def by_region(days): ...


@dg.asset(
    partitions_def=multi(ds=DAILY, region=REGIONS),
    ins={
        "by_region": dg.AssetIn(
            partition_mapping=mappings.per_dimension(ds=mappings.rolling_window(3), region=mappings.identity())
        )
    },
)
def by_region_3d(by_region): ...


@dg.asset(ins={"days": dg.AssetIn()})
def everything(days): ...


SHAPES = dg.Definitions(
    assets=[
        berlin_hours,
        berlin_days,
        days,
        late_window,
        with_next_day,
        two_back,
        hours_of_day,
        weeks,
        months,
        shifts,
        by_region,
        by_region_3d,
        everything,
    ]
)


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (datetime(2024, 3, 29, tzinfo=UTC), datetime(2024, 4, 3, tzinfo=UTC)),  # Berlin spring-forward
        (datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 3, 12, tzinfo=UTC)),  # first partitions
        (datetime(2024, 4, 28, 20, tzinfo=UTC), datetime(2024, 5, 2, 4, tzinfo=UTC)),  # month turn
    ],
)
def test_every_mapping_shape_equals_brute_force(start, end):
    asset_graph = SHAPES.resolve_asset_graph()
    graph = build_graph(asset_graph, asset_graph.get_all_asset_keys(), TimeRange(start, end))
    assert_edges_match(asset_graph, graph)


def test_a_range_selects_every_partition_overlapping_it_at_each_grain():
    asset_graph = SHAPES.resolve_asset_graph()
    graph = build_graph(
        asset_graph,
        asset_graph.get_all_asset_keys(),
        TimeRange(datetime(2024, 3, 10, 12, tzinfo=UTC), datetime(2024, 3, 12, tzinfo=UTC)),
    )
    assert graph.slices[dg.AssetKey("days")].partition_keys == ["2024-03-10", "2024-03-11"]
    assert graph.slices[dg.AssetKey("weeks")].partition_keys == ["2024-03-04", "2024-03-11"]
    assert graph.slices[dg.AssetKey("months")].partition_keys == ["2024-03-01"]
    assert len(graph.slices[dg.AssetKey("hours_of_day")]) == 36
    assert graph.slices[dg.AssetKey("everything")].partition_keys == [""]


def test_static_keys_narrow_a_dimension():
    asset_graph = SHAPES.resolve_asset_graph()
    graph = build_graph(
        asset_graph,
        [dg.AssetKey("by_region"), dg.AssetKey("by_region_3d")],
        TimeRange(datetime(2024, 3, 10, tzinfo=UTC), datetime(2024, 3, 12, tzinfo=UTC)),
        static_keys={"region": ["emea"]},
    )
    assert {k.keys_by_dimension["region"] for k in graph.slices[dg.AssetKey("by_region")].partition_keys} == {"emea"}
    with pytest.raises(BackfillPlanError, match="'apac'"):
        build_graph(
            asset_graph,
            [dg.AssetKey("by_region")],
            TimeRange(datetime(2024, 3, 10, tzinfo=UTC), datetime(2024, 3, 12, tzinfo=UTC)),
            static_keys={"region": ["apac"]},
        )


def test_a_time_partitioned_selection_needs_a_range():
    asset_graph = SHAPES.resolve_asset_graph()
    with pytest.raises(BackfillPlanError, match="give a start and an end"):
        build_graph(asset_graph, [dg.AssetKey("days")])


def test_berlin_days_depend_on_23_24_and_25_hours():
    asset_graph = SHAPES.resolve_asset_graph()
    berlin = ZoneInfo("Europe/Berlin")
    graph = build_graph(
        asset_graph,
        [dg.AssetKey("berlin_hours"), dg.AssetKey("berlin_days")],
        TimeRange(datetime(2024, 3, 30, tzinfo=berlin), datetime(2024, 4, 1, tzinfo=berlin)),
    )
    counts = [len(graph.upstream(Node(dg.AssetKey("berlin_days"), d))) for d in ("2024-03-30", "2024-03-31")]
    assert counts == [24, 23]


def test_explicit_keys_give_each_asset_exactly_its_own_and_edges_equal_brute_force():
    asset_graph = SHAPES.resolve_asset_graph()
    keys = ["2024-03-02", "2024-03-05", "2024-03-06", "2024-03-11", "2024-03-05|emea", "2024-03-04"]
    graph = build_graph(asset_graph, asset_graph.get_all_asset_keys(), explicit_keys=keys)
    assert graph.slices[dg.AssetKey("days")].partition_keys == [
        "2024-03-02",
        "2024-03-04",
        "2024-03-05",
        "2024-03-06",
        "2024-03-11",
    ]
    assert graph.slices[dg.AssetKey("weeks")].partition_keys == ["2024-03-04", "2024-03-11"]  # Monday keys
    assert graph.slices[dg.AssetKey("by_region")].partition_keys == ["2024-03-05|emea"]
    assert graph.slices[dg.AssetKey("hours_of_day")].partition_keys == []  # no hourly key given
    assert graph.slices[dg.AssetKey("everything")].partition_keys == [""]
    # Rolling windows, offsets and fan-ins see only the given partitions, never the gaps.
    assert_edges_match(asset_graph, graph)


def test_explicit_keys_that_no_selected_asset_has_are_refused():
    asset_graph = SHAPES.resolve_asset_graph()
    with pytest.raises(BackfillPlanError, match=r"--keys \['2024-03-32', 'x\|emea'\] are no partition"):
        build_graph(
            asset_graph,
            [dg.AssetKey("days"), dg.AssetKey("by_region")],
            explicit_keys=["2024-03-05", "2024-03-32", "x|emea"],
        )


def test_lookback_adds_the_prior_partitions_of_each_time_asset():
    asset_graph = SHAPES.resolve_asset_graph()
    window = TimeRange(datetime(2024, 3, 10, tzinfo=UTC), datetime(2024, 3, 12, tzinfo=UTC))
    graph = build_graph(asset_graph, [dg.AssetKey("days"), dg.AssetKey("months")], window, lookback=2)
    assert graph.slices[dg.AssetKey("days")].partition_keys == ["2024-03-08", "2024-03-09", "2024-03-10", "2024-03-11"]
    assert graph.slices[dg.AssetKey("months")].partition_keys == ["2024-03-01"]  # its first partition
    assert_edges_match(asset_graph, graph)


def test_exact_keeps_only_partitions_wholly_inside_the_range():
    asset_graph = SHAPES.resolve_asset_graph()
    window = TimeRange(datetime(2024, 3, 10, 12, tzinfo=UTC), datetime(2024, 3, 18, tzinfo=UTC))
    graph = build_graph(
        asset_graph, [dg.AssetKey("days"), dg.AssetKey("weeks"), dg.AssetKey("months")], window, exact=True
    )
    assert graph.slices[dg.AssetKey("days")].partition_keys == [f"2024-03-{d}" for d in range(11, 18)]
    assert graph.slices[dg.AssetKey("weeks")].partition_keys == ["2024-03-11"]
    assert graph.slices[dg.AssetKey("months")].partition_keys == []
    with pytest.raises(BackfillPlanError, match="exact and lookback"):
        build_graph(asset_graph, [dg.AssetKey("days")], window, exact=True, lookback=1)


JANUARY = daily("2024-01-01", end="2024-02-01")


@dg.asset(partitions_def=JANUARY)
def source():
    pass


@dg.asset(partitions_def=JANUARY, deps=[dg.AssetDep(source, partition_mapping=mappings.rolling_window(3))])
def rolling():
    pass


@dg.asset(
    partitions_def=JANUARY,
    deps=[
        dg.AssetDep(source, partition_mapping=mappings.identity()),
        dg.AssetDep("running", partition_mapping=mappings.previous_period()),
    ],
)
def running():
    pass


@dg.asset(
    partitions_def=monthly("2024-01-01", end="2024-03-01"),
    deps=[
        dg.AssetDep(source, partition_mapping=mappings.fan_in()),
    ],
)
def month():
    pass


@dg.asset(deps=[month])
def summary():
    pass


@dg.asset(partitions_def=JANUARY)
def unrelated():
    pass


CASCADE = dg.Definitions(assets=[source, rolling, running, month, summary, unrelated])


def brute_force_cascade(asset_graph, seeds: set[Node]) -> set[Node]:
    """Every node whose inputs reach a seed, found by relaxing over all partitions until nothing changes."""
    reached = set(seeds)
    every = [
        Node(key, p)
        for key in asset_graph.toposorted_asset_keys
        for p in (
            asset_graph.get(key).partitions_def.get_partition_keys() if asset_graph.get(key).partitions_def else [""]
        )
    ]
    changed = True
    while changed:
        changed = False
        for node in every:
            if node not in reached and brute_force_upstream_all(asset_graph, node) & reached:
                reached.add(node)
                changed = True
    return reached


def brute_force_upstream_all(asset_graph, node: Node) -> set[Node]:
    """Every upstream node of `node`, through Dagster's mappings key by key."""
    found = set()
    for parent in asset_graph.get(node.asset).parent_keys:
        mapping = asset_graph.get_partition_mapping(node.asset, parent)
        down_def, up_def = asset_graph.get(node.asset).partitions_def, asset_graph.get(parent).partitions_def
        if up_def is None:
            keys = [""]
        elif down_def is None:
            keys = list(up_def.get_partition_keys())
        else:
            keys = upstream_keys(mapping, down_def, up_def, [node.partition])
        found |= {Node(parent, k) for k in keys}
    return found


def test_downstream_adds_exactly_the_nodes_the_range_reaches():
    asset_graph = CASCADE.resolve_asset_graph()
    window = TimeRange(datetime(2024, 1, 10, tzinfo=UTC), datetime(2024, 1, 12, tzinfo=UTC))
    graph = build_graph(asset_graph, [dg.AssetKey("source")], window, downstream=True)
    seeds = {Node(dg.AssetKey("source"), "2024-01-10"), Node(dg.AssetKey("source"), "2024-01-11")}
    assert set(graph.nodes()) == brute_force_cascade(asset_graph, seeds)
    assert graph.slices[dg.AssetKey("running")].partition_keys[-1] == "2024-01-31"  # to the last day
    assert dg.AssetKey("unrelated") not in graph.slices
    assert_edges_match(asset_graph, graph)


@pytest.mark.parametrize(
    "partitions_def",
    [
        dg.HourlyPartitionsDefinition("2023-12-30-00:00", end_date="2024-01-04-00:00"),
        dg.HourlyPartitionsDefinition("2023-12-30-00:00", minute_offset=15, end_date="2024-01-04-00:00"),
        dg.DailyPartitionsDefinition("2023-12-01", hour_offset=5, end_date="2024-02-01"),
        dg.WeeklyPartitionsDefinition("2023-11-06", end_date="2024-03-04"),
        dg.DailyPartitionsDefinition("2024-03-01", timezone="Europe/Paris", end_date="2024-04-15"),  # DST
        dg.MonthlyPartitionsDefinition("2023-01-01", end_date="2024-12-01"),  # uneven windows
        dg.DailyPartitionsDefinition("2024-01-01", end_date="2024-01-20", exclusions=["0 0 * * 6"]),  # Saturdays
    ],
)
def test_window_bounds_and_keys_are_dagster_s_for_every_key_list_and_window_planning_builds(partitions_def):
    """windows.py computes an even schedule's window bounds from its first and last key, and
    its keys in a window from the grid of its windows: they equal Dagster's windows of the keys
    (the whole list, a contiguous part, two keys, one key, keys with a gap: explicit keys) and
    Dagster's keys in a window (aligned or not, before the first partition, empty), in UTC and
    not, even and not."""
    keys = list(partitions_def.get_partition_keys())
    first = partitions_def.get_first_partition_window()
    for start, end in (
        (first.start, first.start + timedelta(days=20)),
        (first.start + timedelta(minutes=7), first.start + timedelta(days=40, hours=5)),
        (first.start - timedelta(days=9, minutes=1), first.start + timedelta(days=2)),
        (first.start + timedelta(hours=1), first.start + timedelta(hours=1)),
    ):
        window = dg.TimeWindow(start, end)
        assert keys_in_window(partitions_def, window) == list(partitions_def.get_partition_keys_in_time_window(window))
    for chosen in (keys, keys[3:-2], keys[1:3], keys[:1], keys[:4] + keys[5:9]):
        starts, ends = WindowCache(padding=0).bounds(partitions_def, chosen)
        windows = partitions_def.time_windows_for_partition_keys(frozenset(chosen), validate=False)
        assert list(starts) == [w.start.timestamp() for w in windows], chosen
        assert list(ends) == [w.end.timestamp() for w in windows], chosen


@pytest.mark.parametrize(
    "partitions_def",
    [
        dg.HourlyPartitionsDefinition(datetime(2023, 12, 30), end_date=datetime(2024, 1, 4), fmt="%Y/%m/%d %Hh{%M}"),
        dg.DailyPartitionsDefinition(datetime(2023, 12, 1), end_date=datetime(2024, 2, 1), fmt="%Y%m%d"),
        dg.DailyPartitionsDefinition(datetime(2023, 12, 1), end_date=datetime(2024, 2, 1), fmt="%d.%m.%Y 100%%"),
        dg.WeeklyPartitionsDefinition(datetime(2023, 11, 6), end_date=datetime(2024, 3, 4), fmt="%Y-%m-%dT%H:%M:%S"),
        dg.DailyPartitionsDefinition(
            datetime(2023, 12, 1), end_date=datetime(2024, 2, 1), fmt="%b %d %Y"
        ),  # strftime's alone
        dg.HourlyPartitionsDefinition(datetime(2023, 12, 30), end_date=datetime(2024, 1, 4), fmt="%Y-%m-%d %I%p"),
    ],
    ids=lambda partitions_def: partitions_def.fmt,
)
def test_keys_in_a_window_are_dagster_s_in_every_format(partitions_def):
    """An even schedule's keys cut from numpy's ISO text of their times (windows.py
    `_grid_keys`), or formatted by strftime for a directive that text has not (a month's name,
    a 12-hour clock), are Dagster's keys, braces and %% included."""
    first = partitions_def.get_first_partition_window()
    for start, end in (
        (first.start, first.start + timedelta(days=40)),
        (first.start + timedelta(hours=5), first.start + timedelta(days=3)),
    ):
        window = dg.TimeWindow(start, end)
        assert keys_in_window(partitions_def, window) == list(partitions_def.get_partition_keys_in_time_window(window))


def test_grid_keys_of_years_strftime_pads_not_are_strftime_s():
    """Years before 1000 (strftime prints `999`, numpy `0999`) are formatted by strftime."""
    first = datetime(999, 12, 31, 22, tzinfo=UTC).timestamp()
    assert _grid_keys(first, 3600, 4, UTC, "%Y-%m-%d-%H:%M") == [
        datetime.fromtimestamp(first + n * 3600, UTC).strftime("%Y-%m-%d-%H:%M") for n in range(4)
    ]
