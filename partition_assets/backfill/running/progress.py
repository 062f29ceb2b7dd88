"""Progress lines and the outcome of a backfill run, worded the same on every surface
(the command line prints them, the Launchpad job logs them)."""

import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from partition_assets.backfill.model import Node, NodeResult, NodeStatus, RunUnit
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.planning.node_runs import asset_counts

_FAILED_SHOWN = 10
# How `status` and a run's summary name a node a --catch-up start left alone as current.
CURRENT = "current (skipped by --catch-up)"
# The ETA is shown once this share of a run's nodes, and at least _ETA_LEAST of them, finished:
# the first results pace nothing (they include the workers' and Spark's start-up).
_ETA_SHARE = 0.1
_ETA_LEAST = 3
# How long a progress line may wait to be logged with those after it.
GROUP_SECONDS = 1.0


@dataclass(frozen=True)
class Tally:
    """Where a run of a backfill stands: of its `total` nodes, `done` finished (`failed` of
    them failed), `running` in runs launched; `eta_seconds` until the last finishes, at the
    pace of this run since its first node finished (None until a tenth of the nodes it runs,
    and at least 3, finished: before that the pace says little)."""

    total: int
    done: int
    failed: int
    running: int
    eta_seconds: float | None
    staged: bool = False  # a staged backfill: its finished nodes are staged, published only at its end


class Progress:
    """Counts finished nodes of one run of backfill `backfill_id`, starting from `done`;
    `clock` (seconds, monotonic) paces the ETA; `staged`: its nodes stage what they write."""

    def __init__(
        self,
        backfill_id: str,
        graph: BackfillGraph,
        done: Collection[Node],
        clock: Callable[[], float] = time.monotonic,
        staged: bool = False,
        current: int = 0,
    ) -> None:
        self.backfill_id = backfill_id
        # Of `done`, the nodes a --catch-up start left alone as current: a run's statuses hold
        # them as succeeded (never run), its summary names them apart, as `status` does.
        self._current = current
        self._staged = staged
        self._graph = graph
        self._total = graph.node_count()
        self._finished = asset_counts(done)
        self._done_before = len(done)
        self._running = 0
        self._clock = clock
        self._first_finished: float | None = None  # when this run's first node finished
        self._errors: dict[Node, str] = {}  # why each node that failed in this run failed

    def started(self) -> str:
        already = self._finished.total()
        return f"backfill {self.backfill_id}: {counted(self._total, 'node')}" + (
            f", {already} already done" if already else ""
        )

    def launched(self, unit: RunUnit) -> None:
        """Counts `unit`'s nodes as running until their results come (`line`)."""
        self._running += len(unit.nodes)

    def tally(self) -> Tally:
        done = self._finished.total()
        finished_here = done - self._done_before
        paced = finished_here >= max(_ETA_LEAST, _ETA_SHARE * (self._total - self._done_before))
        eta = None
        if paced and self._first_finished is not None:
            eta = (self._clock() - self._first_finished) / (finished_here - 1) * (self._total - done)
        return Tally(self._total, done, len(self._errors), self._running, eta, self._staged)

    def line(self, result: NodeResult) -> str:
        """`[done/total] asset done/asset-total partition seconds ok|FAILED: error (run id)`,
        the error being the user's `ErrorClass: message` (local_workers.failure_message)."""
        asset = result.node.asset
        if self._first_finished is None:
            self._first_finished = self._clock()
        self._finished[asset] += 1
        self._running = max(0, self._running - 1)
        if not result.succeeded:
            self._errors[result.node] = result.error or "run failed"
        mark = "skipped: no output" if result.skipped else "ok" if result.succeeded else f"FAILED: {result.error}"
        return (
            f"[{self._finished.total()}/{self._total}] {asset.to_user_string()} "
            f"{self._finished[asset]}/{len(self._graph.slices[asset])} {result.node.partition or '-'} "
            f"{result.ended - result.started:.1f}s {mark} (run {result.run_id})"
        )

    def summary(self, status: Mapping[Node, NodeStatus]) -> str:
        """`backfill <id>: 1 failed, 2 succeeded, 3 current (skipped by --catch-up)`: how many
        nodes of `status` ended in each state, the current ones apart from those that succeeded."""
        outcome = Counter(state.value for state in status.values())
        outcome[NodeStatus.SUCCEEDED.value] -= self._current
        shown = [f"{n} {state}" for state, n in sorted(outcome.items()) if n > 0]
        if self._current:
            shown.append(f"{self._current} {CURRENT}")
        return f"backfill {self.backfill_id}: " + ", ".join(shown)

    def failure(self, status: Mapping[Node, NodeStatus]) -> str | None:
        """What failed, grouped by cause, and how to retry it, on one line; None when every node
        succeeded: `backfill <id>: 7 failed: TableSchemaError: <message> (7 nodes: asset[p], ...);
        2 nodes blocked behind them. Fix and run ...`, the most frequent cause first."""
        failed = sorted(node for node, state in status.items() if state == NodeStatus.FAILED)
        blocked = sum(1 for state in status.values() if state == NodeStatus.BLOCKED)
        if not failed and not blocked:
            return None
        by_cause: dict[str, list[Node]] = {}
        for node in failed:
            by_cause.setdefault(self._errors.get(node, "failed in an earlier run"), []).append(node)
        causes = sorted(by_cause.items(), key=lambda cause_nodes: (-len(cause_nodes[1]), cause_nodes[0]))
        parts = [_cause(error, nodes) for error, nodes in causes]
        if blocked:
            parts.append(f"{counted(blocked, 'node')} blocked behind them")
        return (
            f"{self.summary(status)}: {'; '.join(parts)}. "
            f"Fix and run `partition-assets backfill retry {self.backfill_id}`."
        )


def _cause(error: str, nodes: list[Node]) -> str:
    """`error (n nodes: asset[partition], ...)`, the first _FAILED_SHOWN nodes named."""
    names = ", ".join(f"{n.asset.to_user_string()}[{n.partition}]" for n in nodes[:_FAILED_SHOWN])
    more = ", …" if len(nodes) > _FAILED_SHOWN else ""
    return f"{error} ({counted(len(nodes), 'node')}: {names}{more})"


def counted(count: int, noun: str) -> str:
    """`1 node`, `2 nodes`: a count and its noun, plural unless one."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


class GroupedLines:
    """Hands the lines `add`ed to `emit` joined, one call per GROUP_SECONDS at most, from the
    thread that adds them; on exit, what is left. For a Dagster log: an event costs ~4 ms of
    CPU (bench/scale_bench.py), so a line per node would cost more than scheduling it.

    A line after a quiet GROUP_SECONDS goes out at once, with any held before it; lines that
    follow it within GROUP_SECONDS wait for the next line after that, or for the exit.

    Why no thread of its own: a Dagster log writes each event inside its logging handler's
    lock, and a Dagster run started meanwhile in the same process (the publish records its
    materializations in one) reconfigures Python logging while holding logging's module
    lock, which the event write may need (SQLAlchemy's loggers check their level while
    connecting to Postgres). A thread emitting at that moment and the coordinator starting
    that run each waited for the other's lock, forever (a `--detach` coordinator on Postgres
    did, in CI). Emitting from the adding thread, which is the one that starts such runs,
    keeps the two apart.

    Not guaranteed: the last lines of a burst reach `emit` only with the next line or on exit
    (a backfill's coordinator adds one per finished node and per step after the nodes);
    `add` is not safe to call from several threads at once.
    """

    def __init__(self, emit: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> None:
        self._emit = emit
        self._clock = clock
        self._held: list[str] = []
        self._last_emit: float | None = None

    def add(self, line: str) -> None:
        self._held.append(line)
        now = self._clock()
        if self._last_emit is None or now - self._last_emit >= GROUP_SECONDS:
            self._emit_held(now)

    def _emit_held(self, now: float) -> None:
        if self._held:
            held, self._held = self._held, []
            self._emit("\n".join(held))
            self._last_emit = now

    def __enter__(self) -> "GroupedLines":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._emit_held(self._clock())
