"""The types every part of the engine shares, at the bottom of backfill/: a node, its
status and result, the unit a run covers, the commands on a backfill, and the closed sets of
choices a backfill's spec makes (how it publishes, where its runs run, what it does on a
leased partition, approval).

Everything in backfill/ may import this module; it imports nothing of backfill/. The
sub-packages above it are layers, each importing only what is below it: planning, state,
publishing, running, dagster_ui, commands (partition_assets_tests/unit/test_layers.py).

Not guaranteed: these are values, not state; who changes a backfill's state, and how, is
state/ (its record, status and store).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum

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


class BackfillCommand(StrEnum):
    """What is asked of a backfill, as its status table (state/status.py) and the refusals of
    a live coordinator (state/presence.py) name it. A StrEnum: equal to its word."""

    RUN = "run"
    RESUME = "resume"
    RETRY = "retry"
    CANCEL = "cancel"
    PAUSE = "pause"
    UNPAUSE = "unpause"
    PUBLISH = "publish"
    APPROVE = "approve"
    DISCARD = "discard"
    ROLLBACK = "rollback"
    RE_EXECUTE = "re-execute"  # a coordinator run of the engine job, re-executed


# The choices: StrEnums, equal to the words the command line and stored records use. Their
# members are named as those words (lower case), so that each is usable as it is as a Dagster
# config type (Dagster's config takes a member's name), as dagster-deltalake's WriteMode is;
# `per_node` is the one word a Python name cannot spell ("per-node").


class PublishMode(StrEnum):
    """How node runs publish: `staged`, every table in one commit after the validation gate
    (the default); `per-node`, each run its own partitions as it finishes."""

    staged = "staged"
    per_node = "per-node"


class RunsVia(StrEnum):
    """Where node runs execute: `local` worker processes of the coordinator (the default), or
    the instance's run `launcher` (its run coordinator and launcher)."""

    local = "local"
    launcher = "launcher"


class OnLease(StrEnum):
    """What a backfill does when a partition it writes is leased by another writer: `fail` at
    once (the default), or `wait`, queued, until it is free."""

    fail = "fail"
    wait = "wait"


class ApprovalChoice(StrEnum):
    """A backfill's own say on approval: `required` (it waits for `backfill approve`) or
    `none` (it publishes once its gate passes). Unset, its assets' metadata decides."""

    required = "required"
    none = "none"
