"""What backfills may take of a deployment, and how many runs one backfill may launch now.

A pure core, without instance, clock or runs: the deployment's `BackfillCapacity` (read
from dagster.yaml by backfill/running/claims.py), a `Load` (what runs now, counted from the
instance) and the running backfills that claim capacity (`Claimant`) go in; an `Allowance`
for one backfill comes out. Its rules:
1. production runs (those of no backfill: schedules, sensors, the UI, `dagster asset
   materialize`) are never counted against, nor limited by, anything here: backfills fit
   around them;
2. backfill runs together take at most `max_runs` while production is idle, and at most
   `max_runs_under_production` while a production run is queued or running (the reserved
   share they shrink to, and grow back from once production is idle);
3. under the instance's `max_concurrent_runs`, backfill runs leave `reserve_runs` slots
   and every production run's slot free;
4. in a Dagster pool of limit L, backfill runs take at most the pool's cap in `pools`, else
   `share_of_pools` x L (rounded down, at least 1), and never a slot a production run holds, nor the
   last free one (the next production run's) unless the pool has a single slot (then a
   production run waits for at most the one backfill run in it);
5. the backfill cap is dealt to running backfills by priority (higher first), each up to
   what it asks (its `--max-parallel`); backfills of equal priority share what is left
   evenly, the older taking the odd slot.

Not guaranteed: the load is a snapshot. Two coordinators deciding at the same second may
together exceed a cap by the runs each launched since its last snapshot, until their next
decision (a second later); runs in flight are never stopped to shrink: they finish, and
the backfill launches nothing more until it is under its share.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from partition_assets.errors import CapacityConfigError

# The dagster.yaml keys under `partition_assets: backfills:`.
CAPACITY_KEYS = ("max_runs", "max_runs_under_production", "share_of_pools", "pools", "reserve_runs")


@dataclass(frozen=True)
class BackfillCapacity:
    """What backfills may take (see the module docstring); None is no cap.

    Raises:
        CapacityConfigError: A cap is no whole number >= 0 (`max_runs` >= 1), or `share_of_pools`
            is outside (0, 1]; nothing was launched.
    """

    max_runs: int | None = None
    max_runs_under_production: int | None = None
    share_of_pools: float | None = None
    pools: Mapping[str, int] = field(default_factory=dict)
    reserve_runs: int = 1

    def __post_init__(self) -> None:
        counts = {
            "max_runs": (self.max_runs, 1),
            "max_runs_under_production": (self.max_runs_under_production, 0),
            "reserve_runs": (self.reserve_runs, 0),
            **{f"pools.{pool}": (cap, 0) for pool, cap in self.pools.items()},
        }
        for name, (value, least) in counts.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
                raise CapacityConfigError(
                    f"partition_assets.backfills.{name} is {value!r} in dagster.yaml: give a whole number >= "
                    f"{least}. Nothing was launched."
                )
        share = self.share_of_pools
        if share is not None and (isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1):
            raise CapacityConfigError(
                f"partition_assets.backfills.share_of_pools is {share!r} in dagster.yaml: give a fraction in (0, 1], "
                "e.g. 0.25 for a quarter of each pool's slots. Nothing was launched."
            )

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None) -> BackfillCapacity:
        """The capacity of the `backfills:` mapping under `partition_assets:` (none: no caps).

        Raises:
            CapacityConfigError: An unknown key, or a bad value (see the class).
        """
        settings = dict(settings or {})
        unknown = sorted(set(settings) - set(CAPACITY_KEYS))
        if unknown:
            raise CapacityConfigError(
                f"partition_assets.backfills has unknown keys {unknown} in dagster.yaml: the keys are "
                f"{', '.join(CAPACITY_KEYS)}. Nothing was launched."
            )
        pools = settings.pop("pools", None) or {}
        if not isinstance(pools, Mapping):
            raise CapacityConfigError(
                f"partition_assets.backfills.pools is {pools!r} in dagster.yaml: give a mapping of pool name to "
                "the runs backfills may hold in it, e.g. {spark: 2}. Nothing was launched."
            )
        return cls(pools=dict(pools), **settings)

    def check_pools(self, known: Collection[str]) -> None:
        """Refuses a pool in `pools` that none of `known` (the code location's pools) names.

        Raises:
            CapacityConfigError: Naming the unknown pools and the known ones; nothing was launched.
        """
        unknown = sorted(set(self.pools) - set(known))
        if unknown:
            raise CapacityConfigError(
                f"partition_assets.backfills.pools names {unknown} in dagster.yaml, which no asset of the code "
                f"location uses (its pools: {sorted(known) or 'none'}): fix the name or drop it. Nothing was launched."
            )

    def caps_runs(self) -> bool:
        """Whether it caps backfill runs whatever the instance's limits."""
        return self.max_runs is not None or self.max_runs_under_production is not None

    def pool_cap(self, pool: str, limit: int | None) -> int | None:
        """The runs backfills may hold in `pool` of Dagster limit `limit` (None: unlimited),
        never its last slot (rule 4)."""
        cap = self.pools.get(pool)
        if cap is None and self.share_of_pools is not None and limit is not None:
            cap = max(1, math.floor(self.share_of_pools * limit))  # every pool's assets can be backfilled
        if limit is not None:
            cap = min(cap if cap is not None else limit, _kept_free(limit))
        return cap


def _kept_free(limit: int) -> int:
    """The slots of a pool of `limit` that backfills may take at most: all but one, so that
    a production run always finds one; a one-slot pool is shared (else its assets could
    never be backfilled)."""
    return limit - 1 if limit > 1 else limit


@dataclass(frozen=True)
class Load:
    """What runs in the instance now (queued or in progress), as counted by claims.py."""

    production_runs: int = 0
    production_pool_runs: Mapping[str, int] = field(default_factory=dict)
    # Runs of the other backfills per pool: the asking backfill counts its own as it launches them.
    other_backfill_pool_runs: Mapping[str, int] = field(default_factory=dict)
    pool_limits: Mapping[str, int] = field(default_factory=dict)  # pools with a Dagster limit
    max_concurrent_runs: int | None = None  # the instance's run queue limit, if any


@dataclass(frozen=True)
class Claimant:
    """A running backfill claiming capacity: `asks` runs (its --max-parallel), of `priority`;
    claimants are listed oldest first."""

    backfill_id: str
    priority: int
    asks: int


@dataclass(frozen=True)
class Allowance:
    """How many runs one backfill may have running now, overall and in each pool it has a
    cap in (None: no cap)."""

    runs: int | None
    pool_runs: Mapping[str, int] = field(default_factory=dict)

    def allows(self, running: int) -> bool:
        """Whether the backfill, `running` runs now, may start one more."""
        return self.runs is None or running < self.runs

    def pool_allows(self, pool: str | None, running_in_pool: int) -> bool:
        """Whether the backfill, `running_in_pool` runs in `pool` now, may start one more there."""
        cap = self.pool_runs.get(pool) if pool is not None else None
        return cap is None or running_in_pool < cap


UNLIMITED = Allowance(None)
STOPPED = Allowance(0)


def backfill_cap(capacity: BackfillCapacity, load: Load) -> int | None:
    """The runs all backfills together may have now (rules 2 and 3); None is no cap."""
    caps = [capacity.max_runs]
    if load.production_runs:
        caps.append(capacity.max_runs_under_production)
    if load.max_concurrent_runs is not None:
        caps.append(max(0, load.max_concurrent_runs - capacity.reserve_runs - load.production_runs))
    present = [cap for cap in caps if cap is not None]
    return min(present) if present else None


def shares(cap: int | None, claimants: Sequence[Claimant]) -> dict[str, int]:
    """Each claimant's share of `cap` runs (rule 5): by priority, then evenly."""
    if cap is None:
        return {claimant.backfill_id: claimant.asks for claimant in claimants}
    dealt: dict[str, int] = {}
    left = cap
    for priority in sorted({claimant.priority for claimant in claimants}, reverse=True):
        tier = [claimant for claimant in claimants if claimant.priority == priority]
        for backfill_id, runs in _even_split(left, tier).items():
            dealt[backfill_id] = runs
            left -= runs
    return dealt


def _even_split(runs: int, tier: Sequence[Claimant]) -> dict[str, int]:
    """`runs` dealt one at a time, round robin, oldest first, to claimants still asking."""
    dealt = dict.fromkeys((claimant.backfill_id for claimant in tier), 0)
    asking = list(tier)
    while runs and asking:
        for claimant in list(asking):
            if not runs:
                break
            dealt[claimant.backfill_id] += 1
            runs -= 1
            if dealt[claimant.backfill_id] == claimant.asks:
                asking.remove(claimant)
    return dealt


def allowance(
    capacity: BackfillCapacity, load: Load, claimants: Sequence[Claimant], backfill_id: str, pools: Sequence[str]
) -> Allowance:
    """What backfill `backfill_id` (one of `claimants`) may run now, in the Dagster `pools`
    its assets use (rules 1-5)."""
    share = shares(backfill_cap(capacity, load), claimants).get(backfill_id, 0)
    room = {}
    for pool in pools:
        limit = load.pool_limits.get(pool)
        cap = capacity.pool_cap(pool, limit)
        if cap is None:
            continue
        if limit is not None:  # production keeps the slots it holds, and one free for its next run
            cap = min(cap, _kept_free(limit) - load.production_pool_runs.get(pool, 0))
        room[pool] = max(0, cap - load.other_backfill_pool_runs.get(pool, 0))
    return Allowance(share, room)


def fewer_runs_reason(
    capacity: BackfillCapacity, load: Load, claimants: Sequence[Claimant], backfill_id: str
) -> str | None:
    """Why backfill `backfill_id` (one of `claimants`) may run fewer runs now than its
    --max-parallel asks, as one clause: `runs at most 3 at a time, not --max-parallel 4:
    <the rules that cut it, with their dagster.yaml keys>`; None when it gets all it asks."""
    asks = next(claimant.asks for claimant in claimants if claimant.backfill_id == backfill_id)
    cap = backfill_cap(capacity, load)
    share = shares(cap, claimants).get(backfill_id, 0)
    if share >= asks:
        return None
    reasons = []
    if capacity.max_runs is not None and capacity.max_runs < asks:
        reasons.append(f"partition_assets.backfills.max_runs is {capacity.max_runs}")
    under = capacity.max_runs_under_production
    if load.production_runs and under is not None and under < asks:
        reasons.append(
            f"{_runs(load.production_runs)} of production queued or running, and "
            f"partition_assets.backfills.max_runs_under_production is {under}"
        )
    queue = load.max_concurrent_runs
    if queue is not None and queue - capacity.reserve_runs - load.production_runs < asks:
        parts = [f"the instance runs at most {queue} at a time (run_queue.max_concurrent_runs)"]
        if capacity.reserve_runs:
            parts.append(
                f"partition_assets.backfills.reserve_runs keeps {capacity.reserve_runs} free for production runs"
            )
        if load.production_runs:
            parts.append(f"{_runs(load.production_runs)} of production hold slots")
        reasons.append(", ".join(parts))
    others = len(claimants) - 1
    if cap is not None and share < min(asks, cap) and others:
        plural = others > 1
        reasons.append(f"{others} other running backfill{'s' if plural else ''} share{'' if plural else 's'} it")
    return f"runs at most {share} at a time, not --max-parallel {asks}: {'; '.join(reasons)}"


def _runs(count: int) -> str:
    return f"{count} run{'s' if count > 1 else ''}"
