"""Generated DAG shapes for the backfill engine: a seeded family of DAGs built from the
ingredients users' DAGs are made of, each asset sleeping its simulated work per partition.

`generate(seed)` draws one `Shape` (the same for the same seed, on every machine):
- 7-14 days from 2024-01-01 (a Monday);
- a daily root `src`, then 4 motifs, and more until the work fills 4 slots for 25 s, each
  attached to an asset drawn among the daily ones already there (so motifs stack into
  deeper DAGs):
  - `chain`: 2-3 daily assets, each reading the previous day by day (identity);
  - `running_total`: a self-dependent daily asset (yesterday's total and today's input);
  - `rolling`: a daily rolling window over the anchor, 2, 3 or 7 days wide;
  - `weekly_fan_in` / `monthly_fan_in`: a weekly (Monday) / monthly asset reading its days;
  - `fan_out`: a weekly root read by a daily asset (each day reads its week);
  - `diamond`: two daily assets reading the anchor, and a third reading both;
  - `wide_layer`: 4-6 daily assets reading the anchor, side by side;
  - `regions`: a static x daily asset (3 regions) reading the anchor's day, and a daily
    asset reading every region of its day back;
- each asset's work per partition drawn from 0.1 to 2 s (in steps of 0.05 s);
- a backfill policy per shape, cycling with the seed: Dagster's default (one partition per
  run) for every asset, BackfillPolicy.single_run() (range-capable) for every asset, or a
  draw per asset. Motif `MOTIFS[seed % len(MOTIFS)]` is always among the shape's, so any
  9 consecutive seeds hold every motif, and any 3 every policy mix.

`definitions(shape)` is the shape as a code location (bench/shape_location.py loads it for
the `backfill run` command); `work_seconds` is what a node of it sleeps, for the bound.

Not guaranteed: that the family resembles a given user's DAG beyond these ingredients; the
draws change when this module's drawing code does (the seed pins a shape for one version of
this file, and `Shape.describe` is printed with every result).
"""

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import dagster as dg

from partition_assets.dagster_betas import quiet_dagster_betas
from partition_assets.partitions import daily, mappings, monthly, multi, static, weekly

if TYPE_CHECKING:  # the planning package imports Spark's client: seconds a process, not for a code location
    from partition_assets.backfill.model import Node
    from partition_assets.backfill.planning.graph import BackfillGraph

# The environment variable naming the seed of the shape bench/shape_location.py loads.
SEED_ENV = "DAG_SHAPE_SEED"
START = "2024-01-01"  # a Monday: weeks (Monday to Sunday) and the range start together
DAYS = daily(START)
WEEKS = weekly(START, day_offset=1)
MONTHS = monthly(START)
REGIONS = ("emea", "amer", "apac")
DAYS_BY_REGION = multi(ds=DAYS, region=static(list(REGIONS)))
PARTITIONS = {"daily": DAYS, "weekly": WEEKS, "monthly": MONTHS, "daily_by_region": DAYS_BY_REGION}

MOTIFS = (
    "chain",
    "running_total",
    "rolling",
    "weekly_fan_in",
    "monthly_fan_in",
    "fan_out",
    "diamond",
    "wide_layer",
    "regions",
)
POLICY_MIXES = ("default", "range", "mixed")
ROLLING_WIDTHS = (2, 3, 7)
MIN_WORK, MAX_WORK = 0.1, 2.0
# Motifs are added past the first four until the work fills SLOTS slots for this long (seconds):
# a backfill long enough that the command's fixed costs (start-up, exit) weigh little.
SLOTS = 4
MIN_WORK_PER_SLOT = 25.0


@dataclass(frozen=True)
class Edge:
    """`asset` reads `parent` through a mapping of `kind`: identity, rolling (`width` days),
    previous (the asset's own previous day), by_window (fan-in or fan-out by time window),
    to_day (between static x daily and daily, on the day)."""

    parent: str
    kind: str
    width: int = 0

    def mapping(self) -> dg.PartitionMapping:
        if self.kind == "identity":
            return mappings.identity()
        if self.kind == "rolling":
            return mappings.rolling_window(self.width)
        if self.kind == "previous":
            return mappings.previous_period()
        if self.kind == "by_window":
            return mappings.by_time_window()
        return mappings.to_dimension("ds")


@dataclass(frozen=True)
class AssetShape:
    name: str
    partitioning: str  # a key of PARTITIONS
    edges: tuple[Edge, ...]
    seconds: float  # simulated work per partition
    range_capable: bool  # BackfillPolicy.single_run(), else Dagster's default policy


@dataclass(frozen=True)
class Shape:
    seed: int
    days: int
    motifs: tuple[str, ...]
    policy_mix: str
    assets: tuple[AssetShape, ...]  # parents before children

    def describe(self) -> str:
        """One line: seed, days, policy mix, motifs and asset count."""
        return (
            f"seed {self.seed}: {self.days} days, {len(self.assets)} assets, policy {self.policy_mix}, "
            f"motifs {', '.join(self.motifs)}"
        )

    def seconds_of(self, asset: str) -> float:
        return next(a.seconds for a in self.assets if a.name == asset)

    def durations(self) -> dict[dg.AssetKey, float]:
        """Every asset's seconds per node, as earlier runs would have measured them."""
        return {dg.AssetKey(a.name): a.seconds for a in self.assets}

    def range_args(self) -> list[str]:
        """`--start/--end` of the shape's days, both ends inclusive."""
        return ["--start", START, "--end", f"2024-01-{self.days:02d}"]

    def graph(self) -> "BackfillGraph":
        """The backfill graph of every asset over the shape's days, as `backfill run --select '*'` plans it."""
        from partition_assets.backfill.planning.graph import build_graph  # see the TYPE_CHECKING import
        from partition_assets.backfill.planning.spec import TimeRange

        asset_graph = definitions(self).resolve_asset_graph()
        first = datetime.fromisoformat(START).replace(tzinfo=UTC)
        return build_graph(
            asset_graph, asset_graph.get_all_asset_keys(), TimeRange(first, first + timedelta(days=self.days))
        )

    def work(self, node: "Node") -> float:
        """The seconds `node` sleeps (its asset's work per partition)."""
        return self.seconds_of(node.asset.to_user_string())


class _Builder:
    """The assets of one shape as they are drawn; names are `<motif><n>_<role>`."""

    def __init__(self, rng: random.Random, policy_mix: str) -> None:
        self.rng = rng
        self.policy_mix = policy_mix
        self.assets: list[AssetShape] = []

    def add(self, name: str, partitioning: str, *edges: Edge) -> str:
        range_capable = {"default": False, "range": True}.get(self.policy_mix, self.rng.random() < 0.5)
        seconds = round(self.rng.uniform(MIN_WORK, MAX_WORK) * 20) / 20
        self.assets.append(AssetShape(name, partitioning, edges, seconds, range_capable))
        return name

    def anchor(self) -> str:
        return self.rng.choice([a.name for a in self.assets if a.partitioning == "daily"])


def generate(seed: int) -> Shape:
    """The shape of `seed` (see the module docstring)."""
    rng = random.Random(seed)
    days = rng.randint(7, 14)
    policy_mix = POLICY_MIXES[seed % len(POLICY_MIXES)]
    always = MOTIFS[seed % len(MOTIFS)]
    motifs = [always, *rng.sample([m for m in MOTIFS if m != always], 3)]
    builder = _Builder(rng, policy_mix)
    builder.add("src", "daily")
    for number, motif in enumerate(motifs):
        _MOTIF_BUILDERS[motif](builder, f"{motif}{number}")
    while _work_per_slot(builder.assets, days) < MIN_WORK_PER_SLOT:
        motifs.append(rng.choice(MOTIFS))
        _MOTIF_BUILDERS[motifs[-1]](builder, f"{motifs[-1]}{len(motifs) - 1}")
    return Shape(seed, days, tuple(motifs), policy_mix, tuple(builder.assets))


def _work_per_slot(assets: list[AssetShape], days: int) -> float:
    """The assets' total work over `days` days (partitions counted roughly: a week or a month
    that overlaps the days counts whole), spread over SLOTS slots."""
    partitions = {"daily": days, "weekly": days // 7 + 1, "monthly": 1, "daily_by_region": days * len(REGIONS)}
    return sum(asset.seconds * partitions[asset.partitioning] for asset in assets) / SLOTS


def _chain(b: _Builder, prefix: str) -> None:
    parent = b.anchor()
    for link in range(b.rng.randint(2, 3)):
        parent = b.add(f"{prefix}_{link}", "daily", Edge(parent, "identity"))


def _running_total(b: _Builder, prefix: str) -> None:
    name = f"{prefix}_total"
    b.add(name, "daily", Edge(b.anchor(), "identity"), Edge(name, "previous"))


def _rolling(b: _Builder, prefix: str) -> None:
    width = b.rng.choice(ROLLING_WIDTHS)
    b.add(f"{prefix}_{width}d", "daily", Edge(b.anchor(), "rolling", width))


def _weekly_fan_in(b: _Builder, prefix: str) -> None:
    b.add(f"{prefix}_week", "weekly", Edge(b.anchor(), "by_window"))


def _monthly_fan_in(b: _Builder, prefix: str) -> None:
    b.add(f"{prefix}_month", "monthly", Edge(b.anchor(), "by_window"))


def _fan_out(b: _Builder, prefix: str) -> None:
    week = b.add(f"{prefix}_week_src", "weekly")
    b.add(f"{prefix}_daily", "daily", Edge(week, "by_window"), Edge(b.anchor(), "identity"))


def _diamond(b: _Builder, prefix: str) -> None:
    top = b.anchor()
    left = b.add(f"{prefix}_left", "daily", Edge(top, "identity"))
    right = b.add(f"{prefix}_right", "daily", Edge(top, "identity"))
    b.add(f"{prefix}_join", "daily", Edge(left, "identity"), Edge(right, "identity"))


def _wide_layer(b: _Builder, prefix: str) -> None:
    parent = b.anchor()
    for index in range(b.rng.randint(4, 6)):
        b.add(f"{prefix}_{index}", "daily", Edge(parent, "identity"))


def _regions(b: _Builder, prefix: str) -> None:
    by_region = b.add(f"{prefix}_by_region", "daily_by_region", Edge(b.anchor(), "to_day"))
    b.add(f"{prefix}_all_regions", "daily", Edge(by_region, "to_day"))


_MOTIF_BUILDERS: dict[str, Callable[[_Builder, str], None]] = {
    "chain": _chain,
    "running_total": _running_total,
    "rolling": _rolling,
    "weekly_fan_in": _weekly_fan_in,
    "monthly_fan_in": _monthly_fan_in,
    "fan_out": _fan_out,
    "diamond": _diamond,
    "wide_layer": _wide_layer,
    "regions": _regions,
}


# What a node of an asset does: given the asset's shape and its run's context, its output (None: nothing stored).
Body = Callable[[AssetShape, dg.AssetExecutionContext], object]


def sleep_body(shape: AssetShape, context: dg.AssetExecutionContext) -> None:
    """Simulated work: the asset's seconds once per partition its run covers; stores nothing."""
    time.sleep(shape.seconds * len(context.partition_keys))


def definitions(
    shape: Shape,
    bodies: Mapping[str, Body] | None = None,
    resources: Mapping[str, object] | None = None,
) -> dg.Definitions:
    """The shape's assets: each runs `bodies[its name]` (default: `sleep_body`, storing
    nothing) once per run; `resources` (an `io_manager` for the bodies' output, and those the
    bodies read from their context) are required by every asset with a body of its own."""
    bodies, resources = bodies or {}, dict(resources or {})
    keys = set(resources) - {"io_manager"}
    with quiet_dagster_betas():  # backfill_policy is a beta parameter
        return dg.Definitions(
            assets=[_asset(asset, bodies.get(asset.name, sleep_body), keys) for asset in shape.assets],
            resources=resources,
        )


def _asset(shape: AssetShape, run: Body, resource_keys: set[str]) -> dg.AssetsDefinition:
    decorate = dg.asset(
        name=shape.name,
        partitions_def=PARTITIONS[shape.partitioning],
        deps=[dg.AssetDep(edge.parent, partition_mapping=edge.mapping()) for edge in shape.edges],
        backfill_policy=dg.BackfillPolicy.single_run() if shape.range_capable else None,
        required_resource_keys=resource_keys if run is not sleep_body else None,
    )
    if run is sleep_body:  # `-> None`: Dagster hands nothing to an IO manager

        @decorate
        def stores_nothing(context: dg.AssetExecutionContext) -> None:
            sleep_body(shape, context)

        return stores_nothing

    @decorate
    def stored(context: dg.AssetExecutionContext):
        return run(shape, context)

    return stored
