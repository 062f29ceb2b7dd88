"""The types every part of the engine shares, at the bottom of backfill/: a node, its
status and result, the unit a run covers, a backfill's status and the commands on it, its
approval, and the closed sets of choices a backfill's spec makes (how it publishes, where its
runs run, what it does on a leased partition, approval).

Everything in backfill/ may import this module; it imports nothing of backfill/. The
sub-packages above it are layers, each importing only what is below it: planning, state,
publishing, running, dagster_ui, commands (partition_assets_tests/unit/test_layers.py).

Not guaranteed: these are values, not state; who changes a backfill's state, and how, is
state/ (its record, status and store).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from enum import Enum, StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the command line's flags import this module without Dagster
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
    # Its run succeeded without yielding the asset's output (`output_required=False`), or an
    # upstream node's was not produced: Dagster skips such a step. Nothing is recorded of it.
    SKIPPED = "skipped"


@dataclass(frozen=True)
class NodeResult:
    node: Node
    succeeded: bool
    run_id: str | None
    started: float  # epoch seconds: run bookkeeping, not asset logic
    ended: float
    error: str | None = None
    skipped: bool = False  # the run succeeded without yielding the node's output (NodeStatus.SKIPPED)


@dataclass(frozen=True)
class RunUnit:
    """Contiguous partitions of one asset that run together, as one run (a partition
    range when several); `partitions` are in partition order."""

    asset: dg.AssetKey
    partitions: tuple[str, ...]

    @property
    def nodes(self) -> tuple[Node, ...]:
        return tuple(Node(self.asset, partition) for partition in self.partitions)


class BackfillStatus(StrEnum):
    """Where a backfill stands; which status may follow which is state/status.py's. A
    StrEnum: it compares equal to its value, as stored."""

    RUNNING = "running"  # its nodes run (or its coordinator died while they did)
    CANCELED = "canceled"  # stopped by `backfill cancel` or the UI: resume, retry or discard
    FAILED = "failed"  # nodes failed, or its leases lapsed: retry, resume or discard
    DONE = "done"  # published per node (not staged): final
    GATE_FAILED = "gate_failed"  # staged, its gate failed: publish --force or discard
    PUBLISH_REFUSED = "publish_refused"  # a foreign commit; nothing published: publish --force or discard
    PUBLISHING = "publishing"  # committing its tables: resume finishes, rollback undoes
    PUBLISHED = "published"  # rollback undoes it
    DISCARDED = "discarded"  # its staged data deleted: final
    ROLLING_BACK = "rolling_back"  # restoring its tables: resume finishes
    ROLLED_BACK = "rolled_back"  # final
    # Gate passed, leases parked, freeze kept: `backfill approve` publishes, discard or expiry ends it.
    AWAITING_APPROVAL = "awaiting_approval"
    PAUSED = "paused"  # launches nothing new, its runs in flight finishing: unpause runs it on
    # Its rollback asked for under an approval policy: `backfill approve` rolls it back.
    ROLLBACK_AWAITING_APPROVAL = "rollback_awaiting_approval"


@dataclass(frozen=True)
class Approval:
    """A backfill's approval as its record keeps it (state/approval.py says when one is
    needed and who may give it): when the backfill started waiting and when that wait
    expires (None: never), then who approved it and when. Each is None until it happened.
    The times are bookkeeping (when people acted), not asset logic.

    Not guaranteed: an expired approval is acted on (discarded) only when someone next tries
    to approve it (publishing/approval_steps.py).
    """

    awaiting_since: datetime | None = None
    expires_at: datetime | None = None
    approved_by: str | None = None
    approved_at: datetime | None = None
    # who asked for what awaits approval, when not the launcher (a rollback); None otherwise
    requested_by: str | None = None

    def expired(self, now: datetime) -> bool:
        """Whether the wait expired at or before `now`."""
        return self.expires_at is not None and self.expires_at <= now

    def to_json(self) -> dict[str, str]:
        """The fields that are set, times as ISO 8601 text (as records of earlier releases hold them)."""
        return {
            field.name: value.isoformat() if isinstance(value, datetime) else value
            for field in fields(self)
            if (value := getattr(self, field.name)) is not None
        }

    @classmethod
    def from_json(cls, saved: Mapping[str, str | None] | None) -> Approval | None:
        """The approval `to_json` wrote; None for a record that never waited (`{}`)."""
        if not saved:
            return None

        def time(name: str) -> datetime | None:
            value = saved.get(name)
            return datetime.fromisoformat(value) if value else None

        return cls(
            time("awaiting_since"),
            time("expires_at"),
            saved.get("approved_by"),
            time("approved_at"),
            saved.get("requested_by"),
        )


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
    EXTEND = "extend"  # widens the time range of a backfill no coordinator holds (commands/extending.py)
    RETRACT = "retract"  # a new backfill removing partitions: it holds them as their coordinator
    RE_EXECUTE = "re-execute"  # a coordinator run of the engine job, re-executed
    COORDINATE = "coordinate"  # the coordinator's own steps (the gate, approval, the publish): no command's


# The choices: StrEnums, equal to the words the command line and stored records use. Their
# members are named as those words (lower case), so that each is usable as it is as a Dagster
# config type (Dagster's config takes a member's name), as dagster-deltalake's WriteMode is;
# `per_node` is the one word a Python name cannot spell ("per-node").


class InputsAsOf(StrEnum):
    """What `--inputs-as-of` pins inputs to when it is not an ISO time: `original`, each node
    reads what the original materialization of its partition read. The spec keeps the word
    as given (a plain string, as records store it), equal to the member."""

    original = "original"


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


class Batching(StrEnum):
    """How the partitions of an asset with a `BackfillPolicy` share runs: `policy`, as Dagster's
    backfill chunks them (the default: `single_run()` one run per contiguous range,
    `multi_run(n)` runs of n partitions in partition order, the last one shorter); `engine`, as
    the engine's scheduler batches ready partitions by their slack, up to the policy's size
    (backfill/running/scheduling.py). Assets without a policy run one partition per run either way."""

    policy = "policy"
    engine = "engine"
