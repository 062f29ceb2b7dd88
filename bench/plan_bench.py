"""Planning cost of a large backfill graph: 10 years of hourly partitions x 20 assets.

The shape: an hourly source, 9 hourly assets (identity, 24-hour rolling windows,
self-dependencies), 10 daily assets (fan-in from hours, 7-day rolling windows).

Usage: python bench/plan_bench.py [--years N] [--out bench/results/plan.md]
"""

import argparse
import resource
import time
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from partition_assets.backfill.planning.graph import build_graph
from partition_assets.backfill.planning.spec import TimeRange
from partition_assets.partitions import daily, hourly, mappings

REPO = Path(__file__).resolve().parents[1]
HOURS = hourly("2015-01-01-00:00")
DAYS = daily("2015-01-01")


def build_definitions() -> dg.Definitions:
    assets = [dg.AssetSpec("hourly_0", partitions_def=HOURS)]
    hourly_shapes = [mappings.identity(), mappings.rolling_window(24), mappings.previous_period()]
    for n in range(1, 10):
        mapping = hourly_shapes[n % 3]
        upstream = f"hourly_{n}" if mapping is hourly_shapes[2] else f"hourly_{n - 1}"
        deps = [dg.AssetDep(upstream, partition_mapping=mapping)]
        if upstream == f"hourly_{n}":  # a self-dependency also reads the previous asset
            deps.append(dg.AssetDep(f"hourly_{n - 1}"))
        assets.append(dg.AssetSpec(f"hourly_{n}", partitions_def=HOURS, deps=deps))
    for n in range(10):
        if n == 0:
            dep = dg.AssetDep("hourly_9", partition_mapping=mappings.fan_in())
        else:
            dep = dg.AssetDep(f"daily_{n - 1}", partition_mapping=mappings.rolling_window(7))
        assets.append(dg.AssetSpec(f"daily_{n}", partitions_def=DAYS, deps=[dep]))
    # One definition per spec: a multi-asset allows one mapping per upstream key only.
    return dg.Definitions(assets=[dg.AssetsDefinition(specs=[spec]) for spec in assets])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--years", type=int, default=10)
    parser.add_argument("--out", default=str(REPO / "bench/results/plan.md"))
    args = parser.parse_args()

    asset_graph = build_definitions().resolve_asset_graph()
    before_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    graph = build_graph(
        asset_graph,
        asset_graph.get_all_asset_keys(),
        TimeRange(datetime(2015, 1, 1, tzinfo=UTC), datetime(2015 + args.years, 1, 1, tzinfo=UTC)),
    )
    seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lines = [
        "# Planning a large backfill graph",
        "",
        f"Command: `python bench/plan_bench.py --years {args.years}` (2 cores)",
        "",
        f"- assets: {len(graph.slices)}; nodes: {graph.node_count():,}; edges: {graph.edge_count():,}",
        f"- planning time: {seconds:.2f} s (goal <= 10 s)",
        f"- peak resident memory of the process: {peak_mb:,.0f} MB ({before_mb:,.0f} MB before planning; goal <= 2 GB)",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
