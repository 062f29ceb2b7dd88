"""The types every part of the engine shares, at the bottom of backfill/: a node, its
status and result, and the unit a run covers.

Everything in backfill/ may import this module; it imports nothing of backfill/. The
sub-packages above it are layers, each importing only what is below it: planning, state,
publishing, running, dagster_ui, commands (partition_assets_tests/unit/test_layers.py).

Not guaranteed: these are values, not state; who changes a backfill's state, and how, is
state/ (its record, status and store).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import dagster as dg


@dataclass(frozen=True, order=True)
class Node:
    """One (asset, partition) of a backfill; partition is "" (keys.UNPARTITIONED) for an unpartitioned asset."""

    asset: dg.AssetKey
    partition: str


class NodeStatus(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    BLOCKED = "blocked"  # an upstream node failed


@dataclass(frozen=True)
class NodeResult:
    node: Node
    succeeded: bool
    run_id: str | None
    started: float  # epoch seconds: run bookkeeping, not asset logic
    ended: float
    error: str | None = None


@dataclass(frozen=True)
class RunUnit:
    """Contiguous partitions of one asset that run together, as one run (a partition
    range when several); `partitions` are in partition order."""

    asset: dg.AssetKey
    partitions: tuple[str, ...]

    @property
    def nodes(self) -> tuple[Node, ...]:
        return tuple(Node(self.asset, partition) for partition in self.partitions)
