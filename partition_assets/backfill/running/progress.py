"""Progress lines and the outcome of a backfill run, worded the same on every surface
(the command line prints them, the Launchpad job logs them)."""

import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping

from partition_assets.backfill.planning.graph import BackfillGraph, Node
from partition_assets.backfill.running.scheduling import NodeResult, NodeStatus

_FAILED_SHOWN = 10
# How long a progress line may wait to be logged with those after it.
GROUP_SECONDS = 1.0


class Progress:
    """Counts finished nodes of one run of backfill `backfill_id`, starting from `done`."""

    def __init__(self, backfill_id: str, graph: BackfillGraph, done: Collection[Node]) -> None:
        self.backfill_id = backfill_id
        self._graph = graph
        self._total = graph.node_count()
        self._finished = Counter(node.asset for node in done)

    def started(self) -> str:
        already = self._finished.total()
        return f"backfill {self.backfill_id}: {self._total} nodes" + (f", {already} already done" if already else "")

    def line(self, result: NodeResult) -> str:
        """`[done/total] asset done/asset-total partition seconds ok|FAILED: error (run id)`."""
        asset = result.node.asset
        self._finished[asset] += 1
        mark = "ok" if result.succeeded else f"FAILED: {result.error}"
        return (
            f"[{self._finished.total()}/{self._total}] {asset.to_user_string()} "
            f"{self._finished[asset]}/{len(self._graph.slices[asset])} {result.node.partition or '-'} "
            f"{result.ended - result.started:.1f}s {mark} (run {result.run_id})"
        )

    def summary(self, status: Mapping[Node, NodeStatus]) -> str:
        outcome = Counter(status.values())
        return f"backfill {self.backfill_id}: " + ", ".join(f"{n} {s.value}" for s, n in sorted(outcome.items()))

    def failure(self, status: Mapping[Node, NodeStatus]) -> str | None:
        """What failed and how to retry it; None when every node succeeded."""
        failed = sorted(node for node, state in status.items() if state == NodeStatus.FAILED)
        blocked = sum(1 for state in status.values() if state == NodeStatus.BLOCKED)
        if not failed and not blocked:
            return None
        names = ", ".join(f"{n.asset.to_user_string()}[{n.partition}]" for n in failed[:_FAILED_SHOWN])
        return (
            f"{self.summary(status)}. Failed: {names}{' …' if len(failed) > _FAILED_SHOWN else ''}; "
            f"{blocked} nodes blocked behind them. Fix and run `partition-assets backfill retry {self.backfill_id}`."
        )


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
