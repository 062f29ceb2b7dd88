"""What a staged backfill that failed tells its user: that nothing was published, though
some of its nodes succeeded, and what publishes them.

A staged backfill's succeeded nodes have staged their output; its tables, and the
materializations Dagster shows, change only when every node has succeeded and the gate
passed. A failed one publishes nothing, while `status` shows its succeeded nodes as
succeeded: the last line of `backfill run` (and `retry`, `resume`) and of `backfill status`
say so, counting staged against published, and name the fix. The succeeded nodes of an
asset another IO manager stores are not staged: it wrote them as they ran, and their runs
recorded them (running/coordinator.py). The line names those assets apart, with the count of
nodes written, and the staged ones whose tables and materializations are unchanged.

Not guaranteed: a per-node backfill published each succeeded node as it finished; it gets no
such line.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import dagster as dg

from partition_assets.backfill.model import Node, NodeStatus, PublishMode
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.running.progress import counted
from partition_assets.run_tags import defers_asset_events


def nothing_published(
    backfill_id: str,
    spec: BackfillSpec,
    states: Mapping[Node, NodeStatus],
    ran: Mapping[Node, tuple[NodeStatus, dg.DagsterRun]],
    total: int,
) -> str | None:
    """For a staged backfill stopped by failed nodes some others of which succeeded (`states`,
    of its `total` nodes; `ran`, each node that ran with its latest run: record.node_states):
    one sentence saying nothing was published, what was written nonetheless (the nodes whose
    run recorded its own materialization: their IO manager does not stage) and what publishes
    the rest; None for a per-node backfill or one none of whose nodes succeeded."""
    # A node with no run of the backfill (a catch-up left it alone as current, which a run's
    # states count as done) wrote and staged nothing: `run` and `status` count the same nodes.
    succeeded = [node for node, state in states.items() if state == NodeStatus.SUCCEEDED and node in ran]
    if spec.publish != PublishMode.staged or not succeeded:
        return None
    # Only a run that recorded its own materialization wrote as it ran.
    written = {node for node in succeeded if not defers_asset_events(ran[node][1].tags)}
    staged = [node for node in succeeded if node not in written]
    retry = (
        f"`partition-assets backfill retry {backfill_id}` runs the failed nodes again, then publishes every "
        "staged node once all have succeeded and the gate passes."
    )
    if not written:
        return (
            f"Nothing was published: {len(staged)} of {total} nodes staged, 0 published (the tables and Dagster's "
            f"materializations are unchanged); {retry}"
        )
    unchanged = f" (the tables and Dagster's materializations of {_assets(staged)} are unchanged)" if staged else ""
    return (
        f"Nothing was published: {len(staged)} of {total} nodes staged, 0 published{unchanged}; "
        f"{counted(len(written), 'node')} of {_assets(written)} were written by their IO manager as they ran, "
        f"which stages nothing (recorded as materialized, as Dagster's runs record them); {retry}"
    )


def _assets(nodes: Collection[Node]) -> str:
    """The assets of `nodes`, each once, sorted: `a, b`."""
    return ", ".join(sorted({node.asset.to_user_string() for node in nodes}))
