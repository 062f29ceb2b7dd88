"""Where each backfill stands in the deployment's backfill capacity, as `backfill list` and
`backfill status` show it: its share of the capacity now, its place in the queue, its
launch window and when it next launches.

Read from the instance as the launch gate reads it (claims.py), at the instant `now`
the caller passes; nothing is written. A running backfill whose coordinator is not live
(dead, or not announced yet) has no share and no place: it launches nothing.

Not guaranteed: a snapshot; each coordinator decides again every second.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import dagster as dg

from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.running.capacity import backfill_cap, shares
from partition_assets.backfill.running.claims import capacity_of, claimants, instance_load
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore


@dataclass(frozen=True)
class Standing:
    """One backfill's place: the runs it may have now (`share`, its --max-parallel when the
    deployment caps nothing) and its `position` among the running backfills with a live
    coordinator (1 is served first); both None when it is not running, or its coordinator
    is not live."""

    record: BackfillRecord
    share: int | None
    position: int | None

    def line(self, now: datetime) -> str:
        """`<id> <status> priority P share N queue #Q window W (next launch ...)`."""
        spec = self.record.spec
        parts = [f"{self.record.id:<12} {self.record.status.value:<15} priority {spec.priority}"]
        if self.position is not None:
            parts.append(f"share {self.share} runs  queue #{self.position}")
        elif self.record.status == BackfillStatus.RUNNING:
            parts.append(f"no share: no live coordinator (see `partition-assets backfill status {self.record.id}`)")
        parts.append(launch_line(self.record, now))
        return "  ".join(parts)


def launch_line(record: BackfillRecord, now: datetime) -> str:
    """When `record` launches its nodes next, seen at `now`: its window and pause."""
    window = record.spec.launch_window()
    if record.status == BackfillStatus.PAUSED:
        return "paused: launches nothing until `partition-assets backfill unpause " + record.id + "`"
    if window is None:
        return "window: any time"
    opens = window.next_open(now)
    when = "now (open)" if opens <= now else f"next launch at {opens:%Y-%m-%d %H:%M} UTC"
    return f"window {window}: {when}"


def standings(instance: dg.DagsterInstance, store: BackfillStore) -> list[Standing]:
    """Every recorded backfill's standing, oldest first.

    Raises:
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
    """
    records = [store.load(backfill_id) for backfill_id in store.ids()]
    lined_up = claimants(instance, store, None)
    order = sorted(lined_up, key=lambda claimant: -claimant.priority)  # stable: oldest first within a priority
    position = {claimant.backfill_id: index + 1 for index, claimant in enumerate(order)}
    dealt = shares(backfill_cap(capacity_of(instance), instance_load(instance, {}, "", set())), lined_up)
    return [Standing(record, dealt.get(record.id), position.get(record.id)) for record in records]
