"""How long a node of each asset takes, as the scheduling core estimates it: from earlier
runs of the assets in the instance (`recorded_seconds`, read once when a backfill starts)
and from the backfill's own runs as they finish (`Durations.add`).

A node's estimate is the seconds per partition of the asset's runs: a run's wall time over
the partitions it covered (its overhead shared among them). An asset neither run before
nor yet in this backfill counts as the median of the others' estimates (1 s when none is
known), so that before anything is measured every node weighs the same.

Not guaranteed: an estimate is an average; a partition that takes longer than its asset's
others (more data) is not told apart.
"""

import statistics
from collections.abc import Iterable, Mapping

import dagster as dg

from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.dagster_instance.lease_proof import proven_backfills
from partition_assets.run_tags import partitions_of_run

DEFAULT_SECONDS = 1.0
# Runs read from the instance for the estimates: the newest, enough to cover every asset of a backfill.
RECORDED_RUNS_READ = 1000
# An estimate that changed by more than this share since the core last ordered the nodes by it
# reorders them (`Durations.add` says so); smaller drifts keep the order.
REORDER_CHANGE = 0.25


class RunTimings:
    """What runs of one asset took, as a line fitted through (partitions, seconds):
    seconds = overhead + partitions x work. Fed with finished units' results."""

    def __init__(self) -> None:
        self._sums = [0.0] * 5  # n, sum k, sum t, sum k*k, sum k*t

    def add(self, partitions: int, seconds: float) -> None:
        for index, value in enumerate((1, partitions, seconds, partitions * partitions, partitions * seconds)):
            self._sums[index] += value

    @property
    def runs(self) -> int:
        return int(self._sums[0])

    def seconds_per_partition(self) -> float | None:
        """Every run's seconds over every partition they covered; None before any run."""
        n, k, t, _, _ = self._sums
        return t / k if n else None

    def work(self) -> float:
        """The seconds one more partition adds to a run: the fitted line's slope, once runs of
        two sizes were seen (0 before, and when the line does not rise)."""
        n, k, t, kk, kt = self._sums
        spread = n * kk - k * k
        return max((n * kt - k * t) / spread, 0.0) if spread > 0 else 0.0

    def overhead(self) -> float:
        """A run's seconds beyond its partitions' work: the fitted line's intercept, once runs
        of two sizes were seen (0 before, when the line does not rise, or below 0)."""
        n, k, t, _, _ = self._sums
        work = self.work()
        return max((t - work * k) / n, 0.0) if work > 0 else 0.0


class Durations:
    """The seconds a node of each asset takes: measured in this backfill once one of the
    asset's runs finished, else `recorded` (earlier runs in the instance), else the median
    of the other estimates (`typical`, taken again when an asset is first measured).

    The caller orders its nodes by `ordered()`; `add` says when an estimate has moved too
    far from those for the order to stand. Each call costs O(1), but for an asset's first
    measure (O(assets)) and `ordered()` (O(assets))."""

    def __init__(self, assets: Iterable[dg.AssetKey], recorded: Mapping[dg.AssetKey, float] | None = None) -> None:
        self._assets = list(assets)
        self.timings: dict[dg.AssetKey, RunTimings] = {key: RunTimings() for key in self._assets}
        self._recorded = {
            key: seconds for key, seconds in (recorded or {}).items() if key in self.timings and seconds > 0
        }
        self._measured: dict[dg.AssetKey, float] = {}
        self._typical = self._median()
        self._ordered_by = self.ordered()

    def known(self, asset: dg.AssetKey) -> bool:
        """Whether `asset`'s estimate comes from runs of it (earlier ones, or this backfill's)."""
        return asset in self._recorded or self.timings[asset].runs > 0

    def of(self, asset: dg.AssetKey) -> float:
        return self._measured.get(asset) or self._recorded.get(asset) or self._typical

    def member_seconds(self, asset: dg.AssetKey) -> float:
        """What one more partition adds to a run of `asset`: the work per partition fitted
        through its runs of different sizes (their overhead apart), else `of(asset)`."""
        work = self.timings[asset].work()
        return work if work > 0 else self.of(asset)

    def ordered(self) -> dict[dg.AssetKey, float]:
        """Every asset's estimate now, remembered as those the caller orders its nodes by."""
        self._ordered_by = {key: self.of(key) for key in self._assets}
        return dict(self._ordered_by)

    def add(self, asset: dg.AssetKey, partitions: int, seconds: float) -> bool:
        """Notes a successful run of `partitions` partitions of `asset` that took `seconds`;
        True when an estimate moved by more than REORDER_CHANGE from `ordered()`'s: `asset`'s
        own, or the typical one that the assets not measured yet take. A run that took no
        time (a fake one) tells nothing of the seconds and changes no estimate."""
        timings = self.timings[asset]
        timings.add(partitions, seconds)
        per_partition = timings.seconds_per_partition()
        if not per_partition:
            return False
        first = asset not in self._measured
        self._measured[asset] = per_partition
        if first:
            self._typical = self._median()
        return any(
            abs(self.of(key) - self._ordered_by[key]) > REORDER_CHANGE * self._ordered_by[key]
            for key in ([asset] if not first else self._assets)
        )

    def _median(self) -> float:
        known = list(self._measured.values()) + [s for key, s in self._recorded.items() if key not in self._measured]
        return statistics.median(known) if known else DEFAULT_SECONDS


def recorded_seconds(instance: dg.DagsterInstance, graph: BackfillGraph) -> dict[dg.AssetKey, float]:
    """Each asset of `graph`'s median seconds per partition over its recent successful
    single-asset node runs of engine backfills (among the newest RECORDED_RUNS_READ successful
    runs); assets without such runs are left out. A node run is one its lease proof proves
    (dagster_instance/lease_proof.py): a run that only carries a backfill's id tag is production's, and
    its time is not a node's. One instance query, and one of the key-value store."""
    seconds: dict[dg.AssetKey, list[float]] = {}
    records = instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS]), limit=RECORDED_RUNS_READ)
    node_runs = proven_backfills(instance, records, bind=False)
    for record in records:
        run = record.dagster_run
        selection = run.asset_selection or set()
        if len(selection) != 1 or run.run_id not in node_runs or not (record.start_time and record.end_time):
            continue
        (asset,) = selection
        if asset not in graph.slices:
            continue
        partitions = max(1, len(partitions_of_run(run, graph.slices[asset].partitions_def)))
        seconds.setdefault(asset, []).append((record.end_time - record.start_time) / partitions)
    return {asset: statistics.median(values) for asset, values in seconds.items()}
