"""The runs an asset's `BackfillPolicy` makes of a backfill's partitions, as Dagster's backfill
makes them, and what `backfill plan` says of them.

Dagster's asset backfill (`build_run_requests_with_backfill_policies`) splits the partitions it
requests of an asset into contiguous ranges, then each range into runs: `single_run()` one run
per range, `multi_run(n)` runs of n partitions in partition order, the last one shorter. An
asset without a policy runs one partition per run. `policy_runs` is that rule over an
`AssetSlice`: its `max_batch` is the policy's size, and its `breaks` split its ranges (a gap
between partitions, or different pinned inputs: a run reads one version of each input).

Not guaranteed: Dagster puts assets of one policy and one partitions definition in the same
run (a parent and its child with an identity mapping); the engine runs each asset on its own
(one asset per node run), in the same chunks. Only time partitions run as ranges
(`graph.max_batch_of`); the policy of another partitions definition runs one partition per run.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING

import dagster as dg

from partition_assets.backfill.model import Batching, Node, RunUnit
from partition_assets.backfill.planning.graph import AssetSlice, BackfillGraph
from partition_assets.backfill.planning.node_runs import asset_counts
from partition_assets.backfill.planning.spec import Wording
from partition_assets.errors import BatchingError

if TYPE_CHECKING:  # Dagster's internal types, for annotations only
    from partition_assets.dagster_internals import BaseAssetGraph


def policy_runs(asset_slice: AssetSlice, runs_already: Container[str] = frozenset()) -> list[RunUnit]:
    """The runs of the slice's partitions not in `runs_already` (done, or left to another run), in
    partition order: each contiguous range of them (split at the slice's `breaks` and at the
    partitions left out) cut into runs of at most `max_batch` partitions, as Dagster's backfill
    chunks them by the asset's policy."""
    runs: list[RunUnit] = []
    members: list[str] = []
    for index, partition in enumerate(asset_slice.partition_keys):
        if partition in runs_already:
            _close(asset_slice, members, runs)
            continue
        if index in asset_slice.breaks or len(members) == asset_slice.max_batch:
            _close(asset_slice, members, runs)
        members.append(partition)
    _close(asset_slice, members, runs)
    return runs


def _close(asset_slice: AssetSlice, members: list[str], runs: list[RunUnit]) -> None:
    if members:
        runs.append(RunUnit(asset_slice.key, tuple(members)))
        members.clear()


@dataclass(frozen=True)
class AssetRuns:
    """How a backfill runs one asset's `partitions`: under which `policy` (its `BackfillPolicy` as
    Dagster prints it, or None) and `batching` (a `Batching` word, or "off" for `--no-batch`), in
    how many `runs`: exactly, or at most when the engine's batching decides as it goes (`exact`).
    `partitions`: those it runs (a --catch-up backfill's current ones left out)."""

    asset: dg.AssetKey
    policy: str | None
    batching: str
    partitions: int
    runs: int
    exact: bool

    def describe(self) -> str:
        """e.g. `BackfillPolicy.single_run(): 1 run`, `no policy: 10 runs (one per partition)`."""
        count = f"{'at most ' if not self.exact else ''}{self.runs} run{'s' if self.runs != 1 else ''}"
        if self.policy is None:
            return f"no policy: {count} (one per partition)"
        how = {Batching.policy: self.policy, BATCHING_OFF: f"{self.policy}, --no-batch"}.get(
            self.batching, f"{self.policy}, {self.batching} batching"
        )
        return f"{how}: {count}" + (" (one per partition)" if self.exact and self.runs == self.partitions else "")

    def to_json(self) -> dict[str, object]:
        return {"policy": self.policy, "batching": self.batching, "runs": self.runs, "runs_exact": self.exact}


# The `batching` word of AssetRuns for a backfill with `--no-batch`.
BATCHING_OFF = "off"


def asset_runs(
    asset_graph: BaseAssetGraph,
    graph: BackfillGraph,
    batching: Batching,
    batch: bool,
    done: AbstractSet[Node] = frozenset(),
) -> dict[dg.AssetKey, AssetRuns]:
    """Per asset of `graph`, its policy and the runs the backfill makes of its partitions but
    those `done` (what --catch-up leaves alone as current): Dagster's chunks (`policy_runs`)
    with `batching` policy, at most one per partition with the engine's batching (for assets
    that run ranges), one per partition with `batch` off."""
    done_per_asset = asset_counts(done)  # from a catch-up's runs (node_runs.py), no node made each
    found = {}
    for key, asset_slice in graph.slices.items():
        policy = asset_graph.get(key).backfill_policy
        chunked = batch and batching == Batching.policy
        to_run = len(asset_slice) - done_per_asset[key]
        found[key] = AssetRuns(
            key,
            str(policy) if policy is not None else None,
            batching.value if batch else BATCHING_OFF,
            to_run,
            len(policy_runs(asset_slice, _PartitionsDone(key, done))) if chunked else to_run,
            exact=chunked or not batch or asset_slice.max_batch == 1,
        )
    return found


class _PartitionsDone(Container[str]):
    """The partitions of `asset` that `done` holds, asked one by one (`done` is never iterated)."""

    def __init__(self, asset: dg.AssetKey, done: AbstractSet[Node]) -> None:
        self._asset = asset
        self._done = done

    def __contains__(self, partition: object) -> bool:
        return isinstance(partition, str) and Node(self._asset, partition) in self._done


def check_batching(
    asset_graph: BaseAssetGraph, assets: Iterable[dg.AssetKey], batching: Batching, named: Wording
) -> None:
    """Raises BatchingError when `batching` is the engine's and none of `assets` has a
    `BackfillPolicy`: there is nothing for it to batch (an asset without one runs one partition
    per run, as in Dagster). Its message names the field as `named` does (the caller's surface).

    Raises:
        BatchingError: The engine's batching asked of assets without a policy.
    """
    if batching != Batching.engine:
        return
    keys = list(assets)
    if any(asset_graph.get(key).backfill_policy is not None for key in keys):
        return
    shown = ", ".join(key.to_user_string() for key in keys[:5]) + (" ..." if len(keys) > 5 else "")
    raise BatchingError(
        f"{named('batching')} engine: no asset of the backfill ({shown}) has a BackfillPolicy, so there is "
        "nothing for the engine to batch (an asset without one runs one partition per run, as in Dagster); "
        "drop the option or give the asset a backfill_policy; nothing was launched or written"
    )
