"""What a staged backfill that failed tells its user: that nothing was published, though
some of its nodes succeeded, and what publishes them.

A staged backfill's succeeded nodes have staged their output; its tables, and the
materializations Dagster shows, change only when every node has succeeded and the gate
passed. A failed one publishes nothing, while `status` shows its succeeded nodes as
succeeded: the last line of `backfill run` (and `retry`, `resume`) and of `backfill status`
say so, counting staged against published, and name the fix.

Not guaranteed: a per-node backfill published each succeeded node as it finished; it gets no
such line.
"""

from __future__ import annotations

from collections.abc import Mapping

from partition_assets.backfill.model import Node, NodeStatus, PublishMode
from partition_assets.backfill.planning.spec import BackfillSpec


def nothing_published(
    backfill_id: str, spec: BackfillSpec, states: Mapping[Node, NodeStatus], total: int
) -> str | None:
    """For a staged backfill stopped by failed nodes some others of which succeeded (`states`,
    of its `total` nodes): one sentence saying nothing was published and what publishes it;
    None for a per-node backfill or one none of whose nodes succeeded."""
    staged = sum(1 for state in states.values() if state == NodeStatus.SUCCEEDED)
    if spec.publish != PublishMode.staged or staged == 0:
        return None
    return (
        f"Nothing was published: {staged} of {total} nodes staged, 0 published (the tables and Dagster's "
        f"materializations are unchanged); `partition-assets backfill retry {backfill_id}` runs the failed nodes "
        "again, then publishes every staged node once all have succeeded and the gate passes."
    )
