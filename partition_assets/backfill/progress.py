"""Progress lines and the outcome of a backfill run, worded the same on every surface
(the command line prints them, the Launchpad job logs them)."""

from collections import Counter
from collections.abc import Collection, Mapping

from partition_assets.backfill.graph import BackfillGraph, Node
from partition_assets.backfill.scheduling import NodeResult, NodeStatus

_FAILED_SHOWN = 10


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
