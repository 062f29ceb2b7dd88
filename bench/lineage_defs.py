"""A generated lineage of many assets, as a code location for bench/lineage_bench.py: the
shape of a platform of thousands of tables, without their data.

Size: PARTITION_ASSETS_BENCH_ASSETS assets (default 2,000), in LAYERS = 10 layers of equal
width W (the size / 10); asset i of layer l is `l<l>_<i>`. Shape:
- layer 0 holds the roots: daily, except every 10th hourly;
- every asset of layers 1-9 reads FAN_IN = 3 assets of the layer above: i, i + 1 and
  i + 7 (mod W), so each asset also has about 3 readers;
- in layers 1-9, every 25th asset (i % 25 == 12) is static x daily (4 regions), reading
  daily parents per day (`to_dimension("ds")`) and read back the same way; every 50th
  (i % 50 == 37) in layer 9 is static (4 keys), reading every partition of its parents
  (`all_partitions`); every other asset is daily;
- a daily asset reads an hourly parent by fan-in (its day's 24 hours), a daily or multi
  parent by day; every asset is a range-capable (BackfillPolicy.single_run) asset with no
  output (its materialization is its only record), so nothing is stored.

A 30-day backfill of 20 roots with `--downstream` reaches nearly every asset from layer 3
on. Not guaranteed: that it resembles a given platform beyond this shape.
"""

import os

import dagster as dg

from partition_assets.dagster_betas import quiet_dagster_betas
from partition_assets.partitions import daily, hourly, mappings, multi, static

ASSETS_ENV = "PARTITION_ASSETS_BENCH_ASSETS"
LAYERS = 10
FAN_IN = (0, 1, 7)  # offsets of the parents of asset i in the layer above
START, END = "2024-01-01", "2024-12-31"

DAILY = daily(START, end=END)
HOURLY = hourly(f"{START}-00:00", end=f"{END}-23:00")
REGIONS = static(["emea", "amer", "apac", "other"])
DAILY_BY_REGION = multi(ds=DAILY, region=REGIONS)
RANGE_RUN = dg.BackfillPolicy.single_run()


def kind_of(layer: int, index: int) -> str:
    """The partitioning of asset `index` of `layer`: hourly, multi, static or daily."""
    if layer == 0:
        return "hourly" if index % 10 == 0 else "daily"
    if index % 25 == 12:
        return "multi"
    if layer == LAYERS - 1 and index % 50 == 37:
        return "static"
    return "daily"


PARTITIONS = {"hourly": HOURLY, "daily": DAILY, "multi": DAILY_BY_REGION, "static": REGIONS}


def mapping(child: str, parent: str) -> dg.PartitionMapping:
    """How a `child` partition reads its `parent` (kinds as `kind_of` names them)."""
    if child == "static":
        return mappings.all_partitions()
    if "multi" in (child, parent) and child != parent:
        return mappings.to_dimension("ds")
    if parent == "hourly":
        return mappings.fan_in()
    return mappings.identity()


def name(layer: int, index: int) -> str:
    return f"l{layer}_{index}"


def lineage(size: int) -> list[dg.AssetsDefinition]:
    """The `size` assets of the shape above."""
    width = max(1, size // LAYERS)
    assets = []
    for layer in range(LAYERS):
        for index in range(width):
            kind = kind_of(layer, index)
            parents = [] if layer == 0 else sorted({(index + offset) % width for offset in FAN_IN})
            deps = [
                dg.AssetDep(name(layer - 1, p), partition_mapping=mapping(kind, kind_of(layer - 1, p))) for p in parents
            ]
            assets.append(_asset(name(layer, index), kind, deps))
    return assets


def _asset(key: str, kind: str, deps: list[dg.AssetDep]) -> dg.AssetsDefinition:
    @dg.asset(name=key, partitions_def=PARTITIONS[kind], deps=deps, backfill_policy=RANGE_RUN)
    def body() -> None:
        """Nothing to compute: the bench measures everything around the runs."""

    return body


with quiet_dagster_betas():  # backfill_policy is a beta parameter
    defs = dg.Definitions(assets=lineage(int(os.environ.get(ASSETS_ENV, "2000"))))
