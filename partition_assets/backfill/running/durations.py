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
from partition_assets.run_tags import BACKFILL_ID_TAG, partitions_of_run

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
    of the other estimates."""

    def __init__(self, assets: Iterable[dg.AssetKey], recorded: Mapping[dg.AssetKey, float] | None = None) -> None:
        self._assets = list(assets)
        self._recorded = {key: seconds for key, seconds in (recorded or {}).items() if seconds > 0}
        self.timings: dict[dg.AssetKey, RunTimings] = {key: RunTimings() for key in self._assets}
        self._ordered_by = self.snapshot()

    def known(self, asset: dg.AssetKey) -> bool:
        """Whether `asset`'s estimate comes from runs of it (earlier ones, or this backfill's)."""
        return asset in self._recorded or self.timings[asset].runs > 0

    def of(self, asset: dg.AssetKey) -> float:
        measured = self.timings[asset].seconds_per_partition() if asset in self.timings else None
        if measured:
            return measured
        if asset in self._recorded:
            return self._recorded[asset]
        return self._typical()

    def _typical(self) -> float:
        known = [s for key in self._assets if (s := self.timings[key].seconds_per_partition())]
        known += [s for key, s in self._recorded.items() if not self.timings.get(key, RunTimings()).runs]
        return statistics.median(known) if known else DEFAULT_SECONDS

    def member_seconds(self, asset: dg.AssetKey) -> float:
        """What one more partition adds to a run of `asset`: the work per partition fitted
        through its runs of different sizes (their overhead apart), else `of(asset)`."""
        timings = self.timings[asset]
        work = timings.work()
        return work if work > 0 else self.of(asset)

    def snapshot(self) -> dict[dg.AssetKey, float]:
        return {key: self.of(key) for key in self._assets}

    def add(self, asset: dg.AssetKey, partitions: int, seconds: float) -> bool:
        """Notes a successful run of `partitions` partitions of `asset` that took `seconds`;
        True when an estimate moved by more than REORDER_CHANGE since the last reorder, which
        the caller then makes (the estimates it ordered by are remembered as of now)."""
        self.timings[asset].add(partitions, seconds)
        now = self.snapshot()
        moved = any(abs(now[key] - before) > REORDER_CHANGE * before for key, before in self._ordered_by.items())
        if moved:
            self._ordered_by = now
        return moved


def recorded_seconds(instance: dg.DagsterInstance, graph: BackfillGraph) -> dict[dg.AssetKey, float]:
    """Each asset of `graph`'s median seconds per partition over its recent successful
    single-asset node runs of engine backfills (among the newest RECORDED_RUNS_READ successful
    runs); assets without such runs are left out. One instance query."""
    seconds: dict[dg.AssetKey, list[float]] = {}
    records = instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS]), limit=RECORDED_RUNS_READ)
    for record in records:
        run = record.dagster_run
        selection = run.asset_selection or set()
        if len(selection) != 1 or BACKFILL_ID_TAG not in run.tags or not (record.start_time and record.end_time):
            continue
        (asset,) = selection
        if asset not in graph.slices:
            continue
        partitions = max(1, len(partitions_of_run(run, graph.slices[asset].partitions_def)))
        seconds.setdefault(asset, []).append((record.end_time - record.start_time) / partitions)
    return {asset: statistics.median(values) for asset, values in seconds.items()}
